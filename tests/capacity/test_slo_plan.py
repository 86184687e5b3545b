"""A GPU plan sized at the SLO capacity of each hour's mix (capacity.plan_gpus_at_slo)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import capacity as cap
from tests.capacity.loadtest_fixtures import NIM_70B_H100

SLO = cap.SloTarget(ttft_p95_s=2.0, tpot_p95_s=0.05)
HOURS = pd.date_range("2026-12-04", periods=4, freq="h", tz="UTC")
PLAN = {"gpus_per_replica": 4, "utilization_target": 1.0, "safety_factor": 1.0}


@pytest.fixture(scope="module")
def model(shared_data: Path) -> cap.SloModel:
    text = (shared_data / "loadtests" / NIM_70B_H100).read_text()
    table = cap.read_loadtest_csv_setups(text, file_name=NIM_70B_H100)[0]  # TP4 fp16
    return cap.fit_slo_model(table)


def requests_forecast(per_hour: float) -> pd.DataFrame:
    return pd.DataFrame({"ds": HOURS, "yhat": np.full(len(HOURS), per_hour)})


def test_equal_requests_with_5x_answers_grow_by_the_slo_capacity_ratio(
    model: cap.SloModel,
) -> None:
    prompts = np.full(4, 200.0)
    completions = np.array([200.0, 200.0, 1000.0, 1000.0])  # both measured mixes
    plan = cap.plan_gpus_at_slo(
        requests_forecast(3.6e7),
        model=model,
        slo=SLO,
        prompt_tokens=prompts,
        completion_tokens=completions,
        of_requests=True,
        cold_start_s=0,
        scale_down_hold_s=0,
        **PLAN,
    )
    frame = plan.frame
    short = model.capacity(prompt_tokens=200, completion_tokens=200, slo=SLO)
    long = model.capacity(prompt_tokens=200, completion_tokens=1000, slo=SLO)
    slo_ratio = short.requests_per_s_per_replica / long.requests_per_s_per_replica
    token_ratio = 1200 / 400
    gpus = frame["raw_gpus"].to_numpy()
    assert gpus[2] / gpus[0] == pytest.approx(slo_ratio, rel=4 / gpus[0])
    assert abs(gpus[2] / gpus[0] - token_ratio) > 0.5
    # the formula in requests: replicas = ceil(requests/s ÷ SLO requests/s per replica)
    assert gpus[0] == 4 * np.ceil(1e4 / short.requests_per_s_per_replica - 1e-9)
    assert list(frame["completion_tokens_per_request"]) == list(completions)
    assert frame["requests_per_s_per_replica"].iloc[2] == pytest.approx(
        long.requests_per_s_per_replica
    )
    assert frame["per_gpu_tokens_per_s"].iloc[0] == pytest.approx(short.tokens_per_s_per_gpu)
    assert frame["load_tokens_per_s"].iloc[2] == pytest.approx(1e4 * 1200)


def test_a_tokens_forecast_keeps_its_load(model: cap.SloModel) -> None:
    tokens = pd.DataFrame({"ds": HOURS, "yhat": np.full(4, 3.6e9)})
    plan = cap.plan_gpus_at_slo(
        tokens,
        model=model,
        slo=SLO,
        prompt_tokens=np.full(4, 500.0),
        completion_tokens=np.full(4, 300.0),
        of_requests=False,
        **PLAN,
    )
    assert plan.frame["load_tokens_per_s"].tolist() == [1e6] * 4
    per_gpu = model.capacity(prompt_tokens=500, completion_tokens=300, slo=SLO)
    # an unmeasured mix is sized at the low edge of its answer's range
    low_share = per_gpu.requests_per_s_per_replica_low / per_gpu.requests_per_s_per_replica
    assert low_share < 1
    assert plan.per_gpu_tokens_per_s == pytest.approx(per_gpu.tokens_per_s_per_gpu * low_share)
    assert plan.frame["basis"].tolist() == ["interpolated"] * 4
    assert not plan.frame["mix_adjusted"].any()


def test_an_unservable_hour_is_named(model: cap.SloModel) -> None:
    with pytest.raises(cap.SloUnreachableError, match=r"hour 2026-12-04 02:00 UTC \(1 of 4"):
        cap.plan_gpus_at_slo(
            requests_forecast(3600.0),
            model=model,
            slo=cap.SloTarget(ttft_p95_s=0.5, tpot_p95_s=0.05),
            prompt_tokens=np.array([200.0, 200.0, 20000.0, 200.0]),
            completion_tokens=np.full(4, 200.0),
            of_requests=True,
            **PLAN,
        )


def test_mismatched_inputs_are_refused(model: cap.SloModel) -> None:
    with pytest.raises(cap.InvalidParameterError, match="one prompt/completion mix per"):
        cap.plan_gpus_at_slo(
            requests_forecast(3600.0),
            model=model,
            slo=SLO,
            prompt_tokens=np.full(3, 200.0),
            completion_tokens=np.full(4, 200.0),
            of_requests=True,
        )
    with pytest.raises(cap.InvalidParameterError, match="one figure per forecast hour"):
        cap.plan_gpus(requests_forecast(3600.0), per_gpu_tokens_per_s=np.full(3, 100.0))
    with pytest.raises(cap.InvalidParameterError, match="finite and > 0 in every hour"):
        cap.plan_gpus(
            requests_forecast(3600.0), per_gpu_tokens_per_s=np.array([100.0, 0.0, 1.0, 1.0])
        )


def test_production_hours_size_an_hour_as_the_learned_answer(model: cap.SloModel) -> None:
    """An hour near production hours sizes on ``with_production``'s answer at its mix (a
    measured mix: exactly it), counts them, and is sized at its own mix even 4x beyond the
    measured range; hours elsewhere, or too old, keep the lab's."""
    lab = model.capacity(prompt_tokens=200, completion_tokens=200, slo=SLO)
    knee = lab.requests_per_s_per_replica
    # the fleet broke the p95 TTFT limit (1.5x it) at 80 % of the lab's knee
    broke = cap.ProductionHour(0.8 * knee, 200.0, 200.0, 3.0, 0.01, age_hours=2.0)
    # a 122/15 mix, 4x beyond the measured range (sized at 122/50 without production)
    far = cap.ProductionHour(0.01, 122.0, 15.0, 0.1, 0.01, age_hours=3.0)
    old = cap.ProductionHour(0.1 * knee, 200.0, 1000.0, 9.0, 0.9, age_hours=400.0)
    options = {"slo": SLO, "of_requests": True, "cold_start_s": 0, "scale_down_hold_s": 0}
    prompts, completions = np.array([200.0, 122.0, 200.0, 200.0]), np.array([200, 15, 1000, 200])

    def sized(production: list[cap.ProductionHour]) -> pd.DataFrame:
        return cap.plan_gpus_at_slo(
            requests_forecast(3.6e7),
            model=model,
            prompt_tokens=prompts,
            completion_tokens=completions.astype(float),
            production=production,
            **options,
            **PLAN,
        ).frame

    alone, learned = sized([]), sized([broke, far, old])
    assert learned["production_hours"].tolist() == [1, 1, 0, 1]
    assert alone["production_hours"].tolist() == [0, 0, 0, 0]
    endpoint = cap.with_production(lab, [broke], SLO, model=model)
    assert endpoint.requests_per_s_per_replica == pytest.approx(0.8 * knee / 1.5)
    for hour in (0, 3):
        assert learned["requests_per_s_per_replica"].iloc[hour] == pytest.approx(
            endpoint.requests_per_s_per_replica
        )
        assert learned["raw_gpus"].iloc[hour] > alone["raw_gpus"].iloc[hour]
    assert alone["mix_adjusted"].tolist() == [False, True, False, False]
    assert learned["mix_adjusted"].tolist() == [False, False, False, False]
    assert learned["completion_tokens_per_request"].iloc[1] == 15.0
    # 200/1000 has only a 400-hour-old hour: the lab's answer, as without production
    assert learned["raw_gpus"].iloc[2] == alone["raw_gpus"].iloc[2]


