from __future__ import annotations

import numpy as np
import pytest

from forecasting.models import SeasonalMA, SeasonalMAWeekly, SeasonalNaive

from .conftest import hourly


def test_seasonal_naive_repeats_the_last_day() -> None:
    values = np.arange(48.0)
    frame = SeasonalNaive().fit(hourly(values)).predict(30)
    assert frame.yhat.tolist() == list(np.r_[np.arange(24.0, 48.0), np.arange(24.0, 30.0)])


def test_seasonal_naive_with_less_than_a_day_repeats_the_last_value() -> None:
    model = SeasonalNaive().fit(hourly([3.0, 4.0, 7.0]))
    assert model.predict(2).yhat.tolist() == [7.0, 7.0]
    assert "repeating the last value" in model.notes_[0]


def test_seasonal_ma_is_the_same_hour_mean_without_trend() -> None:
    days = np.array([[1.0] * 24, [2.0] * 24, [6.0] * 24])
    frame = SeasonalMA(days=3, trend=False).fit(hourly(days.ravel())).predict(24)
    assert frame.yhat.to_numpy() == pytest.approx(np.full(24, 3.0))


def test_seasonal_ma_trend_extrapolates_the_daily_slope() -> None:
    # daily levels 10, 20, 30: mean 20 at the window's centre, +10/day, two days ahead -> 40
    days = np.repeat([10.0, 20.0, 30.0], 24)
    frame = SeasonalMA(days=3).fit(hourly(days)).predict(48)
    assert frame.yhat.to_numpy()[:24] == pytest.approx(np.full(24, 40.0))
    assert frame.yhat.to_numpy()[24:] == pytest.approx(np.full(24, 50.0))


def test_weekly_variant_uses_the_same_hour_of_the_week() -> None:
    week = np.repeat([5.0, 5.0, 5.0, 5.0, 5.0, 1.0, 1.0], 24)
    frame = SeasonalMAWeekly(trend=False).fit(hourly(np.tile(week, 3))).predict(48)
    assert frame.yhat.to_numpy() == pytest.approx(np.full(48, 5.0))
    assert SeasonalMAWeekly().min_history() == 168  # one week: it runs from 14 days of history
