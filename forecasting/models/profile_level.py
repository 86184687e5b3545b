"""``profile_level`` — the 7-day same-hour mean, corrected by a damped share of today's level.

Real LLM-serving traffic has a daily shape that repeats poorly from one day to the next and a
level that wanders: day-ahead, the operators' 7-day same-hour mean is hard to beat, and models
that chase the last day's noise lose to it. This candidate starts from that mean and moves it
only as far as the history shows a level persists:

* ``P_t`` — the mean of the same hour on the ``days`` days before ``t``;
* ``ℓ`` — the log ratio of the last 24 hours' load to their ``P`` (how far today ran above or
  below its own week);
* ``yhat_h = (P_h + c) · exp(β_h ℓ) − c`` — with ``β_h`` the least-squares slope of the
  log error ``h`` hours ahead on ``ℓ`` over every past hourly origin, clipped to ``[0, 1]`` and
  non-increasing in ``h`` (``c`` is 1 % of the mean level, for zero hours).

With ``β = 0`` (no persistent level, or too few origins to tell) it *is* the 7-day mean; with
``β = 1`` it carries today's ratio forward in full. Bands are the empirical quantiles of the
same predictor's errors at each step over the last two weeks of hourly origins.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._series import LEVELS
from .base import Bands, Forecaster

DAY = 24
MIN_ORIGINS = 24  # hourly origins needed before β is estimated (else β = 0)
RESIDUAL_ORIGINS = 14 * DAY


def _offset(values: np.ndarray) -> float:
    return max(0.01 * float(np.mean(values)), 1e-6)


def _profiles(values: np.ndarray, days: int, lead: int = 1) -> np.ndarray:
    """``P_t`` for every position ``t < len(values) + DAY·lead``: the mean of
    ``values[t - 24k]`` for ``k = lead … lead + days - 1`` (NaN where the days are missing)."""
    n = len(values)
    out = np.full(n + DAY * lead, np.nan)
    total = np.zeros(n + DAY * lead)
    for k in range(lead, lead + days):
        lag = DAY * k
        total[lag : lag + n] += values[: max(0, min(n, n + DAY * lead - lag))]
    first = DAY * (lead + days - 1)
    out[first:] = total[first:] / days
    return out


def level_signal(values: np.ndarray, profile: np.ndarray, c: float) -> np.ndarray:
    """``ℓ_o`` for every origin ``o`` (forecast from position ``o`` on): log of the last 24
    hours' load over their profile; NaN where not defined."""
    n = len(values)
    v = np.concatenate([[0.0], np.cumsum(values)])
    p = np.concatenate([[0.0], np.cumsum(np.nan_to_num(profile[:n], nan=0.0))])
    missing = np.concatenate([[0], np.cumsum(~np.isfinite(profile[:n]))])
    out = np.full(n + 1, np.nan)
    o = np.arange(DAY, n + 1)
    load = v[o] - v[o - DAY]
    base = np.where(missing[o] - missing[o - DAY] == 0, p[o] - p[o - DAY], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        out[DAY:] = np.log((load + DAY * c) / (base + DAY * c))
    return out


def fit_beta(values: np.ndarray, days: int, horizon: int = DAY) -> np.ndarray:
    """``β_h`` for ``h = 1 … horizon`` (see the module docstring)."""
    n = len(values)
    c = _offset(values)
    profile = _profiles(values, days)[:n]
    ell = level_signal(values, profile, c)
    with np.errstate(invalid="ignore", divide="ignore"):
        e = np.log((values + c) / (profile + c))
    beta = np.zeros(horizon)
    for h in range(1, horizon + 1):
        origins = np.arange(n - h + 1)  # target position o + h - 1 < n
        x, y = ell[origins], e[origins + h - 1]
        ok = np.isfinite(x) & np.isfinite(y)
        if ok.sum() < MIN_ORIGINS:
            return np.zeros(horizon)
        beta[h - 1] = float(np.sum(x[ok] * y[ok]) / max(np.sum(x[ok] ** 2), 1e-12))
    return np.minimum.accumulate(np.clip(beta, 0.0, 1.0))


def profile_level_forecast(
    values: np.ndarray, horizon: int, beta: np.ndarray, days: int = 7
) -> np.ndarray:
    """The forecast of steps 1 … ``horizon`` after ``values`` (``beta`` per step; later steps
    reuse the last)."""
    n = len(values)
    c = _offset(values)
    out = np.empty(horizon)
    ell = level_signal(values, _profiles(values, days)[:n], c)[n]
    ell = 0.0 if not np.isfinite(ell) else float(ell)
    beta = np.asarray(beta, dtype=float)
    used = max(1, min(days, n // DAY))
    for lead in range(1, -(-horizon // DAY) + 1):
        steps = slice((lead - 1) * DAY, min(horizon, lead * DAY))
        profile = _profiles(values, used, lead)[n + steps.start : n + steps.stop]
        base = profile
        b = beta[np.minimum(np.arange(steps.start, steps.stop), len(beta) - 1)]
        out[steps] = (base + c) * np.exp(b * ell) - c
    return np.clip(np.nan_to_num(out, nan=float(np.mean(values[-DAY:]))), 0.0, None)


def one_step_forecasts(
    values: np.ndarray, targets: np.ndarray, beta: np.ndarray, days: int = 7
) -> np.ndarray:
    """``profile_level_forecast(values[:t], 1, beta, days)[0]`` for every position ``t`` in
    ``targets`` (each ≥ 1) at once, for the refresh state's rolling one-step errors.

    Every term is what the forecast from ``values[:t]`` computes, in the same order: the
    profile and level sums at positions before ``t`` do not depend on what follows ``t``.
    """
    n = len(values)
    # the offset c of each prefix, as _offset computes it: np.mean is this pairwise sum ÷ t
    # (a running cumsum would round differently)
    means = np.array([np.add.reduce(values[:t]) for t in targets]) / targets
    c = np.maximum(0.01 * means, 1e-6)
    profile = _profiles(values, days)[:n]
    v = np.concatenate([[0.0], np.cumsum(values)])
    p = np.concatenate([[0.0], np.cumsum(np.nan_to_num(profile, nan=0.0))])
    missing = np.concatenate([[0], np.cumsum(~np.isfinite(profile))])
    ell = np.zeros(len(targets))
    ok = targets >= DAY
    o = targets[ok]
    known = missing[o] - missing[o - DAY] == 0
    load, base = v[o] - v[o - DAY], np.where(known, p[o] - p[o - DAY], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        ell[ok] = np.log((load + DAY * c[ok]) / (base + DAY * c[ok]))
    ell[~np.isfinite(ell)] = 0.0
    # P_t over the days available before t, summed from the nearest day back
    used = np.maximum(1, np.minimum(days, targets // DAY))
    day_profile = np.full(len(targets), np.nan)
    for u in np.unique(used):
        rows = np.flatnonzero((used == u) & (targets >= DAY * u))
        total = np.zeros(len(rows))
        for k in range(1, u + 1):
            total += values[targets[rows] - DAY * k]
        day_profile[rows] = total / u
    out = (day_profile + c) * np.exp(beta[0] * ell) - c
    for row in np.flatnonzero(np.isnan(out)):  # no profile yet: the last day's mean
        out[row] = float(np.mean(values[: targets[row]][-DAY:]))
    return np.clip(np.nan_to_num(out), 0.0, None)


class ProfileLevel(Forecaster):
    """The 7-day same-hour mean with a damped level correction (see the module docstring)."""

    name = "profile_level"
    complexity = 0  # the robust baseline: preferred whenever the evidence is weak

    def __init__(self, *, days: int = 7) -> None:
        self.days = days

    def min_history(self) -> int:
        return (self.days + 1) * DAY

    def _fit(self, values: np.ndarray, index: pd.DatetimeIndex, events: object) -> None:
        self.values_ = values[-(self.days + 2) * DAY :].copy()
        self.beta_ = fit_beta(values[-(self.days + 1 + 28) * DAY :], self.days)
        self.residuals_ = self._residuals(values)

    def _residuals(self, values: np.ndarray) -> np.ndarray:
        """Errors of this predictor at each step from the last two weeks' hourly origins
        (rows: origins, columns: steps 1 … 24)."""
        n = len(values)
        c = _offset(values)
        profile = _profiles(values, self.days)[:n]
        ell = level_signal(values, profile, c)
        origins = np.arange(max(self.min_history(), n - RESIDUAL_ORIGINS - DAY + 1), n - DAY + 1)
        origins = origins[np.isfinite(ell[origins])]
        window = origins[:, None] + np.arange(DAY)  # the 24 hours after each origin
        yhat = np.clip(
            (profile[window] + c) * np.exp(self.beta_ * ell[origins, None]) - c, 0.0, None
        )
        return (values[window] - yhat).reshape(-1, DAY)

    def _predict(self, horizon: int, ds: pd.DatetimeIndex) -> tuple[np.ndarray, Bands]:
        yhat = profile_level_forecast(self.values_, horizon, self.beta_, self.days)
        return yhat, step_bands(yhat, self.residuals_)


def step_bands(yhat: np.ndarray, residuals: np.ndarray) -> Bands:
    """Bands from per-step empirical error quantiles (``residuals``: origins × steps); steps
    past the last column reuse it, widened by ``sqrt`` of the days ahead."""
    horizon = len(yhat)
    bands: Bands = {}
    if residuals.size == 0 or len(residuals) < 10:
        spread = np.full(horizon, 0.1 * float(np.mean(yhat)))
        for level, z in ((80, 1.2816), (95, 1.96)):
            bands[level] = (yhat - z * spread, yhat + z * spread)
        return bands
    steps = np.minimum(np.arange(horizon), residuals.shape[1] - 1)
    widen = np.sqrt(np.arange(horizon) // residuals.shape[1] + 1)
    # without NaN, np.quantile gives nanquantile's values without its loop over columns
    quantile = np.nanquantile if np.isnan(residuals).any() else np.quantile
    for level in LEVELS:
        alpha = (100 - level) / 200
        lo, hi = quantile(residuals, [alpha, 1 - alpha], axis=0)
        bands[level] = (
            yhat + np.minimum(lo[steps], 0.0) * widen,
            yhat + np.maximum(hi[steps], 0.0) * widen,
        )
    return bands
