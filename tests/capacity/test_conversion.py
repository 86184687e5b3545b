"""The core conversion: forecast frame -> hourly GPU plan."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import capacity as cap
from tests.capacity.conftest import make_forecast


def test_plan_applies_the_formula_hour_by_hour() -> None:
    # 7200 tokens/s on 1000 tokens/s GPUs at 75 % x 1.2 safety: 7200/750*1.2 = 11.52 -> 12.
    forecast = make_forecast([7200 * 3600, 0.0, 750 * 3600])
    plan = cap.plan_gpus(forecast, per_gpu_tokens_per_s=1000, scale_down_hold_s=0)
    assert list(plan.frame.columns) == list(cap.PLAN_COLUMNS)
    assert plan.frame["raw_gpus"].tolist() == [12, 1, 2]
    assert plan.frame["gpus"].tolist() == [12, 1, 2]
    assert plan.frame["load_tokens_per_s"].tolist() == pytest.approx([7200, 0, 750])
    assert plan.frame["peak_factor"].tolist() == [1.0, 1.0, 1.0]
    assert plan.peak_gpus == 12
    # 12 + 1 + 2 GPU-hours, plus the extra GPU of hour 2 started 300 s early.
    assert plan.gpu_hours == pytest.approx(15 + 300 / 3600)
    assert plan.frame["expected_utilization"].iloc[0] == pytest.approx(0.6)
    assert str(plan.frame["hour"].dt.tz) == "UTC"


def test_the_default_hold_keeps_a_one_hour_dip() -> None:
    forecast = make_forecast([7200 * 3600, 0.0, 750 * 3600])
    plan = cap.plan_gpus(forecast, per_gpu_tokens_per_s=1000)
    assert plan.frame["raw_gpus"].tolist() == [12, 1, 2]
    assert plan.frame["gpus"].tolist() == [12, 12, 2]
    assert plan.gpu_hours == pytest.approx(26)


def test_float_noise_does_not_buy_an_extra_gpu() -> None:
    # 750 tokens/s / (1000 x 0.75) x 1.2 = 1.2 -> 2, and exactly 1000*0.75/1.2 = 625 -> 1.
    plan = cap.plan_gpus(make_forecast([625.0]), per_gpu_tokens_per_s=1000, forecast_unit="per_s")
    assert plan.frame["gpus"].tolist() == [1]
    assert cap.round_up_count(0.1 * 3 / 0.3) == 1


def test_band_selects_the_column() -> None:
    forecast = make_forecast([36_000_000.0], spread=0.25)  # 10_000 tokens/s
    gpus = {
        band: cap.plan_gpus(forecast, per_gpu_tokens_per_s=1000, band=band).peak_gpus
        for band in cap.PLAN_BANDS
    }
    # 10,000 tokens/s x (1 + 0.25 k / 2) / (1,000 x 0.75) x 1.2, rounded up
    assert gpus == {
        "yhat": 16,
        "hi_80": 20,
        "hi_95": 24,
        "q50": 16,
        "q60": 18,
        "q70": 20,
        "q80": 22,
        "q90": 24,
        "q95": 26,
        "q99": 28,
    }


def test_request_forecast_times_tokens_per_request() -> None:
    forecast = make_forecast([10.0], spread=0.0)  # 10 requests/s
    plan = cap.plan_gpus(
        forecast, per_gpu_tokens_per_s=2500, tokens_per_request=2512, forecast_unit="per_s"
    )
    assert plan.frame["load_tokens_per_s"].iloc[0] == pytest.approx(25_120)
    assert plan.peak_gpus == 17  # 25120 / 1875 * 1.2 = 16.08


def test_whole_replicas_and_min_gpus() -> None:
    forecast = make_forecast([1.0, 3_000_000_000.0])
    plan = cap.plan_gpus(forecast, per_gpu_tokens_per_s=2000, gpus_per_replica=4, min_gpus=2)
    assert plan.frame["gpus"].tolist() == [4, 668]
    assert plan.frame["replicas"].tolist() == [1, 167]
    assert plan.peak_replicas == 167


def test_negative_point_forecast_counts_as_no_load() -> None:
    plan = cap.plan_gpus(make_forecast([-5.0]), per_gpu_tokens_per_s=100)
    assert plan.frame["gpus"].tolist() == [1]  # the floor: a serving fleet never has 0 GPUs
    assert plan.frame["expected_utilization"].tolist() == [0.0]


def test_min_gpus_is_at_least_one_everywhere() -> None:
    with pytest.raises(cap.InvalidParameterError, match="min_gpus must be >= 1"):
        cap.plan_gpus(make_forecast([5.0]), per_gpu_tokens_per_s=100, min_gpus=0)
    with pytest.raises(cap.InvalidParameterError, match="min_gpus must be >= 1"):
        cap.gpus_for_load(0.0, 100, min_gpus=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"utilization_target": 0.0}, r"utilization_target must be in \(0, 1\]"),
        ({"utilization_target": 1.5}, r"utilization_target must be in \(0, 1\]"),
        ({"per_gpu_tokens_per_s": 0}, r"per_gpu_tokens_per_s must be > 0"),
        ({"per_gpu_tokens_per_s": -3}, r"per_gpu_tokens_per_s must be > 0"),
        ({"safety_factor": 0.9}, r"safety_factor must be >= 1"),
        ({"gpus_per_replica": 0}, r"gpus_per_replica must be >= 1"),
        ({"min_gpus": 1.5}, r"min_gpus must be a whole number"),
        ({"band": "lo_80"}, r"band must be one of"),
        ({"tokens_per_request": 0}, r"tokens_per_request must be > 0"),
        ({"forecast_unit": "per_minute"}, r"forecast_unit must be one of"),
    ],
)
def test_invalid_parameters_name_the_parameter(kwargs: dict, message: str) -> None:
    params = {"per_gpu_tokens_per_s": 1000} | kwargs
    with pytest.raises(cap.InvalidParameterError, match=message) as info:
        cap.plan_gpus(make_forecast([1000.0]), **params)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, cap.CapacityError)


def test_nan_load_is_rejected() -> None:
    with pytest.raises(cap.InvalidParameterError, match="'yhat' has NaN"):
        cap.plan_gpus(make_forecast([1.0, np.nan]), per_gpu_tokens_per_s=1000)


def test_missing_columns_and_empty_forecasts_are_rejected() -> None:
    with pytest.raises(cap.InvalidParameterError, match=r"missing column\(s\) \['hi_95'\]"):
        cap.plan_gpus(
            make_forecast([1.0]).drop(columns="hi_95"), per_gpu_tokens_per_s=1, band="hi_95"
        )
    with pytest.raises(cap.InvalidParameterError, match="no rows"):
        cap.plan_gpus(make_forecast([]), per_gpu_tokens_per_s=1)


def test_does_not_mutate_the_forecast(forecast_24h: pd.DataFrame) -> None:
    before = forecast_24h.copy()
    cap.plan_gpus(forecast_24h, per_gpu_tokens_per_s=1000)
    pd.testing.assert_frame_equal(forecast_24h, before)


def test_tokens_per_request_from_history_weights_by_requests() -> None:
    requests = pd.Series([100.0, 300.0, np.nan])
    tokens = pd.Series([10_000.0, 60_000.0, 5.0])
    assert cap.tokens_per_request_from_history(requests, tokens) == pytest.approx(175.0)
    with pytest.raises(cap.InvalidParameterError, match="no requests"):
        cap.tokens_per_request_from_history([0.0], [1.0])
