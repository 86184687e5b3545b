"""An SLO-capacity answer's range and basis, the far-beyond rule, and plans sized at the low
edge with odd hours adjusted, not refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import capacity as cap
from tests.capacity.loadtest_fixtures import NIM_70B_H100

SLO = cap.SloTarget(ttft_p95_s=2.0, tpot_p95_s=0.05)
HOURS = pd.date_range("2026-12-04", periods=4, freq="h", tz="UTC")


@pytest.fixture(scope="module")
def model(shared_data: Path) -> cap.SloModel:
    text = (shared_data / "loadtests" / NIM_70B_H100).read_text()
    return cap.fit_slo_model(cap.read_loadtest_csv_setups(text, file_name=NIM_70B_H100)[0])


def test_a_measured_mix_is_its_knee_with_no_range(model: cap.SloModel) -> None:
    got = model.capacity(prompt_tokens=2000, completion_tokens=200, slo=SLO)
    assert got.basis == "measured"
    assert got.requests_per_s_per_replica_low == got.requests_per_s_per_replica
    assert got.requests_per_s_per_replica_high == got.requests_per_s_per_replica


@pytest.mark.parametrize(
    ("mix", "basis"), [((1000, 500), "interpolated"), ((4000, 3000), "extrapolated")]
)
def test_an_unmeasured_mix_carries_a_range_and_its_basis(
    model: cap.SloModel, mix: tuple[int, int], basis: str
) -> None:
    got = model.capacity(prompt_tokens=mix[0], completion_tokens=mix[1], slo=SLO)
    assert got.basis == basis
    low, high = got.requests_per_s_per_replica_low, got.requests_per_s_per_replica_high
    # at least the 5 % floor either side, and not wider than the largest held-out error allows
    assert low <= got.requests_per_s_per_replica / 1.05 * (1 + 1e-9)
    assert high >= got.requests_per_s_per_replica * 1.05 * (1 - 1e-9)
    assert high / low < 4
    if basis == "extrapolated":
        assert "outside the measured range (prompt 200–7000, completion 200–2000" in got.note


def test_the_range_comes_from_held_out_errors(model: cap.SloModel) -> None:
    held_out = model.held_out_models()
    assert sorted(held_out) == sorted(model.table.mixes())
    assert all(len(m.table.mixes()) == 5 for m in held_out.values())
    model.capacity(prompt_tokens=1000, completion_tokens=500, slo=SLO)
    errors = model.errors_by_slo[SLO]
    assert len(errors) >= 4 and all(abs(e.log_error) < 1.0 for e in errors)


def test_far_beyond_the_measured_box_is_refused_unless_allowed(model: cap.SloModel) -> None:
    with pytest.raises(
        cap.ExtrapolationError,
        match=r"more than 4x beyond the measured range \(prompt 200–7000, completion 200–2000",
    ):
        model.capacity(prompt_tokens=122, completion_tokens=15, slo=SLO)
    got = model.capacity(prompt_tokens=122, completion_tokens=15, slo=SLO, allow_extrapolation=True)
    near = model.capacity(prompt_tokens=1000, completion_tokens=500, slo=SLO)
    assert got.basis == "extrapolated"
    width = got.requests_per_s_per_replica_high / got.requests_per_s_per_replica_low
    assert width > near.requests_per_s_per_replica_high / near.requests_per_s_per_replica_low
    # 4x is the limit: just inside it is answered
    model.capacity(prompt_tokens=200, completion_tokens=50, slo=SLO)


def test_odd_hours_never_refuse_a_plan(model: cap.SloModel) -> None:
    forecast = pd.DataFrame({"ds": HOURS, "yhat": np.full(4, 3600.0)})
    plan = cap.plan_gpus_at_slo(
        forecast,
        model=model,
        slo=SLO,
        prompt_tokens=np.array([2000.0, 30000.0, 122.0, 1e-300]),
        completion_tokens=np.array([200.0, 2000.0, 15.0, 0.4]),
        of_requests=True,
        gpus_per_replica=4,
    )
    frame = plan.frame
    assert frame["mix_adjusted"].tolist() == [False, True, True, True]
    assert frame["basis"].tolist()[0] == "measured"
    sized = frame[["prompt_tokens_per_request", "completion_tokens_per_request"]].to_numpy()
    assert (sized[1].sum() <= 8192) and tuple(sized[2]) == (122.0, 50.0)
    assert tuple(sized[3]) == (50.0, 50.0)
    assert (frame["per_gpu_tokens_per_s"] > 0).all()
    notes = cap.slo_plan_notes(frame)
    assert any("3 hours of 4 had a forecast mix below one token" in n for n in notes), notes
    assert any("sized at a mix outside the load test's measured range" in n for n in notes)


def test_unmeasured_hours_are_sized_at_the_low_edge(model: cap.SloModel) -> None:
    forecast = pd.DataFrame({"ds": HOURS, "yhat": np.full(4, 3.6e6)})
    prompts, completions = np.full(4, 1000.0), np.full(4, 500.0)
    plan = cap.plan_gpus_at_slo(
        forecast,
        model=model,
        slo=SLO,
        prompt_tokens=prompts,
        completion_tokens=completions,
        of_requests=True,
        gpus_per_replica=4,
        utilization_target=1.0,
        safety_factor=1.0,
    )
    answer = model.capacity(prompt_tokens=1000, completion_tokens=500, slo=SLO)
    assert plan.frame["requests_per_s_per_replica"].iloc[0] == pytest.approx(
        answer.requests_per_s_per_replica_low, rel=1e-3
    )
    assert plan.frame["basis"].tolist() == ["interpolated"] * 4
    assert cap.slo_plan_notes(plan.frame) == []


def test_an_unservable_hour_far_outside_is_named_as_unservable(model: cap.SloModel) -> None:
    with pytest.raises(cap.SloUnreachableError, match=r"hour 1 \(1 of 2 hours\)"):
        cap.slo_capacity_by_hour(
            model,
            cap.SloTarget(ttft_p95_s=0.05, tpot_p95_s=0.05),
            prompt_tokens=np.array([200.0, 8000.0]),
            completion_tokens=np.array([200.0, 10.0]),
        )


def test_the_range_holds_the_tables_worst_error_not_only_the_nearest_mixes() -> None:
    from capacity.measured.slo_range import MixError, answer_range

    # the three mixes nearest 250/250 were answered within 2 %; one far away 50 % over
    errors = [
        MixError(200, 200, 0.02),
        MixError(300, 300, -0.01),
        MixError(200, 400, 0.0),
        MixError(7000, 1000, np.log(1.5)),
    ]
    low, high = answer_range(errors, value=10.0, prompt=250, completion=250, beyond_log=0.0)
    assert low == pytest.approx(10.0 / 1.5 / 1.05)
    assert high == pytest.approx(10.0 * np.exp(0.01) * 1.05)


def test_with_many_mixes_the_bound_is_a_conformal_quantile() -> None:
    from capacity.measured.slo_range import MixError, answer_range

    # 39 errors: k = ceil(40 x 0.95) = 38, so the largest over-statement far away is passed
    # over for the second largest; near the mix, its own neighbours' worst still counts
    far = [MixError(8000, 4000, 1.0), MixError(8000, 2000, 0.8)]
    rest = [MixError(100 + i, 100, 0.1) for i in range(37)]
    value = 10.0
    low, _ = answer_range(far + rest, value=value, prompt=100, completion=100, beyond_log=0.0)
    assert low == pytest.approx(value * np.exp(-0.8) / 1.05)
    low, _ = answer_range(far + rest, value=value, prompt=8000, completion=4000, beyond_log=0.0)
    assert low == pytest.approx(value * np.exp(-1.0) / 1.05)
