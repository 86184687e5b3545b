"""SLO capacity: the measured knee at measured mixes, the fitted model elsewhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import capacity as cap
from tests.capacity.loadtest_fixtures import NIM_70B_H100, synthetic_csv, synthetic_rows

SLO = cap.SloTarget(ttft_p95_s=1.5, tpot_p95_s=0.03)


@pytest.fixture(scope="module")
def nim_tp4(shared_data: Path) -> cap.LoadTestTable:
    text = (shared_data / "loadtests" / NIM_70B_H100).read_text()
    return cap.read_loadtest_csv_setups(text, file_name=NIM_70B_H100)[0]


@pytest.fixture(scope="module")
def nim_model(nim_tp4: cap.LoadTestTable) -> cap.SloModel:
    return cap.fit_slo_model(nim_tp4)


def test_slo_target_is_validated() -> None:
    with pytest.raises(cap.InvalidParameterError, match="ttft_p95_s must be > 0"):
        cap.SloTarget(0.0, 0.05)
    with pytest.raises(cap.InvalidParameterError, match="tpot_p95_s must be a finite number"):
        cap.SloTarget(1.0, float("nan"))


@pytest.mark.parametrize(
    "slo", [cap.SloTarget(1.5, 0.03), cap.SloTarget(0.6, 0.024), cap.SloTarget(4.0, 0.045)]
)
def test_at_every_measured_mix_the_answer_is_the_measured_knee(
    nim_tp4: cap.LoadTestTable, nim_model: cap.SloModel, slo: cap.SloTarget
) -> None:
    answered = 0
    for prompt, completion in nim_tp4.mixes():
        try:
            knee = cap.measured_knee(
                nim_tp4,
                prompt_tokens=prompt,
                completion_tokens=completion,
                ttft_p95_s=slo.ttft_p95_s,
                tpot_p95_s=slo.tpot_p95_s,
            )
        except cap.SloUnreachableError:
            with pytest.raises(cap.SloUnreachableError):
                nim_model.capacity(prompt_tokens=prompt, completion_tokens=completion, slo=slo)
            continue
        assert knee is not None
        got = nim_model.capacity(prompt_tokens=prompt, completion_tokens=completion, slo=slo)
        assert got.method == "measured" and got.binding == knee.binding
        assert got.requests_per_s_per_replica == knee.requests_per_s
        assert got.tokens_per_s_per_gpu == knee.requests_per_s * (prompt + completion) / 4
        answered += 1
    assert answered >= 5


def test_convenience_function_matches_the_fitted_model(
    nim_tp4: cap.LoadTestTable, nim_model: cap.SloModel
) -> None:
    direct = cap.slo_capacity(
        nim_tp4, prompt_tokens=2000, completion_tokens=200, ttft_p95_s=1.5, tpot_p95_s=0.03
    )
    assert direct == nim_model.capacity(prompt_tokens=2000, completion_tokens=200, slo=SLO)
    # Measured: TTFT p95 1.459 s at concurrency 10, 3.490 s at 25.
    assert direct.binding == "ttft" and direct.concurrency == pytest.approx(10.3, abs=0.1)


@pytest.mark.parametrize(("prompt", "completion"), [(200, 200), (1000, 300)])
def test_decode_heavy_mix_has_far_less_capacity_than_one_tokens_per_s_figure_says(
    nim_model: cap.SloModel, prompt: int, completion: int
) -> None:
    base = nim_model.capacity(prompt_tokens=prompt, completion_tokens=completion, slo=SLO)
    heavy = nim_model.capacity(prompt_tokens=prompt, completion_tokens=5 * completion, slo=SLO)
    # One tokens/s figure per GPU keeps tokens/s constant, so requests/s would only fall by the
    # ratio of tokens per request; the SLO capacity falls much further.
    one_number_requests_per_s = (
        base.requests_per_s_per_replica * (prompt + completion) / (prompt + 5 * completion)
    )
    assert heavy.requests_per_s_per_replica < 0.75 * one_number_requests_per_s
    assert heavy.tokens_per_s_per_gpu < 0.75 * base.tokens_per_s_per_gpu


def test_unmeasured_mixes_say_how_they_were_obtained(nim_model: cap.SloModel) -> None:
    inside = nim_model.capacity(prompt_tokens=1000, completion_tokens=500, slo=SLO)
    outside = nim_model.capacity(prompt_tokens=1000, completion_tokens=4000, slo=SLO)
    assert (inside.method, outside.method) == ("interpolated", "extrapolated")
    assert inside.binding in ("ttft", "tpot") and "fitted to 6 measured mixes" in inside.note
    measured_low = nim_model.capacity(prompt_tokens=200, completion_tokens=1000, slo=SLO)
    measured_high = nim_model.capacity(prompt_tokens=2000, completion_tokens=1000 * 2, slo=SLO)
    between = nim_model.capacity(prompt_tokens=1000, completion_tokens=1000, slo=SLO)
    low, high = sorted(
        [measured_low.requests_per_s_per_replica, measured_high.requests_per_s_per_replica]
    )
    assert low < between.requests_per_s_per_replica < 2 * high


def test_a_mix_that_misses_the_slo_at_the_lowest_load_is_unreachable(
    nim_model: cap.SloModel,
) -> None:
    with pytest.raises(
        cap.SloUnreachableError,
        match=r"mix 7000 prompt / 1000 completion "
        r"tokens cannot meet the SLO .*p95 TTFT is 0\.552 s .*\(measured\)",
    ) as m:
        nim_model.capacity(prompt_tokens=7000, completion_tokens=1000, slo=cap.SloTarget(0.3, 0.05))
    assert m.value.limit == "ttft"
    with pytest.raises(cap.SloUnreachableError, match=r"p95 TTFT .* above the 0.2 s limit") as p:
        nim_model.capacity(prompt_tokens=6000, completion_tokens=800, slo=cap.SloTarget(0.2, 0.05))
    assert p.value.limit == "ttft" and p.value.value_s > 0.2
    with pytest.raises(cap.SloUnreachableError) as t:
        nim_model.capacity(prompt_tokens=300, completion_tokens=300, slo=cap.SloTarget(5, 0.01))
    assert t.value.limit == "tpot"


def test_vectorised_capacity_matches_the_scalar_answers(nim_model: cap.SloModel) -> None:
    prompts = np.array([[200.0, 1000.0, 7000.0], [1500.0, 200.0, 6000.0]])
    completions = np.array([[200.0, 500.0, 1000.0], [300.0, 1000.0, 800.0]])
    slo = cap.SloTarget(0.4, 0.03)
    got = nim_model.tokens_per_s_per_gpu(prompts, completions, slo)
    assert got.shape == (2, 3)
    for index in np.ndindex(prompts.shape):
        try:
            want = nim_model.capacity(
                prompt_tokens=prompts[index], completion_tokens=completions[index], slo=slo
            )
            assert got[index] == pytest.approx(want.tokens_per_s_per_gpu)
        except cap.SloUnreachableError:
            assert got[index] == 0.0
    assert (got == 0.0).sum() == 2  # 7000 and 6000 prompt tokens need over 0.4 s at idle


def test_model_runs_on_a_small_synthetic_table() -> None:
    table = cap.read_loadtest_csv(
        synthetic_csv(synthetic_rows(((500, 100), (500, 500), (2000, 200)), (1, 2, 4, 8, 16, 32))),
        file_name="toy.csv",
    )
    model = cap.fit_slo_model(table, gpus_per_replica=4)
    slo = cap.SloTarget(0.5, 0.012)
    measured = model.capacity(prompt_tokens=500, completion_tokens=500, slo=slo)
    assert measured.method == "measured"
    between = model.capacity(prompt_tokens=1000, completion_tokens=300, slo=slo)
    assert between.method == "interpolated" and between.requests_per_s_per_replica > 0
    assert between.tokens_per_s_per_gpu == pytest.approx(
        between.requests_per_s_per_replica * 1300 / 4
    )
    with pytest.raises(cap.InvalidParameterError, match="gpus_per_replica"):
        cap.fit_slo_model(table, gpus_per_replica=0)


def test_a_knee_on_a_flat_latency_curve_is_flagged(nim_model: cap.SloModel) -> None:
    slo = cap.SloTarget(ttft_p95_s=0.674, tpot_p95_s=0.0233)
    # 200/2,000 on H100 TP4 fp16: p95 TPOT 0.0210 s at concurrency 5, 0.0233 at 10, 0.0242 at 25
    decode = nim_model.capacity(prompt_tokens=200, completion_tokens=2000, slo=slo)
    flat = cap.limit_sensitivity(nim_model, decode, slo)
    assert flat is not None and flat.limit == "tpot" and flat.flat
    assert flat.tighter_requests_per_s < decode.requests_per_s_per_replica
    assert flat.looser_requests_per_s > 1.3 * flat.tighter_requests_per_s
    prefill = nim_model.capacity(prompt_tokens=2000, completion_tokens=200, slo=slo)
    steep = cap.limit_sensitivity(nim_model, prefill, slo)
    assert steep is not None and steep.limit == "ttft" and not steep.flat
    loose = cap.SloTarget(ttft_p95_s=500.0, tpot_p95_s=5.0)
    unbound = nim_model.capacity(prompt_tokens=200, completion_tokens=200, slo=loose)
    assert unbound.binding == "measured range"
    assert cap.limit_sensitivity(nim_model, unbound, loose) is None
