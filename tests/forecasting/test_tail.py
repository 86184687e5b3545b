"""The 95 % band's deeper calibration evidence and the short-history correction, through
``auto_forecast``: which folds feed the factors, and the bands stay one distribution."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forecasting.auto
from forecasting import auto_forecast, intervals
from forecasting._tail import older_ends, older_errors
from forecasting.hygiene import clean_history
from forecasting.models import MODELS

from .test_one_calibration import _assert_one_distribution
from .test_refresh import ar_daily, servegen_tokens


def test_older_folds_sit_before_the_selections_and_need_their_history() -> None:
    # n = 500, horizon 24, 5 windows daily: the selection's folds end at 476, 452, … 380
    assert older_ends(500, 24, 5, 24, min_train=74) == [260, 284, 308, 332, 356]
    assert older_ends(500, 24, 5, 24, min_train=300) == [308, 332, 356]
    assert older_ends(200, 24, 5, 24, min_train=74) == []


def test_older_errors_are_an_out_of_sample_backtest_of_those_folds() -> None:
    y = ar_daily(24 * 30)
    history = clean_history(y)
    frame = older_errors(MODELS["arima"], history, y, 24, 5, 24)
    assert frame is not None
    cutoffs = sorted(frame["cutoff"].unique())
    assert len(cutoffs) == 5
    assert cutoffs[-1] == y.index[len(y) - 24 - 5 * 24 - 1]  # the day before the oldest of five
    short = y.iloc[:200]
    assert older_errors(MODELS["arima"], clean_history(short), short, 24, 5, 24) is None


@pytest.fixture
def seen(monkeypatch) -> list[dict]:
    calls: list[dict] = []

    def spy(backtest: pd.DataFrame, **kwargs):
        calls.append({"folds": backtest["cutoff"].nunique(), **kwargs})
        return intervals.conformal_factors(backtest, **kwargs)

    monkeypatch.setattr(forecasting.auto, "conformal_factors", spy)
    return calls


def test_a_long_history_calibrates_the_95_band_on_older_folds_too(seen) -> None:
    result = auto_forecast(ar_daily(24 * 30), models=["arima", "seasonal_naive"])
    (call,) = seen
    assert call["windows"] == 5 and call["folds"] == 5
    assert call["tail"]["cutoff"].nunique() == 5
    _assert_one_distribution(result.forecast)


def test_a_short_history_gets_wider_bands_than_its_folds_alone_give(seen) -> None:
    y = servegen_tokens().iloc[: 24 * 7]  # a week: three daily folds of the five asked for
    result = auto_forecast(y, models=["arima"])
    (call,) = seen
    assert call["folds"] < call["windows"] == 5
    assert call["tail"] is None
    _assert_one_distribution(result.forecast)
    plain = auto_forecast(y, models=["arima"], windows=call["folds"])
    for band in ("hi_80", "hi_95"):  # the same folds; asked for fewer, no correction
        wide = (result.forecast[band] - result.forecast["yhat"]).sum()
        narrow = (plain.forecast[band] - plain.forecast["yhat"]).sum()
        assert wide > narrow, band
    np.testing.assert_allclose(result.forecast["yhat"], plain.forecast["yhat"])
