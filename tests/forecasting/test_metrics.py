from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from forecasting import (
    coverage,
    mae,
    mase,
    pinball,
    rmse,
    smape,
    summarize,
    underprovision_rate,
    wape,
)
from forecasting.metrics import mase_scale

Y = [0.0, 10.0, 20.0, 30.0]
F = [0.0, 12.0, 17.0, 30.0]


def test_point_metrics_exact() -> None:
    assert mae(Y, F) == pytest.approx(5 / 4)
    assert rmse(Y, F) == pytest.approx(math.sqrt(13 / 4))
    assert wape(Y, F) == pytest.approx(5 / 60)
    # both-zero hour counts 0; 2*2/22 and 2*3/37
    assert smape(Y, F) == pytest.approx(100 * (4 / 22 + 6 / 37) / 4)


def test_nan_actuals_are_ignored() -> None:
    assert mae([1.0, np.nan, 3.0], [2.0, 100.0, 3.0]) == pytest.approx(0.5)


def test_length_mismatch_raises() -> None:
    with pytest.raises(ValueError, match="actuals have 2 values, forecasts 3"):
        mae([1, 2], [1, 2, 3])


def test_all_zero_actuals_do_not_divide_by_zero() -> None:
    zeros = np.zeros(5)
    assert wape(zeros, zeros) == 0.0
    assert math.isnan(wape(zeros, np.ones(5)))
    assert smape(zeros, zeros) == 0.0
    assert smape(zeros, np.ones(5)) == pytest.approx(200.0)
    assert mase(zeros, np.ones(5), y_insample=np.zeros(48)) == pytest.approx(1.0)


def test_mase_scale_is_seasonal_naive_mae() -> None:
    insample = np.r_[np.zeros(24), np.full(24, 2.0)]
    assert mase_scale(insample, 24) == pytest.approx(2.0)
    assert mase([4.0, 4.0], [3.0, 5.0], y_insample=insample) == pytest.approx(0.5)
    # a repeating history has zero seasonal-naive error: fall back to its mean level
    assert mase_scale(np.tile(np.arange(24.0), 3), 24) == pytest.approx(11.5)


def test_interval_metrics() -> None:
    y = [1.0, 5.0, 9.0, 20.0]
    assert coverage(y, [0, 0, 0, 0], [10, 10, 10, 10]) == pytest.approx(0.75)
    assert underprovision_rate(y, [10, 10, 10, 10]) == pytest.approx(0.25)
    # pinball at 0.9: under-forecast costs 0.9 per unit, over-forecast 0.1
    assert pinball([10.0, 10.0], [8.0, 12.0], 0.9) == pytest.approx((1.8 + 0.2) / 2)


def test_summarize_averages_mase_over_windows() -> None:
    index = pd.date_range("2026-01-01", periods=72, freq="h", tz="UTC")
    history = pd.Series(np.r_[np.zeros(24), np.full(48, 2.0)], index=index)
    frame = pd.DataFrame(
        {
            "cutoff": [index[47]] * 2 + [index[48]] * 2,
            "y": [2.0, 2.0, 2.0, 2.0],
            "yhat": [1.0, 3.0, 2.0, 2.0],
            "lo_80": 0.0,
            "hi_80": 2.5,
            "lo_95": 0.0,
            "hi_95": 10.0,
        }
    )
    scores = summarize(frame, history)
    # window 1: MAE 1 / scale 2 (history up to index[47]); window 2: perfect
    assert scores["mase"] == pytest.approx(0.25)
    assert scores["coverage_80"] == 1.0 and scores["n_points"] == 4
    assert scores["underprovision_rate_80"] == 0.0
