"""``seasonal_ma`` — the operators' baseline: the same hour's mean over the last k days.

For every hour of the day the forecast is the mean of that hour over the last ``days`` days,
plus a linear trend correction: the least-squares slope of the daily means, extrapolated from
the middle of the averaging window to the forecast day. ``seasonal_ma_weekly`` is the
day-of-week-aware variant: the same hour of the week averaged over the last ``weeks`` weeks,
with the slope taken over weekly means. Bands come from the method's own day-ahead errors over
the last two weeks of history.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..intervals import residual_bands
from .base import Bands, Forecaster, steps_ahead_in_seasons

DAY = 24
WEEK = 168
RESIDUAL_ORIGINS = 14


def _period_mean_forecast(
    values: np.ndarray, horizon: int, *, period: int, periods: int, trend: bool
) -> np.ndarray:
    used = min(periods, len(values) // period)
    block = values[len(values) - used * period :].reshape(used, period)
    yhat = np.resize(block.mean(axis=0), horizon)
    if trend and used >= 3:
        slope = np.polyfit(np.arange(used), block.mean(axis=1), 1)[0]
        periods_ahead = (used - 1) / 2 + steps_ahead_in_seasons(horizon, period)
        yhat = yhat + slope * periods_ahead
    return yhat


def one_step_period_means(
    values: np.ndarray, targets: np.ndarray, *, period: int, periods: int, trend: bool
) -> np.ndarray:
    """``_period_mean_forecast(values[:t], 1, …)[0]`` for every position ``t`` in
    ``targets`` (each ≥ ``period``) at once: the refresh state's rolling one-step errors
    need one per hourly origin. The same sums in the same order, and the trend's slopes from
    one ``polyfit`` over all origins' period means (equal to rounding)."""
    out = np.empty(len(targets))
    used_all = np.minimum(periods, targets // period)
    for used in np.unique(used_all):
        rows = np.flatnonzero(used_all == used)
        start = targets[rows] - used * period  # each origin's block is values[start:t]
        # the block's first column, summed row after row as block.mean(axis=0) does
        total = values[start].copy()
        for k in range(1, used):
            total += values[start + k * period]
        yhat = total / used
        if trend and used >= 3:
            block = values[start[:, None, None] + np.arange(used * period).reshape(used, period)]
            slope = np.polyfit(np.arange(used), block.mean(axis=2).T, 1)[0]
            yhat = yhat + slope * ((used - 1) / 2 + 1)
        out[rows] = yhat
    return out


class SeasonalMA(Forecaster):
    """Mean of the same hour over the last ``days`` days, with a linear trend correction."""

    name = "seasonal_ma"
    complexity = 1
    period = DAY

    def __init__(self, *, days: int = 7, trend: bool = True) -> None:
        self.days = days
        self.trend = trend

    def min_history(self) -> int:
        return self.period

    def _periods(self) -> int:
        return self.days

    def _forecast(self, values: np.ndarray, horizon: int) -> np.ndarray:
        return _period_mean_forecast(
            values, horizon, period=self.period, periods=self._periods(), trend=self.trend
        )

    def _fit(self, values: np.ndarray, index: pd.DatetimeIndex, events: object) -> None:
        self.values_ = values[-self._periods() * self.period :].copy()
        errors = []
        for back in range(1, RESIDUAL_ORIGINS + 1):
            origin = len(values) - back * DAY
            if origin < self.min_history():
                break
            actual = values[origin : origin + DAY]
            errors.append(actual - self._forecast(values[:origin], DAY))
        self.residuals_ = np.concatenate(errors) if errors else np.diff(values)

    def _predict(self, horizon: int, ds: pd.DatetimeIndex) -> tuple[np.ndarray, Bands]:
        yhat = self._forecast(self.values_, horizon)
        scale = np.sqrt(steps_ahead_in_seasons(horizon, DAY))
        return yhat, residual_bands(yhat, self.residuals_, scale)


class SeasonalMAWeekly(SeasonalMA):
    """Mean of the same hour of the week over the last ``weeks`` weeks (needs one week; the
    trend correction needs three)."""

    name = "seasonal_ma_weekly"
    complexity = 2
    period = WEEK

    def __init__(self, *, weeks: int = 4, trend: bool = True) -> None:
        self.weeks = weeks
        self.trend = trend

    def min_history(self) -> int:
        return WEEK

    def _periods(self) -> int:
        return self.weeks
