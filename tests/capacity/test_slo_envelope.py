"""The SLO capacity is monotone and meets the measured knees without a jump: more prompt or
completion tokens never give more requests/s, a looser SLO never gives less (property checks on
real load-test tables), and the envelope's parts behave as worked out by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import capacity as cap
from capacity.measured.serving_model import Curves, first_crossing
from capacity.measured.slo_envelope import KNEE_LENGTH, Envelope, grid_axis
from tests.capacity.loadtest_fixtures import NIM_70B_H100

# nested SLO levels: each looser than the one before in both limits
SLOS = (cap.SloTarget(0.3, 0.02), cap.SloTarget(0.674, 0.0233), cap.SloTarget(2.0, 0.05))
PROMPTS = np.geomspace(1, 8000, 31)
COMPLETIONS = np.geomspace(1, 4000, 23)


def _setup(shared_data: Path, tensor_parallel: int, precision: str) -> cap.LoadTestTable:
    text = (shared_data / "loadtests" / NIM_70B_H100).read_text()
    for table in cap.read_loadtest_csv_setups(text, file_name=NIM_70B_H100):
        if table.tensor_parallel == tensor_parallel and table.precision == precision:
            return table
    raise AssertionError(f"no TP{tensor_parallel} {precision} setup")


@pytest.fixture(scope="module")
def tp4(shared_data: Path) -> cap.SloModel:
    return cap.fit_slo_model(_setup(shared_data, 4, "fp16"))


@pytest.fixture(scope="module")
def tp8_fp8(shared_data: Path) -> cap.SloModel:
    return cap.fit_slo_model(_setup(shared_data, 8, "fp8"))


def _requests_per_s(model: cap.SloModel, prompts: np.ndarray, completions: np.ndarray, slo):
    context = model.ceilings.context_tokens
    per_gpu = model.tokens_per_s_per_gpu(prompts, completions, slo)
    rps = per_gpu * model.gpus_per_replica / (prompts + completions)
    return np.where(prompts + completions <= context, rps, np.nan)


@pytest.mark.parametrize("which", ["tp4", "tp8_fp8"])
def test_capacity_never_rises_with_tokens_nor_falls_with_a_looser_slo(
    which: str, request: pytest.FixtureRequest
) -> None:
    model = request.getfixturevalue(which)
    prompts, completions = np.meshgrid(PROMPTS, COMPLETIONS, indexing="ij")
    surfaces = [_requests_per_s(model, prompts, completions, slo) for slo in SLOS]
    tol = 1 + 1e-9
    for s in surfaces:
        assert np.nanmax(s) > 0
        assert not np.any(s[1:, :] > s[:-1, :] * tol), "more prompt tokens gave more"
        assert not np.any(s[:, 1:] > s[:, :-1] * tol), "more completion tokens gave more"
    for tighter, looser in zip(surfaces[:-1], surfaces[1:], strict=True):
        assert not np.any(looser * tol < tighter), "a looser SLO gave less"


def test_scalar_answers_keep_the_order_between_grid_points(tp4: cap.SloModel) -> None:
    rng = np.random.default_rng(32)
    slo = SLOS[1]
    for _ in range(60):
        p, c = np.exp(rng.uniform(np.log(20), np.log(6000))), np.exp(rng.uniform(0, np.log(2000)))
        more_p, more_c = p * np.exp(rng.uniform(0, 0.3)), c * np.exp(rng.uniform(0, 0.3))
        if more_p + more_c > 8192:
            continue
        few = _answer(tp4, p, c, slo)
        many = _answer(tp4, more_p, more_c, slo)
        assert many <= few * (1 + 1e-9), (p, c, more_p, more_c, few, many)


def _answer(model: cap.SloModel, prompt: float, completion: float, slo: cap.SloTarget) -> float:
    try:
        return model.capacity(
            prompt_tokens=prompt,
            completion_tokens=completion,
            slo=slo,
            allow_extrapolation=True,
            with_range=False,
        ).requests_per_s_per_replica
    except cap.SloUnreachableError:
        return 0.0


def test_the_issues_examples_are_monotone_and_jump_free(
    tp4: cap.SloModel, tp8_fp8: cap.SloModel
) -> None:
    slo = cap.SloTarget(0.674, 0.0233)
    knee = _answer(tp4, 200, 2000, slo)
    assert tp4.capacity(prompt_tokens=200, completion_tokens=2000, slo=slo).method == "measured"
    # was +48 % at 0.11 % away and +45 % at 226 prompt tokens
    assert abs(_answer(tp4, 200.2, 2000, slo) / knee - 1) < 0.011
    assert _answer(tp4, 226, 2000, slo) <= knee
    # completion 16.3 -> 18.4 at prompt 2,000 gave +6.4 %
    assert _answer(tp4, 2000, 18.4, SLOS[1]) <= _answer(tp4, 2000, 16.3, SLOS[1])
    # a looser TTFT limit gave 0.9 % less
    for prompt, completion in ((500, 300), (3000, 100), (150, 1500)):
        tight = _answer(tp4, prompt, completion, cap.SloTarget(0.6, 0.03))
        assert _answer(tp4, prompt, completion, cap.SloTarget(0.7, 0.03)) >= tight
    # tokens/s per GPU on the plan path: 1,504.6 at prompt 7,005 against 917.3 at 7,010
    for completion in (100.0, 1000.0):
        rps = _requests_per_s(
            tp8_fp8, np.array([7005.0, 7010.0]), np.array([completion] * 2), SLOS[1]
        )
        assert rps[1] <= rps[0] and rps[1] >= 0.95 * rps[0]


def test_requests_per_s_never_rise_within_the_rounding_of_mixes(tp4: cap.SloModel) -> None:
    # mixes are solved at 3 significant digits; the tokens of the mix itself turn the
    # requests/s into tokens/s, so 1000.4 and 1000.6 prompt tokens keep their order
    prompts = np.arange(995.0, 1012.0, 0.1)
    rps = _requests_per_s(tp4, prompts, np.full(prompts.shape, 333.3), SLOS[1])
    assert np.all(rps[1:] <= rps[:-1] * (1 + 1e-12))


@pytest.mark.parametrize("which", ["tp4", "tp8_fp8"])
def test_every_measured_knee_is_met_without_a_jump(
    which: str, request: pytest.FixtureRequest
) -> None:
    model = request.getfixturevalue(which)
    # within 1 % in both counts the knee's bounds allow at most exp(2 ln(1/0.99)² / 2ℓ²)
    bound = math.exp(2 * math.log(1 / 0.99) ** 2 / (2 * KNEE_LENGTH**2)) - 1
    checked = 0
    for slo in SLOS:
        for prompt, completion in model.table.mixes():
            try:
                knee = cap.measured_knee(
                    model.table,
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    ttft_p95_s=slo.ttft_p95_s,
                    tpot_p95_s=slo.tpot_p95_s,
                ).requests_per_s
            except cap.SloUnreachableError:
                continue
            assert _answer(model, prompt, completion, slo) == knee
            for fp in (0.99, 0.995, 1.0, 1.005, 1.01):
                for fc in (0.99, 0.995, 1.0, 1.005, 1.01):
                    near = _answer(model, prompt * fp, completion * fc, slo)
                    assert abs(near / knee - 1) <= bound + 1e-9, (prompt, completion, fp, fc)
                    checked += 1
    assert checked >= 200


def test_the_envelope_reads_its_grid_bilinearly_and_falls_beyond_it() -> None:
    axis = np.log([1.0, 2.0, 4.0])
    values = np.array([[8.0, 6.0, 4.0], [6.0, 4.0, 2.0], [4.0, 2.0, 1.0]])
    env = Envelope(axis, axis, values, np.ones((3, 3), bool), np.zeros((0, 3)))
    assert env.at(2.0, 2.0) == pytest.approx(4.0)
    # halfway in log prompt and log completion between (1, 1) and (2, 2): the geometric mean
    assert env.at(math.sqrt(2), math.sqrt(2)) == pytest.approx((8 * 6 * 6 * 4) ** 0.25)
    # a power law in the tokens is read exactly between grid points
    power = Envelope(
        axis,
        axis,
        100.0 / np.exp(axis)[:, None] / np.exp(axis)[None, :] ** 0.5,
        np.ones((3, 3), bool),
        np.zeros((0, 3)),
    )
    assert power.at(3.0, 1.5) == pytest.approx(100.0 / 3.0 / 1.5**0.5)
    # fewer tokens than the grid: the edge's answer
    assert env.at(0.5, 0.25) == pytest.approx(8.0)
    # more: requests/s fall in proportion (twice the prompt and the completion: a quarter)
    assert env.at(8.0, 8.0) == pytest.approx(1.0 / 4)
    assert env.at(8.0, 1.0) == pytest.approx(4.0 / 2)


def test_a_knee_lifts_the_mixes_below_it_and_caps_those_above() -> None:
    axis = np.log([1.0, 4.0, 16.0])
    knee = np.array([[math.log(4.0), math.log(4.0), 10.0]])
    everywhere = np.ones((3, 3), bool)
    low = Envelope(axis, axis, np.full((3, 3), 5.0), everywhere, knee)  # under-states the knee
    high = Envelope(axis, axis, np.full((3, 3), 20.0), everywhere, knee)  # over-states it
    assert low.at(4.0, 4.0) == high.at(4.0, 4.0) == 10.0
    # fewer tokens than the knee: at least the knee; more: at most the knee
    assert low.at(2.0, 3.0) == 10.0 and high.at(8.0, 5.0) == 10.0
    # 10 % more prompt tokens: the lift relaxes to exp(-ln(1.1)² / 2ℓ²) of the knee
    lifted = 10.0 * math.exp(-(math.log(1.1) ** 2) / (2 * KNEE_LENGTH**2))
    assert low.at(4.4, 4.0) == pytest.approx(max(5.0, lifted))
    # 10 % fewer completion tokens: the cap relaxes to exp(+ln(1/0.9)² / 2ℓ²) of it
    capped = 10.0 * math.exp(math.log(1 / 0.9) ** 2 / (2 * KNEE_LENGTH**2))
    assert high.at(4.0, 3.6) == pytest.approx(min(20.0, capped))
    # far from the knee the grid's own value
    assert low.at(16.0, 16.0) == pytest.approx(5.0)
    assert high.at(1.0, 1.0) == pytest.approx(20.0)


def test_the_grid_axis_spans_both_ends_in_steps_of_at_most_20_percent() -> None:
    axis = grid_axis(50.0, 8000.0)
    assert axis[0] == pytest.approx(math.log(50)) and axis[-1] == pytest.approx(math.log(8000))
    assert np.all(np.diff(axis) <= math.log(1.2) + 1e-12)
    assert len(grid_axis(5.0, 5.0)) == 2


def test_the_crossing_takes_the_highest_throughput_up_to_it() -> None:
    # throughput dips at the third load: a looser TTFT limit must not give less
    curves = Curves(
        requests_per_s=np.array([1.0, 3.0, 2.0, 4.0]),
        ttft_p95_s=np.array([0.1, 0.2, 0.3, 0.4]),
        ttft_mean_s=np.array([0.1, 0.2, 0.3, 0.4]),
        tpot_p95_s=np.full(4, 0.01),
        tpot_mean_s=np.full(4, 0.01),
    )
    loads = np.array([1.0, 2.0, 4.0, 8.0])
    answers = [first_crossing(curves, loads, limit, 1.0)[0] for limit in (0.25, 0.29, 0.35)]
    # 0.25 and 0.29 cross between loads 2 and 4: the best throughput up to there is 3
    # (the curve read 2.5 and 2.1); 0.35 halfway between 4 and 8: 3 + 0.5 × (4 − 3)
    assert answers == pytest.approx([3.0, 3.0, 3.5])