def test_the_replayed_sizing_is_the_live_plans_rule(model: cap.SloModel) -> None:
    # measured, interpolated, far beyond the measured range, and a mix the SLO is not met at
    prompts = np.array([200.0, 500.0, 200.0, 20000.0])
    completions = np.array([200.0, 300.0, 50000.0, 200.0])
    slo = cap.SloTarget(ttft_p95_s=0.5, tpot_p95_s=0.05)
    sized_p, sized_c, per_gpu = cap.sized_tokens_per_s_per_gpu(model, slo, prompts, completions)
    assert per_gpu[3] == 0.0
    plan = cap.plan_gpus_at_slo(
        requests_forecast(3600.0).iloc[:3],
        model=model,
        slo=slo,
        prompt_tokens=prompts[:3],
        completion_tokens=completions[:3],
        of_requests=True,
        **PLAN,
    )
    frame = plan.frame
    assert per_gpu[:3] == pytest.approx(frame["per_gpu_tokens_per_s"].to_numpy(), rel=1e-9)
    assert sized_p[:3] == pytest.approx(frame["prompt_tokens_per_request"].to_numpy())
    assert sized_c[:3] == pytest.approx(frame["completion_tokens_per_request"].to_numpy())
    # the unmeasured mix below the model's answer (its low edge), the measured one at its knee
    central = model.tokens_per_s_per_gpu(prompts[:2], completions[:2], slo)
    assert per_gpu[0] == pytest.approx(central[0])
    assert per_gpu[1] < 0.99 * central[1]
