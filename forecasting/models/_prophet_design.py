"""Prophet's model inputs and deterministic predictions, built with numpy (private).

Prophet's own ``fit`` and ``predict`` build the Stan data — scaled ``y`` and time, the
changepoint grid, the Fourier features, the regressor columns — through pandas frames, and
that bookkeeping cost three quarters of a fit's CPU on four weeks of hourly data (the Stan
optimiser itself a quarter). For the one configuration gpucast runs (linear growth, ``absmax``
scaling, 25 changepoints in the first 80 % of the history, daily and weekly Fourier terms and
0/1 regressors that are not standardised, all in one mode, MAP fit, no uncertainty samples)
this module builds the same arrays and evaluates the same forecast directly:

* ``y / max|y|``; ``t = (ds - start) / (end - start)``; changepoints at
  ``linspace(0, floor(0.8 T) - 1, 26).round()[1:]``;
* Fourier features ``sin, cos(2π (i+1) t_days / period)`` with ``t_days`` days since the
  epoch, then the regressors, with their prior scales;
* initial values through the first and last points (``linear_growth_init``);
* ``yhat = trend × (1 + X β)`` (multiplicative) or ``trend + X β × y_scale`` (additive), the
  trend piecewise linear.

The Stan model, its optimiser and its settings stay Prophet's (:mod:`._prophet_backend`);
``tests/forecasting/test_prophet_design.py`` checks the inputs and the forecast against
Prophet's own to floating-point precision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

N_CHANGEPOINTS = 25
CHANGEPOINT_RANGE = 0.8
_DAY_S = 24 * 60 * 60


def nanoseconds(ds: pd.DatetimeIndex) -> np.ndarray:
    """Hours as int64 nanoseconds since the epoch (UTC wall time, as Prophet sees it)."""
    return np.asarray(ds.asi8, dtype=np.int64)


def fourier(ns: np.ndarray, period_days: float, order: int) -> np.ndarray:
    """Prophet's ``fourier_series``: columns ``sin, cos`` of each order, ``(n, 2 order)``."""
    days = ns / 10**9 / _DAY_S  # as pandas' total_seconds: ns / 1e9, then days
    x = np.pi * 2 * days
    out = np.empty((len(ns), 2 * order))
    for i in range(order):
        c = (i + 1) / period_days * x
        out[:, 2 * i] = np.sin(c)
        out[:, 2 * i + 1] = np.cos(c)
    return out


@dataclass
class Design:
    """What a fit fixes: scales, changepoints, the seasonalities ``(period_days, order,
    prior_scale)``, the regressors' prior scales and the mode."""

    mode: str
    seasonalities: list[tuple[float, int, float]]
    regressor_scales: list[float]
    changepoint_prior_scale: float
    start: int = 0
    t_scale: int = 1
    y_scale: float = 1.0
    changepoints_t: np.ndarray = field(default_factory=lambda: np.zeros(1))
    has_changepoints: bool = True

    def features(self, ns: np.ndarray, flags: np.ndarray) -> np.ndarray:
        """The feature matrix ``X``: Fourier terms, then the regressor columns ``flags``."""
        parts = [fourier(ns, period, order) for period, order, _ in self.seasonalities]
        parts.append(np.asarray(flags, dtype=float).reshape(len(ns), -1))
        if sum(p.shape[1] for p in parts) == 0:
            parts.append(np.zeros((len(ns), 1)))  # Prophet's dummy column
        return np.concatenate(parts, axis=1)

    def prior_scales(self) -> list[float]:
        scales = [s for _, order, s in self.seasonalities for _ in range(2 * order)]
        scales += self.regressor_scales
        return scales or [1.0]

    def t(self, ns: np.ndarray) -> np.ndarray:
        return (ns - self.start) / self.t_scale

    def stan_inputs(
        self, ns: np.ndarray, y: np.ndarray, flags: np.ndarray
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Set the scales and changepoints from the history; Prophet's ``stan_data`` and
        default ``stan_init`` for it."""
        self.start, end = int(ns[0]), int(ns[-1])
        self.t_scale = end - self.start
        scale = float(np.max(np.abs(y)))
        self.y_scale = scale if scale != 0 else 1.0
        t = self.t(ns)
        y_scaled = y / self.y_scale
        self._changepoints(ns)
        x = self.features(ns, flags)
        k = (y_scaled[-1] - y_scaled[0]) / (t[-1] - t[0])
        m = y_scaled[0] - k * t[0]
        columns = x.shape[1]
        additive = 1 if self.mode == "additive" else 0
        data = {
            "T": len(y),
            "S": len(self.changepoints_t),
            "K": columns,
            "tau": self.changepoint_prior_scale,
            "trend_indicator": 0,
            "y": y_scaled,
            "t": t,
            "cap": np.zeros(len(y)),
            "t_change": self.changepoints_t,
            "X": x,
            "sigmas": self.prior_scales(),
            "s_a": np.full(columns, additive),
            "s_m": np.full(columns, 1 - additive),
        }
        init = {
            "k": float(k),
            "m": float(m),
            "delta": np.zeros_like(self.changepoints_t),
            "beta": np.zeros(columns),
            "sigma_obs": 1.0,
        }
        return data, init

    def _changepoints(self, ns: np.ndarray) -> None:
        size = int(np.floor(len(ns) * CHANGEPOINT_RANGE))
        count = min(N_CHANGEPOINTS, size - 1)
        self.has_changepoints = count > 0
        if count > 0:
            positions = np.linspace(0, size - 1, count + 1).round().astype(int)[1:]
            self.changepoints_t = np.sort(self.t(ns[positions]))
        else:
            self.changepoints_t = np.zeros(1)  # Prophet's dummy changepoint

    def yhat(self, params: dict[str, np.ndarray], ns: np.ndarray, flags: np.ndarray) -> np.ndarray:
        """Prophet's ``yhat`` at hours ``ns`` (MAP parameters, no uncertainty samples)."""
        k, m = float(params["k"][0][0]), float(params["m"][0][0])
        deltas = params["delta"][0]
        t = self.t(ns)
        deltas_t = (self.changepoints_t[None, :] <= t[:, None]) * deltas
        trend = (deltas_t.sum(axis=1) + k) * t + (deltas_t * -self.changepoints_t).sum(axis=1) + m
        trend = trend * self.y_scale
        terms = self.features(ns, flags) @ params["beta"][0]
        if self.mode == "additive":
            return trend + terms * self.y_scale
        return trend * (1 + terms)
