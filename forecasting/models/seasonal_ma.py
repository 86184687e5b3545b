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


def period_mean_forecasts(
    values: np.ndarray, origins: np.ndarray, horizon: int, *, period: int, periods: int, trend: bool
) -> np.ndarray:
    """``_period_mean_forecast(values[:t], horizon, …)`` for every origin ``t`` in ``origins``
    (each ≥ ``period``) at once, one row per origin: the refresh state's one-step errors need
    one per hourly origin, the bands one per day. The same sums in the same order, and the
    trend's slopes from one ``polyfit`` over all origins' period means (equal to rounding)."""
    out = np.empty((len(origins), horizon))
    used_all = np.minimum(periods, origins // period)
    columns = np.arange(horizon) % period  # np.resize of the period's means
    for used in np.unique(used_all):
        rows = np.flatnonzero(used_all == used)
        start = origins[rows] - used * period  # each origin's block is values[start:t]
        # the block's columns summed row after row, as block.mean(axis=0) does
        total = values[start[:, None] + columns]
        for k in range(1, used):
            total += values[start[:, None] + k * period + columns]
        yhat = total / used
        if trend and used >= 3:
            block = values[start[:, None, None] + np.arange(used * period).reshape(used, period)]
            slope = np.polyfit(np.arange(used), block.mean(axis=2).T, 1)[0]
            ahead = (used - 1) / 2 + steps_ahead_in_seasons(horizon, period)
            yhat = yhat + slope[:, None] * ahead
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
        # day-ahead errors from the last RESIDUAL_ORIGINS days' origins, the latest first
        origins = len(values) - DAY * np.arange(1, RESIDUAL_ORIGINS + 1)
        origins = origins[origins >= self.min_history()]
        if not len(origins):
            self.residuals_ = np.diff(values)
            return
        forecasts = period_mean_forecasts(
            values,
            origins,
            DAY,
            period=self.period,
            periods=self._periods(),
            trend=self.trend,
        )
        self.residuals_ = (values[origins[:, None] + np.arange(DAY)] - forecasts).ravel()

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
