"""Validation of hourly histories and construction of forecast frames (private)."""

from __future__ import annotations

from datetime import UTC

import numpy as np
import pandas as pd

from .errors import EmptySeriesError, InvalidParameterError, InvalidSeriesError

HOUR = pd.Timedelta(hours=1)
HOUR_NS = 3600 * 10**9
FRAME_COLUMNS = ("ds", "yhat", "lo_80", "hi_80", "lo_95", "hi_95")
LEVELS = (80, 95)

#: Per-hour values at or above this are rejected before any fit: squared errors,
#: likelihoods and capacity plans multiply them further and would overflow float64.
MAX_VALUE = 1e15


def as_hourly(y: pd.Series, *, name: str = "history") -> pd.Series:
    """Return ``y`` as a sorted float series on a UTC hourly index; missing hours stay absent.

    NaN values are kept (they mean "not observed"). Raises :class:`InvalidSeriesError` for
    anything that is not a usable hourly load series. A series that is already all that
    (float64, ascending whole UTC hours, valid values) is returned as it is, not copied:
    every fit, fold and refresh passes through here, mostly with such a series. Callers must
    not mutate the result in place.
    """
    if _is_hourly_float(y) and _valid_values(y.to_numpy()):
        return y
    if not isinstance(y, pd.Series):
        raise InvalidSeriesError(f"{name} must be a pandas Series, got {type(y).__name__}")
    if not isinstance(y.index, pd.DatetimeIndex):
        raise InvalidSeriesError(
            f"{name} must have a DatetimeIndex of UTC hours, got {type(y.index).__name__}"
        )
    try:
        values = pd.to_numeric(y, errors="raise").astype(float)
    except (TypeError, ValueError) as exc:
        raise InvalidSeriesError(f"{name} holds non-numeric values: {exc}") from exc
    index = y.index
    index = index.tz_localize("UTC") if index.tz is None else index.tz_convert("UTC")
    out = pd.Series(values.to_numpy(copy=True), index=index, name=y.name)
    if len(out) and (out.index != out.index.floor("h")).any():
        bad = out.index[out.index != out.index.floor("h")][0]
        raise InvalidSeriesError(
            f"{name} timestamps must fall on whole hours (first offender {bad}); "
            "aggregate to hourly buckets first"
        )
    if out.index.has_duplicates:
        dup = out.index[out.index.duplicated()][0]
        raise InvalidSeriesError(f"{name} has duplicate hour {dup}; keep one value per hour")
    out = out.sort_index()
    if np.isinf(out.to_numpy()).any():
        raise InvalidSeriesError(f"{name} holds infinite values; drop or fix them")
    too_large = out[out >= MAX_VALUE]
    if len(too_large):
        raise InvalidSeriesError(
            f"{name} has {len(too_large)} value(s) of {MAX_VALUE:.0e} or more per hour (first "
            f"{too_large.iloc[0]:.3g} at {too_large.index[0]}); the models cannot compute with "
            "them without overflowing"
        )
    negative = out[out < 0]
    if len(negative):
        raise InvalidSeriesError(
            f"{name} has {len(negative)} negative value(s) (first {negative.iloc[0]:g} at "
            f"{negative.index[0]}); load cannot be negative"
        )
    if out.notna().sum() == 0:
        raise EmptySeriesError(f"{name} has no finite observation; nothing to forecast from")
    return out


def _is_hourly_float(y: object) -> bool:
    """Whether ``y`` is a float64 Series on strictly ascending whole hours of a nanosecond
    UTC index (what :func:`as_hourly` returns; no copy or sort needed)."""
    if not isinstance(y, pd.Series) or y.dtype != np.float64:
        return False
    index = y.index
    if not isinstance(index, pd.DatetimeIndex) or index.tz is not UTC or index.unit != "ns":
        return False
    stamps = index.asi8
    return not (stamps % HOUR_NS).any() and bool((np.diff(stamps) > 0).all())


def _valid_values(values: np.ndarray) -> bool:
    """No infinite, negative or too large value, and at least one finite one (NaN is fine)."""
    with np.errstate(invalid="ignore"):
        bad = np.isinf(values) | (values < 0) | (values >= MAX_VALUE)
    return not bad.any() and not np.isnan(values).all()


def regular(y: pd.Series) -> pd.Series:
    """Reindex ``y`` (sorted, as from :func:`as_hourly`) to every hour from its first to its
    last observed timestamp (gaps become NaN; NaN at either end dropped)."""
    values = y.to_numpy()
    if (
        len(values)
        and values.dtype.kind == "f"
        and not np.isnan(values[0])
        and not np.isnan(values[-1])
        and isinstance(y.index, pd.DatetimeIndex)
        and y.index.unit == "ns"
        and y.index.asi8[-1] - y.index.asi8[0] == (len(values) - 1) * HOUR_NS
    ):
        return y  # already every hour from first to last (sorted and unique): nothing to add
    y = y[y.notna()]
    full = pd.date_range(y.index[0], y.index[-1], freq="h")
    return y.reindex(full)


def interpolated(values: np.ndarray) -> np.ndarray:
    """A float copy of ``values`` with NaN filled linearly between neighbours and flat at
    both ends — ``Series.interpolate(limit_direction="both")`` (which is this ``np.interp``)
    without building a Series on every fit. All-NaN stays NaN."""
    out = np.array(values, dtype=float)
    missing = np.isnan(out)
    if missing.any() and not missing.all():
        known = np.flatnonzero(~missing)
        out[missing] = np.interp(np.flatnonzero(missing), known, out[known])
    return out


def check_horizon(horizon: int) -> int:
    if isinstance(horizon, bool) or not isinstance(horizon, int | np.integer) or horizon < 1:
        raise InvalidParameterError(
            f"horizon must be a positive whole number of hours, got {horizon!r}"
        )
    return int(horizon)


def future_index(last: pd.Timestamp, horizon: int) -> pd.DatetimeIndex:
    return pd.date_range(last + HOUR, periods=horizon, freq="h")


def forecast_columns(
    ds: pd.DatetimeIndex, yhat: np.ndarray, bands: dict[int, tuple[np.ndarray, np.ndarray]]
) -> dict[str, pd.DatetimeIndex | np.ndarray]:
    """The columns of a public forecast frame, non-negative with ``lo_95 ≤ lo_80 ≤ yhat ≤
    hi_80 ≤ hi_95``, as arrays (a backtest stacks them over its folds into one frame)."""
    yhat = np.clip(np.nan_to_num(np.asarray(yhat, dtype=float), nan=0.0), 0.0, None)
    lo80, hi80 = (np.asarray(b, dtype=float) for b in bands[80])
    lo95, hi95 = (np.asarray(b, dtype=float) for b in bands[95])
    lo80 = np.clip(np.fmin(np.nan_to_num(lo80, nan=0.0), yhat), 0.0, None)
    hi80 = np.fmax(np.nan_to_num(hi80, nan=0.0), yhat)
    lo95 = np.clip(np.fmin(np.nan_to_num(lo95, nan=0.0), lo80), 0.0, None)
    hi95 = np.fmax(np.nan_to_num(hi95, nan=0.0), hi80)
    return {"ds": ds, "yhat": yhat, "lo_80": lo80, "hi_80": hi80, "lo_95": lo95, "hi_95": hi95}
