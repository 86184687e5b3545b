"""Production hours folded into an SLO-capacity answer: expectations computed by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import capacity as cap
from capacity.measured.serving_model import Curves

SLO = cap.SloTarget(1.0, 0.05)


def lab_answer(value: float = 2.0) -> cap.SloCapacity:
    """A lab answer at 500 prompt / 200 completion tokens on one GPU, range 0.8x-1.2x."""
    return cap.SloCapacity(
        requests_per_s_per_replica=value,
        tokens_per_s_per_replica=value * 700,
        tokens_per_s_per_gpu=value * 700,
        prompt_tokens=500.0,
        completion_tokens=200.0,
        binding="ttft",
        method="interpolated",
        concurrency=10.0,
        note="lab",
        requests_per_s_per_replica_low=value * 0.8,
        requests_per_s_per_replica_high=value * 1.2,
    )


def hour(
    load: float, ttft: float = 0.5, tpot: float = 0.03, **changes: float
) -> cap.ProductionHour:
    values = {"prompt_tokens": 500.0, "completion_tokens": 200.0, "age_hours": 1.0} | changes
    return cap.ProductionHour(
        requests_per_s_per_replica=load, ttft_p95_s=ttft, tpot_p95_s=tpot, **values
    )


def test_hours_from_totals() -> None:
    observed = cap.ProductionHour.from_totals(
        replicas=2,
        requests=7200,
        prompt_tokens=3_600_000,
        completion_tokens=1_440_000,
        ttft_p95_s=0.4,
        tpot_p95_s=0.02,
        age_hours=3,
    )
    assert observed == cap.ProductionHour(1.0, 500.0, 200.0, 0.4, 0.02, 3.0)
    empty = {"prompt_tokens": 0, "completion_tokens": 0, "ttft_p95_s": 0.4, "tpot_p95_s": 0.02}
    assert cap.ProductionHour.from_totals(replicas=2, requests=0, **empty) is None


def test_no_hour_near_the_mix_leaves_the_lab_answer() -> None:
    far = [
        hour(5.0, prompt_tokens=760.0),  # 1.52x the prompt tokens
        hour(5.0, completion_tokens=130.0),  # 1.54x fewer completion tokens
        hour(5.0, age_hours=14 * 24 + 1),  # older than 14 days
    ]
    answer = cap.with_production(lab_answer(), far, SLO)
    assert answer == lab_answer()
    assert answer.production_hours == 0


def test_hours_below_the_lab_answer_never_raise_it_and_lift_its_low_edge() -> None:
    answer = cap.with_production(lab_answer(), [hour(0.5), hour(1.7), hour(1.0)], SLO)
    assert answer.requests_per_s_per_replica == 2.0
    assert answer.requests_per_s_per_replica_low == 1.7  # was 1.6: production met 1.7
    assert answer.requests_per_s_per_replica_high == pytest.approx(2.4)
    assert answer.production_hours == 3
    assert "production met the SLO up to 1.7" in answer.note


def test_a_load_met_above_the_lab_answer_raises_it_to_that_load_only() -> None:
    near = [hour(1.0), hour(2.2, prompt_tokens=740.0)]  # 1.48x: near
    answer = cap.with_production(lab_answer(), near, SLO)
    assert answer.requests_per_s_per_replica == 2.2
    assert answer.requests_per_s_per_replica_low == 2.2
    assert answer.requests_per_s_per_replica_high == pytest.approx(2.4)
    assert answer.binding == "measured range"
    assert answer.tokens_per_s_per_gpu == pytest.approx(2.2 * 700)
    assert answer.production_hours == 2


def test_a_knee_bracketed_by_production_is_read_like_a_measured_one() -> None:
    # met at 1.0 (TTFT 0.6 s), broke TTFT at 1.5 (1.4 s): 0.6 + 0.5 x 0.8 = 1.0 at 1.25
    near = [hour(0.4), hour(1.0, ttft=0.6), hour(1.5, ttft=1.4, tpot=0.04)]
    answer = cap.with_production(lab_answer(), near, SLO)
    assert answer.requests_per_s_per_replica == pytest.approx(1.25)
    assert answer.requests_per_s_per_replica_low == 1.0
    assert answer.requests_per_s_per_replica_high == 1.5
    assert answer.binding == "ttft"
    assert answer.tokens_per_s_per_replica == pytest.approx(1.25 * 700)
    assert answer.concurrency is None
    assert "production knee" in answer.note and "3 production hours" in answer.note


def test_the_first_limit_crossed_binds_and_later_hours_within_the_slo_are_ignored() -> None:
    # TPOT crosses first: (0.05 - 0.03) / (0.11 - 0.03) = 0.25 before TTFT's (1 - .5)/(1.5 - .5)
    near = [hour(1.0), hour(2.0, ttft=1.5, tpot=0.11), hour(3.0)]
    answer = cap.with_production(lab_answer(), near, SLO)
    assert answer.requests_per_s_per_replica == pytest.approx(1.25)
    assert answer.binding == "tpot"
    assert answer.requests_per_s_per_replica_high == 2.0


def test_a_bracketed_knee_stays_under_the_physical_ceiling() -> None:
    near = [hour(2.5, ttft=0.8), hour(3.5, ttft=1.2)]  # knee 3.0
    answer = cap.with_production(lab_answer(), near, SLO, ceiling_requests_per_s=2.8)
    assert answer.requests_per_s_per_replica == 2.8
    assert answer.binding == "physics"
    assert answer.requests_per_s_per_replica_high == 2.8


def test_the_slo_broken_below_the_lab_answer_lowers_it() -> None:
    # broke TTFT by 1.2x at 1.8 requests/s: below 1.8 / 1.2 = 1.5
    answer = cap.with_production(lab_answer(), [hour(1.8, ttft=1.2), hour(2.5, ttft=2.0)], SLO)
    assert answer.requests_per_s_per_replica == pytest.approx(1.5)
    assert answer.requests_per_s_per_replica_low == pytest.approx(1.5)
    assert answer.requests_per_s_per_replica_high == 1.8
    assert answer.binding == "ttft"
    assert "lowered" in answer.note


def test_the_slo_broken_well_above_the_lab_answer_only_caps_the_range() -> None:
    answer = cap.with_production(lab_answer(), [hour(2.2, ttft=1.25)], SLO)  # 2.2 / 1.25 = 1.76
    assert answer.requests_per_s_per_replica == pytest.approx(1.76)
    answer = cap.with_production(lab_answer(), [hour(4.0, ttft=1.25)], SLO)  # 3.2: above 2
    assert answer.requests_per_s_per_replica == 2.0
    assert answer.requests_per_s_per_replica_high == pytest.approx(2.4)
    answer = cap.with_production(lab_answer(), [hour(2.2, ttft=1.05)], SLO)  # 2.095: above 2
    assert answer.requests_per_s_per_replica == 2.0
    assert answer.requests_per_s_per_replica_high == pytest.approx(2.2)


def test_the_model_expects_the_measured_latency_below_saturation(loadtests: Path) -> None:
    path = loadtests / "meta-llama3-8b-instruct__H100-SXM-80GB-HBM3__nim-trtllm_genai-perf.csv"
    table = cap.read_loadtest_csv(
        path.read_text(), file_name=path.name, tensor_parallel=1, precision="fp8"
    )
    model = cap.fit_slo_model(table)
    rows = table.mix_rows(2000, 200)
    assert rows is not None
    hours = [
        cap.ProductionHour(r.request_throughput_rps, 2000.0, 200.0, r.ttft_p95_s, r.tpot_p95_s)
        for r in rows.itertuples()
    ]
    expected = cap.expected_p95(model, hours)
    judged = [(h, e) for h, e in zip(hours, expected, strict=True) if e is not None]
    # concurrency 1 .. 50 judged; 100 .. 250 are within 20 % of the model's highest rate
    assert [round(h.requests_per_s_per_replica, 2) for h, _ in judged] == [
        0.84,
        1.62,
        3.27,
        5.2,
        8.84,
    ]
    for hour, (ttft, tpot) in judged:
        assert 0.85 < hour.ttft_p95_s / ttft < 1.15
        assert 0.85 < hour.tpot_p95_s / tpot < 1.15
    slower = cap.expected_p95(model, [replace(judged[0][0], requests_per_s_per_replica=2.0)])
    assert slower[0] is not None and slower[0][0] > judged[0][1][0]
    assert cap.expected_p95(model, []) == []


class LinearModel:
    """A lab model whose latencies grow linearly with load up to 10 requests/s per replica:
    TTFT = 0.1 + 0.2 L s, TPOT = 0.02 + 0.004 L s at every mix; its capacity at an SLO is
    where the first reaches its limit."""

    def curves_at(self, prompts: np.ndarray, completions: np.ndarray) -> list[Curves]:
        rate = np.linspace(0.0, 10.0, 101)
        ttft, tpot = 0.1 + 0.2 * rate, 0.02 + 0.004 * rate
        return [Curves(rate, ttft, ttft, tpot, tpot) for _ in prompts]

    def capacity(self, *, slo: cap.SloTarget, **_: object) -> cap.SloCapacity:
        return lab_answer(min((slo.ttft_p95_s - 0.1) / 0.2, (slo.tpot_p95_s - 0.02) / 0.004))


@pytest.mark.parametrize(
    ("ttft", "expected"),
    [
        # 1.5x the model's 0.5 s at 2 requests/s: the SLO tightened to 1/1.5 s, met at
        # (0.667 - 0.1) / 0.2 = 2.833 by the model's curve
        (0.75, (1 / 1.5 - 0.1) / 0.2),
        (0.525, 4.5),  # 1.05x: within 10 %, the lab's 4.5 stands
        (0.25, 4.5),  # faster than the model: never raises
    ],
)
def test_production_slower_than_the_lab_model_lowers_the_lab_answer(
    ttft: float, expected: float
) -> None:
    model = LinearModel()
    lab = model.capacity(slo=SLO)
    assert lab.requests_per_s_per_replica == pytest.approx(4.5)
    near = [hour(2.0, ttft=ttft, tpot=0.028)]
    answer = cap.with_production(lab, near, SLO, model=model)  # type: ignore[arg-type]
    assert answer.requests_per_s_per_replica == pytest.approx(expected)
    assert answer.requests_per_s_per_replica_low == pytest.approx(min(expected, 3.6))
    assert ("ran 1.50x and 1.00x" in answer.note) == (ttft == 0.75)


def expected_ttft(load: float) -> float:
    return 0.1 + 0.2 * load  # LinearModel's


def fleet(loads: list[float], *, slower: float, first_age: float) -> list[cap.ProductionHour]:
    """Hours at ``loads`` serving ``slower`` x LinearModel's TTFT (TPOT as it expects), one an
    hour from ``first_age`` hours ago on."""
    return [
        hour(load, ttft=slower * expected_ttft(load), tpot=0.02 + 0.004 * load, age_hours=age)
        for age, load in enumerate(loads, start=int(first_age))
    ]


def test_a_slowdown_since_a_change_is_read_from_the_hours_since() -> None:
    model = LinearModel()
    lab = model.capacity(slo=SLO)  # 4.5 requests/s: TTFT 0.1 + 0.2 x 4.5 = 1.0 s
    # two days' worth of hours as measured at loads of every day, then three 30 % slower
    day = [1.0, 2.0, 3.0, 1.5, 2.5, 4.4]
    before = fleet(day + day[::-1], slower=1.0, first_age=4)
    slowed = fleet([1.0, 1.5, 2.0], slower=1.3, first_age=1)
    # as measured: within the SLO up to 4.4, the lab's 4.5 stands
    kept = cap.with_production(lab, before, SLO, model=model)  # type: ignore[arg-type]
    assert kept.requests_per_s_per_replica == 4.5
    answer = cap.with_production(lab, before + slowed, SLO, model=model)  # type: ignore[arg-type]
    # the three slow hours alone count (the median over all twelve would be 1.0x: unchanged);
    # the SLO tightened by 1.3: TTFT 1.3 x (0.1 + 0.2 L) = 1.0 at L = 3.346
    assert answer.production_hours == 3
    assert answer.requests_per_s_per_replica == pytest.approx((1 / 1.3 - 0.1) / 0.2)
    assert "the fleet changed: 12 older hours left out" in answer.note
    # two slow hours of the newest six are not a change: every hour counts
    two = cap.with_production(lab, before + slowed[:2], SLO, model=model)  # type: ignore[arg-type]
    assert two.production_hours == 14
    assert two.requests_per_s_per_replica == 4.5
    # nor are three at loads no older hour was served at (here 3x below the lowest)
    low = [replace(h, requests_per_s_per_replica=0.3) for h in slowed]
    apart = cap.with_production(lab, before + low, SLO, model=model)  # type: ignore[arg-type]
    assert apart.production_hours == 15
    # without SHIFT_HOURS older hours to compare with, no change is looked for
    few = cap.with_production(lab, before[:5] + slowed, SLO, model=model)  # type: ignore[arg-type]
    assert few.production_hours == 8


def test_a_lab_off_from_the_start_is_no_change() -> None:
    model = LinearModel()
    lab = model.capacity(slo=SLO)
    # every hour 1.3x the lab's TTFT, the newest as slow as the older: one fleet, all count
    hours = fleet([1.0, 1.5, 2.0, 2.5, 3.0, 3.5] * 2, slower=1.3, first_age=1)
    answer = cap.with_production(lab, hours, SLO, model=model)  # type: ignore[arg-type]
    assert answer.production_hours == 12
    assert "changed" not in answer.note
    assert answer.requests_per_s_per_replica == pytest.approx((1 / 1.3 - 0.1) / 0.2)


def test_only_breaking_hours_raise_the_lab_answer_to_what_a_convex_latency_allows() -> None:
    model = LinearModel()
    lab = model.capacity(slo=SLO)  # 4.5 requests/s
    # broke both limits by 1.2x at 9 requests/s (beyond 80 % of the model's 10: not judged):
    # from the lab's latency at its lowest load, 0.1 / 1.0 and 0.02 / 0.05 = 0.4 of the
    # limits, a convex TTFT through 1.2 at 9 reaches 1.0 at 9 x 0.9 / 1.1 = 7.36 or later, a
    # convex TPOT at 9 x (1 - 0.4) / (1.2 - 0.4) = 6.75 or later: the earlier binds
    broke = [hour(9.0, ttft=1.2, tpot=0.06)]
    answer = cap.with_production(lab, broke, SLO, model=model)  # type: ignore[arg-type]
    assert answer.requests_per_s_per_replica == pytest.approx(6.75)
    assert answer.requests_per_s_per_replica_high == pytest.approx(9.0)
    assert answer.binding == "tpot"
    assert "raised" in answer.note and "convex" in answer.note
    # broken 3x over the limit: the floor, 9 x 0.9 / 2.9 = 2.79, is below 9 / 3, which stands
    far = cap.with_production(lab, [hour(9.0, ttft=3.0)], SLO, model=model)  # type: ignore[arg-type]
    assert far.requests_per_s_per_replica == pytest.approx(3.0)
    # a limit the lab's latency at its lowest load already breaks (TPOT 0.02 > 0.019), and
    # production broke it too: no floor
    tight = cap.SloTarget(1.0, 0.019)
    tight_lab = lab_answer(0.5)
    kept = cap.with_production(tight_lab, [hour(9.0, ttft=1.2, tpot=0.025)], tight, model=model)  # type: ignore[arg-type]
    assert kept.requests_per_s_per_replica == pytest.approx(0.5)


def test_each_limit_is_bounded_by_its_own_latency_at_no_load() -> None:
    model = LinearModel()
    lab = model.capacity(slo=SLO)  # 4.5 requests/s
    # TTFT broke by 1.2x at 9 requests/s, TPOT within its limit: the TPOT the lab serves at
    # its lowest load (0.4 of its limit) says nothing of where TTFT, at 0.1, crosses its own:
    # 9 x (1 - 0.1) / (1.2 - 0.1) = 7.36 (not 9 x 0.6 / 0.8 = 6.75, the larger share of both)
    answer = cap.with_production(lab, [hour(9.0, ttft=1.2, tpot=0.03)], SLO, model=model)  # type: ignore[arg-type]
    assert answer.requests_per_s_per_replica == pytest.approx(9.0 * 0.9 / 1.1)
    assert answer.binding == "ttft"
    assert "TTFT limit at 9 requests/s per replica (1.20x the limit)" in answer.note
    # TPOT within its limit at 9 and 10x over it at 9.5: its chord from 0.4 would allow
    # 9.5 x 0.6 / 9.6 = 0.59, but it met its limit at 9, so it crosses it beyond 9 and
    # TTFT's 7.36 still binds
    hours = [hour(9.0, ttft=1.2, tpot=0.03), hour(9.5, ttft=2.0, tpot=0.5)]
    both = cap.with_production(lab, hours, SLO, model=model)  # type: ignore[arg-type]
    assert both.requests_per_s_per_replica == pytest.approx(9.0 * 0.9 / 1.1)
    assert both.binding == "ttft"


@pytest.mark.parametrize(
    ("slower", "expected"),
    [
        # the highest hour 1.5x the model's TTFT, a lower one as expected: the SLO tightened by
        # 1.5 (the median of both, 1.25, would give 3.5)
        ((1.0, 1.5), (1 / 1.5 - 0.1) / 0.2),
        # a lower hour 1.5x slower, the highest as expected: the lab's 4.5 stands
        ((1.5, 1.0), 4.5),
    ],
)
def test_within_the_slo_the_hour_nearest_the_knee_says_how_much_slower(
    slower: tuple[float, float], expected: float
) -> None:
    model = LinearModel()
    lab = model.capacity(slo=SLO)
    near = [
        hour(load, ttft=factor * expected_ttft(load), tpot=0.02 + 0.004 * load)
        for load, factor in zip((1.0, 2.0), slower, strict=True)
    ]
    answer = cap.with_production(lab, near, SLO, model=model)  # type: ignore[arg-type]
    assert answer.requests_per_s_per_replica == pytest.approx(expected)
