"""Hourly refresh: condition an already fitted model on the hours that arrived since, without
refitting, and forecast the next ``horizon`` hours with calibrated quantiles.

The nightly fit leaves a **state** — plain JSON values, see :func:`refresh_state` — and
:func:`refresh` needs nothing else: no fitted object, no process that fitted it.

* ``arima``: the stored parameters, run through the Kalman filter over the longer history
  (the same window, log scale and weekly profile as the fit): the forecast is the model's own
  conditional forecast from the new origin.
* ``seasonal_naive``, ``seasonal_ma``, ``seasonal_ma_weekly``: recomputed on the longer
  history (they have no parameters to keep).
* ``prophet``: the fit is kept — its deterministic path over the 72 hours after the fit is
  stored — and the level is corrected from the recent residuals.
* ``ensemble``: its members, each refreshed, then their median (or weighted mean).

**Level correction** (every model but ARIMA, whose filter already conditions on the last
hours): the last hour's one-step error ``e`` is carried forward as ``rho_h * e`` at step
``h``, where ``rho_h`` is the lag-``h`` autocorrelation of the model's rolling one-step errors
over the last two weeks (clipped to [0, 1) and non-increasing): a level shift an hour old is
followed at once, a one-hour blip is forgotten as fast as the series forgets it.

**Quantiles** ``QUANTILES`` per horizon step, calibrated from errors: for the recomputed and
the Prophet models, the empirical quantiles of the refreshed forecast's own errors at step
``h`` from every hourly origin of the last two weeks (rolling origin, data before each origin
only); for ARIMA, the empirical quantiles of its standardized one-step innovations scaled by
the model's step-``h`` standard deviation (ψ-weights). Quantiles are non-negative and
monotone in the level; ``lo_80``/``hi_80`` and ``lo_95``/``hi_95`` of a refreshed forecast are
its 0.1/0.9 and 0.025/0.975 quantiles. A state from :func:`forecasting.auto_forecast` also
carries ``band_ratios``, the nightly backtest calibration of those four quantiles, and every
refresh widens them by it and maps the other quantiles along (:mod:`forecasting._calibrated`):
one calibrated distribution, the bands four of its quantiles, nightly and refreshed alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._calibrated import through_knots, widened_knots
from ._refresh_arima import DAY, HOUR_NS, forecasts_from, standardized_innovations
from ._same_hour import nanmedian_columns
from ._series import as_hourly, check_horizon, future_index, interpolated, regular
from .errors import InvalidParameterError

__all__ = [
    "QUANTILES",
    "QUANTILE_COLUMNS",
    "REFRESHABLE",
    "learnt_events",
    "refresh",
    "refresh_many",
    "refresh_state",
]

#: Quantile levels stored with every forecast (columns ``q50 … q99``).
QUANTILES = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
QUANTILE_COLUMNS = tuple(f"q{round(q * 100)}" for q in QUANTILES)
# Every level computed: the stored quantiles plus the 80 % and 95 % band ends.
_LEVELS = np.array(sorted({0.025, 0.1, *QUANTILES, 0.975}))
_BAND_LEVELS = {"lo_95": 0.025, "lo_80": 0.1, "hi_80": 0.9, "hi_95": 0.975}
STATE_VERSION = 1
CALIBRATION_HOURS = 14 * 24  # origins the quantiles and the correction are learnt from
STEPS = 24  # horizon steps calibrated; later steps reuse the last one
PATH_HOURS = 72  # Prophet's stored path: a day of horizon beyond the 36 h a plan stays fresh
MIN_ERRORS = 24
OUTAGE_MIN_LEVEL = 0.1  # as clean_history's outage_min_level
REFRESHABLE = (
    "profile_level",
    "seasonal_naive",
    "seasonal_ma",
    "seasonal_ma_weekly",
    "arima",
    "prophet",
)


# -- state ---------------------------------------------------------------------------------


def refresh_state(model: Any, history: pd.Series) -> dict[str, Any]:
    """The state :func:`refresh` needs, as JSON-ready values, from a model fitted on
    ``history`` (the cleaned history it was fitted on). An ensemble passes its fitted
    members as ``model.members_``. Raises InvalidParameterError for a model it cannot refresh.
    """
    series = regular(as_hourly(history))
    values = interpolated(series.to_numpy())  # as the fit saw it
    index = series.index
    members = getattr(model, "members_", None)
    if model.name == "ensemble" or members:
        if not members:
            raise InvalidParameterError("an ensemble state needs its fitted members")
        combined: dict[str, Any] = {
            "version": STATE_VERSION,
            "kind": "ensemble",
            "members": [refresh_state(m, history) for m in members],
        }
        weights = getattr(model, "weights", None)
        if weights is not None:
            combined["weights"] = [float(w) for w in weights]
        return combined
    kind = model.name
    if kind not in REFRESHABLE:
        raise InvalidParameterError(f"model {kind!r} cannot be refreshed")
    state: dict[str, Any] = {"version": STATE_VERSION, "kind": kind}
    if kind == "arima":
        state |= _arima_state(model, values, index)
        return state
    if kind == "seasonal_naive":
        state["season"] = int(model.season)
    elif kind == "profile_level":
        state |= {"days": int(model.days), "beta": [round(float(b), 6) for b in model.beta_]}
    elif kind in ("seasonal_ma", "seasonal_ma_weekly"):
        state |= {
            "period": int(model.period),
            "periods": int(model._periods()),
            "trend": bool(model.trend),
        }
    else:  # prophet
        state |= _prophet_state(model, values, index)
    errors = _one_step_errors(state, values, index)
    rho = _autocorrelations(errors, STEPS)
    state["rho"] = [round(float(r), 6) for r in rho]
    state["offsets"] = _refreshed_error_quantiles(errors, rho).round(6).tolist()
    return state


def _arima_state(model: Any, values: np.ndarray, index: pd.DatetimeIndex) -> dict[str, Any]:
    result = model.result_
    anchor = index[-1] + pd.Timedelta(hours=1)  # weekly profile element 0
    state = {
        "order": [int(v) for v in model.order_],
        "params": [float(v) for v in np.asarray(result.params)],
        "scale": float(result.scale),  # concentrated out of the likelihood: a fitted value
        "log": bool(model.log_),
        "max_history": int(model.max_history),
        "weekly_profile": [float(v) for v in model.weekly_profile_],
        "profile_anchor": anchor.isoformat(),
    }
    innovations = standardized_innovations(state, values, index)
    tail = innovations[-CALIBRATION_HOURS:]
    tail = tail[np.isfinite(tail)]
    if len(tail) >= MIN_ERRORS:
        state["innovation_quantiles"] = np.quantile(tail, _LEVELS).round(6).tolist()
    else:  # too few: Gaussian quantiles
        from statistics import NormalDist

        state["innovation_quantiles"] = [round(NormalDist().inv_cdf(q), 6) for q in _LEVELS]
    return state


def _prophet_state(model: Any, values: np.ndarray, index: pd.DatetimeIndex) -> dict[str, Any]:
    ds = future_index(index[-1], PATH_HOURS)
    path = model.predict(PATH_HOURS)["yhat"].to_numpy(dtype=float)
    residuals = np.asarray(model.residuals_, dtype=float)
    fitted = values[-len(residuals) :] - residuals
    return {
        "learnt_events": [c.removeprefix("event_") for c in getattr(model, "event_names_", [])],
        "path_start": ds[0].isoformat(),
        "path": [round(float(v), 6) for v in path],
        "fitted": [round(float(v), 6) for v in fitted],
    }


# -- refresh -------------------------------------------------------------------------------


def refresh(state: dict[str, Any], y: pd.Series, horizon: int = 24) -> pd.DataFrame:
    """Forecast ``horizon`` hours after the end of ``y`` from a stored ``state``.

    ``y``: the (longer) hourly history, as given to a fit. Returns ``ds, yhat, lo_80, hi_80,
    lo_95, hi_95`` and the ``QUANTILE_COLUMNS``, non-negative and monotone.
    """
    series = regular(as_hourly(y))
    ds = future_index(series.index[-1], check_horizon(horizon))
    arrays = refresh_many(state, series, [ds[0]], horizon=horizon)
    return pd.DataFrame({"ds": ds, **{k: v[0] for k, v in arrays.items() if k != "ds"}})


def _without_outages(values: np.ndarray, min_level: float = OUTAGE_MIN_LEVEL) -> np.ndarray:
    """Gaps and collection outages filled, causally: a zero hour whose same hour on the
    previous three days carried load (their median above ``min_level`` x the series' typical
    level) is an outage, as :func:`forecasting.clean_history` treats it, but judged from the
    hours before it only — the typical level is the median of the positive hours before the
    zero — and a gap or outage takes the last value before it (the first known one for
    leading gaps). So a value at position ``i`` depends on positions ``<= i`` only, and every
    origin of :func:`refresh_many` sees exactly what :func:`refresh` on the hours before it
    would: what comes after a decision never changes it."""
    out = values.astype(float).copy()
    zeros = np.flatnonzero(out == 0)
    if zeros.size:
        previous = np.full((3, len(out)), np.nan)
        for k in range(1, 4):
            previous[k - 1, k * DAY :] = out[: len(out) - k * DAY] if len(out) > k * DAY else []
        typical = nanmedian_columns(np.where(previous > 0, previous, np.nan))  # NaN: no past
        outages = [z for z in zeros if _is_outage(values[:z], typical[z], min_level)]
        out[outages] = np.nan
    missing = ~np.isfinite(out)
    if missing.any() and not missing.all():  # the last value before, the first at the start
        known = np.where(missing, 0, np.arange(len(out)))
        last = np.maximum.accumulate(known)
        first = int(np.flatnonzero(~missing)[0])
        out = out[np.where(missing & (np.arange(len(out)) < first), first, last)]
    return out


def _is_outage(before: np.ndarray, typical: float, min_level: float) -> bool:
    """A zero after ``before`` is an outage when its same hours carried load (``typical``)
    above ``min_level`` x the median positive hour before it, in a series mostly not zero."""
    finite = before[np.isfinite(before)]
    positive = finite[finite > 0]
    if not positive.size or np.mean(finite == 0) >= 0.5 or not np.isfinite(typical):
        return False
    return bool(typical > min_level * float(np.median(positive)))


def _per_step(array: np.ndarray, horizon: int) -> np.ndarray:
    """Rows for steps 1..horizon (steps past the calibrated ones repeat the last)."""
    positions = np.minimum(np.arange(horizon), len(array) - 1)
    return array[positions]


# -- the models' forecasts from an origin ----------------------------------------------------


def _base(
    state: dict[str, Any], values: np.ndarray, index: pd.DatetimeIndex, horizon: int
) -> np.ndarray:
    """Point forecast of steps 1..horizon after ``values`` (recomputed models and Prophet)."""
    kind = state["kind"]
    if kind == "seasonal_naive":
        season = int(state["season"])
        pattern = values[-season:] if len(values) >= season else np.full(season, values[-1])
        return np.resize(pattern, horizon)
    if kind == "profile_level":
        from .models.profile_level import profile_level_forecast

        beta = np.asarray(state["beta"], dtype=float)
        return profile_level_forecast(values, horizon, beta, int(state["days"]))
    if kind in ("seasonal_ma", "seasonal_ma_weekly"):
        from .models.seasonal_ma import _period_mean_forecast

        period = int(state["period"])
        if len(values) < period:
            return np.full(horizon, float(values.mean()))
        return _period_mean_forecast(
            values, horizon, period=period, periods=int(state["periods"]), trend=state["trend"]
        )
    return _prophet_path(state, index[-1] + pd.Timedelta(hours=1), horizon)


def _prophet_path(state: dict[str, Any], first: pd.Timestamp, horizon: int) -> np.ndarray:
    """Prophet's stored path from ``first`` on."""
    start = pd.Timestamp(state["path_start"])
    offset = int((first.value - start.value) // HOUR_NS)
    return _prophet_at(state, offset + np.arange(horizon))


def _prophet_at(state: dict[str, Any], positions: np.ndarray) -> np.ndarray:
    """Prophet's values at hour ``positions`` of its stored path: before it the fitted
    values, after it the path's last day repeated (its daily shape)."""
    path = np.asarray(state["path"], dtype=float)
    fitted = np.asarray(state["fitted"], dtype=float)
    out = np.empty(len(positions))
    early, late = positions < 0, positions >= len(path)
    inside = ~early & ~late
    out[early] = fitted[np.maximum(len(fitted) + positions[early], 0)]
    out[inside] = path[positions[inside]]
    out[late] = path[len(path) - DAY + (positions[late] - len(path)) % DAY]
    return out


def _one_step(
    state: dict[str, Any], values: np.ndarray, index: pd.DatetimeIndex, targets: np.ndarray
) -> np.ndarray:
    """``_base(state, values[:t], index[:t], 1)[0]`` for every position ``t`` in ``targets``
    (each ≥ 1): the one-step forecasts of ``values[t]``, all origins at once."""
    kind = state["kind"]
    if kind == "seasonal_naive":
        season = int(state["season"])
        lag = np.where(targets >= season, season, 1)  # less than a season: the last value
        return values[targets - lag]
    if kind == "profile_level":
        from .models.profile_level import one_step_forecasts

        beta = np.asarray(state["beta"], dtype=float)
        return one_step_forecasts(values, targets, beta, int(state["days"]))
    if kind in ("seasonal_ma", "seasonal_ma_weekly"):
        from .models.seasonal_ma import period_mean_forecasts

        period = int(state["period"])
        out = np.empty(len(targets))
        short = targets < period
        out[short] = [float(values[:t].mean()) for t in targets[short]]
        out[~short] = period_mean_forecasts(
            values,
            targets[~short],
            1,
            period=period,
            periods=int(state["periods"]),
            trend=state["trend"],
        )[:, 0]
        return out
    start = pd.Timestamp(state["path_start"]).value
    stamps = index.as_unit("ns").asi8[targets - 1]  # the hour before each forecast hour
    return _prophet_at(state, (stamps + HOUR_NS - start) // HOUR_NS)


def _one_step_errors(
    state: dict[str, Any], values: np.ndarray, index: pd.DatetimeIndex
) -> np.ndarray:
    """Rolling one-step errors y_t - forecast of t from origin t, for the last
    CALIBRATION_HOURS + STEPS hours (fewer with a short history)."""
    if state["kind"] == "prophet":
        fitted = np.asarray(state["fitted"], dtype=float)
        return values[-len(fitted) :] - fitted
    count = min(CALIBRATION_HOURS + STEPS, len(values) - 1)
    first = len(values) - count
    return values[first:] - _one_step(state, values, index, np.arange(first, len(values)))


def _autocorrelations(errors: np.ndarray, steps: int) -> np.ndarray:
    """Lag 1..steps autocorrelations of the errors, clipped to [0, 0.98] and non-increasing."""
    rho = np.zeros(steps)
    if len(errors) < MIN_ERRORS:  # too few (none, for a history of one hour) to estimate
        return rho
    e = errors - errors.mean()
    denominator = float(np.dot(e, e))
    if denominator <= 0:
        return rho
    for lag in range(1, min(steps, len(e) - 2) + 1):
        rho[lag - 1] = float(np.dot(e[lag:], e[:-lag])) / denominator
    rho = np.clip(rho, 0.0, 0.98)
    return np.minimum.accumulate(rho)


def _refreshed_error_quantiles(errors: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """(STEPS x _LEVELS) quantiles of the refreshed forecast's error at each step: from
    origin j the forecast of step h is base + rho_h e_{j-1}, so its error is
    e_{j+h-1} - rho_h e_{j-1}. Steps with too few errors take the previous step's row."""
    out = np.zeros((STEPS, len(_LEVELS)))
    for h in range(1, STEPS + 1):
        if len(errors) - h >= MIN_ERRORS:
            residual = errors[h:] - rho[h - 1] * errors[:-h]
            out[h - 1] = np.quantile(residual, _LEVELS)
        elif h > 1:
            out[h - 1] = out[h - 2]
        elif len(errors):
            out[0] = np.quantile(errors, _LEVELS)
    # the error spread does not shrink further ahead (steps share few origins each)
    width_hi = np.maximum.accumulate(np.clip(out[:, _LEVELS > 0.5], 0, None), axis=0)
    width_lo = np.minimum.accumulate(np.clip(out[:, _LEVELS < 0.5], None, 0), axis=0)
    out[:, _LEVELS > 0.5] = width_hi
    out[:, _LEVELS < 0.5] = width_lo
    return out


# -- many origins at once (the band=auto calibration and the plan replay) --------------------


def refresh_many(
    state: dict[str, Any], y: pd.Series, origins: Sequence[pd.Timestamp], horizon: int = 24
) -> dict[str, np.ndarray]:
    """:func:`refresh` from every origin in ``origins`` (each forecast uses the hours of ``y``
    strictly before its origin), as arrays: ``{"ds": (n,) first forecast hours, "yhat",
    "lo_80", …, "q99": (n, horizon)}``. Equal to calling :func:`refresh` per origin (ARIMA:
    one Kalman filter pass over the whole span instead of one per origin, equal to the
    windowed filters once the filter has converged)."""
    horizon = check_horizon(horizon)
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise InvalidParameterError("unknown refresh state; the series needs a nightly refit")
    series = regular(as_hourly(y))
    values = _without_outages(series.to_numpy(dtype=float))
    index = series.index
    stamps = pd.DatetimeIndex(origins)
    positions = np.searchsorted(index.asi8, stamps.asi8)  # first hour not used
    if (positions < 2).any():
        raise InvalidParameterError("every origin needs at least two hours of history before it")
    center, levels = _many(state, values, index, positions, horizon)
    return _calibrated(state, _arrays(stamps, center, levels))


def _calibrated(state: dict[str, Any], arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays`` with the band ends widened by the state's nightly calibration (when it has
    one) and every quantile mapped along."""
    ratios = state.get("band_ratios")
    if ratios:
        arrays |= through_knots(arrays, widened_knots(arrays, ratios))
    return arrays


def _many(
    state: dict[str, Any],
    values: np.ndarray,
    index: pd.DatetimeIndex,
    positions: np.ndarray,
    horizon: int,
) -> tuple[Any, Any]:
    kind = state.get("kind")
    if kind == "ensemble":
        parts = [_many(s, values, index, positions, horizon) for s in state["members"]]
        arrays = [  # members: columns only
            _calibrated(s, _arrays(None, c, lv))
            for s, (c, lv) in zip(state["members"], parts, strict=True)
        ]
        keys = [k for k in arrays[0] if k != "ds"]
        weights = state.get("weights")
        if weights is None:
            return {k: np.median(np.stack([a[k] for a in arrays]), axis=0) for k in keys}, None
        w = np.asarray(weights, dtype=float) / float(np.sum(weights))
        return {k: np.tensordot(w, np.stack([a[k] for a in arrays]), axes=1) for k in keys}, None
    if kind == "arima":
        return forecasts_from(state, values, index, positions, horizon)
    if kind not in REFRESHABLE:
        raise InvalidParameterError(f"unknown refresh state kind {kind!r}")
    rho = _per_step(np.asarray(state["rho"], dtype=float), horizon)
    offsets = _per_step(np.asarray(state["offsets"], dtype=float), horizon)
    last_error = values[positions - 1] - _one_step(state, values, index, positions - 1)
    center = np.empty((len(positions), horizon))
    for row, t in enumerate(positions):
        center[row] = _base(state, values[:t], index[:t], horizon) + rho * last_error[row]
    return center, center[:, :, None] + offsets[None, :, :]


def _arrays(stamps: Any, center: Any, levels: Any) -> dict[str, np.ndarray]:
    """The column arrays of many forecasts (what _frame builds for one)."""
    if levels is None:  # already merged columns (an ensemble)
        return {"ds": np.asarray(stamps), **center}
    yhat = np.clip(center, 0.0, None)
    # the central 80 % interval holds the forecast: levels up to 0.1 at most, from 0.9 at
    # least yhat, so that the band ends stay exactly the quantiles they are
    levels = np.clip(levels, 0.0, None)
    levels[:, :, _LEVELS <= 0.1] = np.minimum(levels[:, :, _LEVELS <= 0.1], yhat[:, :, None])
    levels[:, :, _LEVELS >= 0.9] = np.maximum(levels[:, :, _LEVELS >= 0.9], yhat[:, :, None])
    levels = np.maximum.accumulate(levels, axis=2)
    column = {q: levels[:, :, i] for i, q in enumerate(_LEVELS)}
    out: dict[str, np.ndarray] = {"ds": np.asarray(stamps), "yhat": yhat}
    for name, q in _BAND_LEVELS.items():
        out[name] = column[q]
    for name, q in zip(QUANTILE_COLUMNS, QUANTILES, strict=True):
        out[name] = column[q]
    return out


def learnt_events(state: dict[str, Any]) -> set[str]:
    """Event names the state's model learnt itself (their multipliers must not apply again)."""
    names = set(state.get("learnt_events") or ())
    for member in state.get("members") or ():
        names |= learnt_events(member)
    return names


def quantile_columns(frame: pd.DataFrame) -> Sequence[str]:
    """The quantile columns a forecast frame carries (empty for one without them)."""
    return [c for c in QUANTILE_COLUMNS if c in frame.columns]
