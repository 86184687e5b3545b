"""auto_forecast beats seasonal naive on a slice of the real M4 Hourly data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecasting import auto_forecast, mase
from forecasting.models import SeasonalNaive


@pytest.mark.slow
def test_auto_forecast_beats_seasonal_naive_on_m4_hourly(shared_data: Path) -> None:
    train_path, test_path = shared_data / "m4_hourly_train.csv", shared_data / "m4_hourly_test.csv"
    if not train_path.exists():
        pytest.skip(f"M4 data not found in {shared_data}")
    train = pd.read_csv(train_path, index_col=0).iloc[::35]  # 12 series spread over the set
    test = pd.read_csv(test_path, index_col=0).loc[train.index]
    auto, naive = [], []
    for sid in train.index:
        history = train.loc[sid].dropna().to_numpy()
        actual = test.loc[sid].dropna().to_numpy()[:24]
        index = pd.date_range("2024-01-01", periods=len(history), freq="h", tz="UTC")
        y = pd.Series(history, index=index)
        auto.append(mase(actual, auto_forecast(y, 24).forecast.yhat, y_insample=history))
        naive.append(mase(actual, SeasonalNaive().fit(y).predict(24).yhat, y_insample=history))
    assert np.mean(auto) < 0.9 * np.mean(naive), (np.mean(auto), np.mean(naive))
