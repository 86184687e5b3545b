"""The ARIMA part of the hourly refresh (:mod:`forecasting.refresh`): the stored parameters
run through the Kalman filter over the longer history — the same window, log scale and weekly
profile as the fit — and the model's own conditional forecasts from one or many origins.

Nothing is fitted here: every function reads a refresh state's ``order``, ``params``,
``scale``, ``log``, ``max_history``, ``weekly_profile``, ``profile_anchor`` and
``innovation_quantiles``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

DAY = 24
WEEK = 168
HOUR_NS = 3600 * 10**9


def model_inputs(
    state: dict[str, Any], values: np.ndarray, index: pd.DatetimeIndex
) -> tuple[np.ndarray, np.ndarray, int]:
    """The model-space series x (log, minus the weekly profile) and the profile phase."""
    x = values[-int(state["max_history"]) :]
    stamps = index.asi8[-len(x) :]
    if state["log"]:
        x = np.log1p(x)
    profile = np.asarray(state["weekly_profile"], dtype=float)
    anchor = pd.Timestamp(state["profile_anchor"]).value
    phase = ((stamps - anchor) // HOUR_NS) % WEEK
    return x - profile[phase], profile, anchor


#: The last filter run, by its inputs: auto_forecast builds the state (the innovations) and
#: then refreshes at the fit's own origin (the quantiles), the same window with the same
#: parameters — the second filter is the first one's result.
_last_filter: dict[bytes, tuple[Any, Any]] = {}


def run_filter(state: dict[str, Any], x: np.ndarray) -> tuple[Any, Any]:
    """The SARIMAX model of the state on model-space ``x`` and its Kalman filter run with the
    stored parameters (no fit)."""
    from statsmodels.tsa.statespace import kalman_filter as kf
    from statsmodels.tsa.statespace.sarimax import SARIMAX

    from ._quiet import captured
    from .models.arima import STEADY_STATE_TOLERANCE, _difference, one_blas_thread

    params = np.asarray(state["params"], dtype=float)
    key = repr(state["order"]).encode() + params.tobytes() + x.tobytes()
    hit = _last_filter.get(key)  # one lookup: another thread may clear it in between
    if hit is not None:
        return hit
    # a refresh reads the one-step errors, their variances and the predicted states only:
    # not storing the state covariances and gains is the same arithmetic at 2/3 of the CPU
    unused = (
        kf.MEMORY_NO_PREDICTED_COV
        | kf.MEMORY_NO_FILTERED_MEAN
        | kf.MEMORY_NO_FILTERED_COV
        | kf.MEMORY_NO_GAIN
        | kf.MEMORY_NO_SMOOTHING
        | kf.MEMORY_NO_STD_FORECAST
    )
    p, d, q = state["order"]
    with captured("statsmodels"), one_blas_thread():
        model = SARIMAX(
            _difference(x, d),
            order=(p, 0, q),
            seasonal_order=(0, 0, 1, DAY),
            concentrate_scale=True,
            tolerance=STEADY_STATE_TOLERANCE,
        )
        result = model.filter(params, cov_type="none", conserve_memory=unused)
    _last_filter.clear()
    _last_filter[key] = (model, result)
    return model, result


def standardized_innovations(
    state: dict[str, Any], values: np.ndarray, index: pd.DatetimeIndex
) -> np.ndarray:
    """The filter's one-step errors over the fitted window ÷ their standard deviation."""
    x, _, _ = model_inputs(state, values, index)
    _, result = run_filter(state, x)
    errors = np.asarray(result.forecasts_error[0], dtype=float)
    variance = np.asarray(result.forecasts_error_cov[0, 0], dtype=float)  # scale included
    with np.errstate(divide="ignore", invalid="ignore"):
        return errors / np.sqrt(variance)


def forecasts_from(
    state: dict[str, Any],
    values: np.ndarray,
    index: pd.DatetimeIndex,
    positions: np.ndarray,
    horizon: int,
) -> tuple[np.ndarray, np.ndarray]:
    from statsmodels.tsa.arima_process import arma2ma

    from .models.arima import _integration_filter

    d = state["order"][1]
    first = max(int(positions.min()) - int(state["max_history"]), 0)
    span_values, span_index = values[first : positions.max()], index[first : positions.max()]
    x, profile, anchor = model_inputs(
        state | {"max_history": len(span_values)}, span_values, span_index
    )
    lag = DAY + d  # x position of z[0]
    model, result = run_filter(state, x)
    design = np.asarray(model.ssm["design"])[0]
    transition = np.asarray(model.ssm["transition"])
    predicted = np.asarray(result.predicted_state)  # (k, nobs + 1): a_{j | j-1}
    integ = _integration_filter(d)
    psi = arma2ma(np.convolve(result.polynomial_ar, integ), result.polynomial_ma, lags=horizon)
    sd = np.sqrt(float(state["scale"]) * np.cumsum(psi**2))
    quantiles = np.asarray(state["innovation_quantiles"], dtype=float)
    center = np.empty((len(positions), horizon))
    for row, t in enumerate(positions):
        local = t - first  # x index of the first forecast hour
        a = predicted[:, local - lag]
        z_hat = np.empty(horizon)
        for h in range(horizon):
            z_hat[h] = design @ a
            a = transition @ a
        series = list(x[local - (len(integ) - 1) : local])
        for h in range(horizon):
            lagged = sum(integ[k] * series[-k] for k in range(1, len(integ)) if integ[k])
            series.append(z_hat[h] - lagged)
        ds = index.asi8[t - 1] + HOUR_NS * np.arange(1, horizon + 1)
        phase = ((ds - anchor) // HOUR_NS) % WEEK
        center[row] = np.asarray(series[len(integ) - 1 :]) + profile[phase]
    levels = center[:, :, None] + (sd[:, None] * quantiles[None, :])[None, :, :]
    if state["log"]:
        center, levels = np.expm1(center), np.expm1(levels)
    return center, levels
