"""Forecast error metrics that behave on idle (zero) hours.

Every function takes array-likes of equal length and ignores positions where the actual is
NaN (an unobserved hour). None divides by zero: where a denominator vanishes the documented
fallback applies, and an empty input gives NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import numpy as np
import pandas as pd

__all__ = [
    "METRICS",
    "coverage",
    "mae",
    "mase",
    "mase_scale",
    "pinball",
    "rmse",
    "smape",
    "summarize",
    "underprovision_rate",
    "wape",
]


def _pair(y_true: object, y_pred: object) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(y_true, dtype=float).ravel()
    b = np.asarray(y_pred, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"actuals have {a.size} values, forecasts {b.size}; they must match")
    keep = np.isfinite(a)
    return a[keep], b[keep]


def mae(y_true: object, y_pred: object) -> float:
    """Mean absolute error, in the series' units."""
    a, b = _pair(y_true, y_pred)
    return float(np.mean(np.abs(a - b))) if a.size else float("nan")


def rmse(y_true: object, y_pred: object) -> float:
    """Root mean squared error, in the series' units."""
    a, b = _pair(y_true, y_pred)
    return float(np.sqrt(np.mean((a - b) ** 2))) if a.size else float("nan")


def smape(y_true: object, y_pred: object) -> float:
    """Symmetric MAPE in percent (0–200, M4 definition); hours where both are 0 count as 0."""
    a, b = _pair(y_true, y_pred)
    if not a.size:
        return float("nan")
    denom = np.abs(a) + np.abs(b)
    terms = np.divide(2 * np.abs(a - b), denom, out=np.zeros_like(a), where=denom > 0)
    return float(100 * np.mean(terms))


def wape(y_true: object, y_pred: object) -> float:
    """Weighted absolute percentage error: ``sum|e| / sum|y|`` as a fraction.

    With all actuals zero it is 0 when the forecast is also all zero, else NaN.
    """
    a, b = _pair(y_true, y_pred)
    if not a.size:
        return float("nan")
    total = float(np.sum(np.abs(a)))
    err = float(np.sum(np.abs(a - b)))
    if total == 0:
        return 0.0 if err == 0 else float("nan")
    return err / total


def mase_scale(y_insample: object, season: int = 24) -> float:
    """In-sample MAE of the seasonal naive forecast, the MASE denominator.

    Falls back to the mean absolute in-sample value when the series repeats itself exactly
    (or is shorter than two seasons), and to 1.0 when that is zero too, so MASE stays finite.
    """
    x = np.asarray(y_insample, dtype=float).ravel()
    if x.size > season:
        diffs = np.abs(x[season:] - x[:-season])
        diffs = diffs[np.isfinite(diffs)]
        if diffs.size and np.mean(diffs) > 0:
            return float(np.mean(diffs))
    finite = x[np.isfinite(x)]
    level = float(np.mean(np.abs(finite))) if finite.size else 0.0
    return level if level > 0 else 1.0


def mase(y_true: object, y_pred: object, *, y_insample: object, season: int = 24) -> float:
    """Mean absolute scaled error against the in-sample seasonal naive (season 24 h)."""
    return mae(y_true, y_pred) / mase_scale(y_insample, season)


def coverage(y_true: object, lo: object, hi: object) -> float:
    """Share (0–1) of actuals inside ``[lo, hi]``."""
    a, low = _pair(y_true, lo)
    _, high = _pair(y_true, hi)
    return float(np.mean((a >= low) & (a <= high))) if a.size else float("nan")


def pinball(y_true: object, y_quantile: object, quantile: float = 0.9) -> float:
    """Mean pinball (quantile) loss of a ``quantile`` forecast, in the series' units."""
    a, q = _pair(y_true, y_quantile)
    if not a.size:
        return float("nan")
    diff = a - q
    return float(np.mean(np.maximum(quantile * diff, (quantile - 1) * diff)))


def underprovision_rate(y_true: object, upper: object) -> float:
    """Share (0–1) of hours whose actual exceeded the forecast's upper band."""
    a, u = _pair(y_true, upper)
    return float(np.mean(a > u)) if a.size else float("nan")


#: Point metrics usable for model selection (lower is better), by name.
METRICS: Mapping[str, Callable[..., float]] = MappingProxyType(
    {"mae": mae, "rmse": rmse, "smape": smape, "wape": wape, "mase": mase}
)


def summarize(backtest: pd.DataFrame, history: pd.Series, *, season: int = 24) -> dict:
    """All metrics of one model's backtest frame, pooled over windows.

    MASE is the mean over windows of each window's MASE, scaled by the history before that
    window's cutoff. ``hi_80`` serves as the 0.9 quantile for the pinball loss; the
    under-provisioning rates count actuals above ``hi_80`` and above ``hi_95``.
    """
    # plain arrays: the metrics are called per backtest and per candidate, and pandas
    # grouping and boolean indexing cost more than the arithmetic
    y, yhat, lo80, hi80, lo95, hi95 = (
        backtest[c].to_numpy(dtype=float) for c in ("y", "yhat", "lo_80", "hi_80", "lo_95", "hi_95")
    )
    insample = history.to_numpy(dtype=float)
    codes, cutoffs = fold_codes(backtest)
    known = _known_before(history.index, cutoffs)
    per_window = [
        mase(y[codes == k], yhat[codes == k], y_insample=insample[known(k)], season=season)
        for k in range(len(cutoffs))
    ]
    per_window = [v for v in per_window if np.isfinite(v)]
    return {
        "mase": float(np.mean(per_window)) if per_window else float("nan"),
        "mae": mae(y, yhat),
        "rmse": rmse(y, yhat),
        "smape": smape(y, yhat),
        "wape": wape(y, yhat),
        "coverage_80": coverage(y, lo80, hi80),
        "coverage_95": coverage(y, lo95, hi95),
        "pinball_90": pinball(y, hi80, 0.9),
        "underprovision_rate_80": underprovision_rate(y, hi80),
        "underprovision_rate_95": underprovision_rate(y, hi95),
        "n_points": int(np.isfinite(y).sum()),
    }


def fold_codes(backtest: pd.DataFrame) -> tuple[np.ndarray, pd.Index]:
    """Each row's fold number and the folds' cutoffs, ascending: ``pd.factorize(cutoff,
    sort=True)`` (groupby's groups, in order), on the stamps as integers when the column is
    one of datetimes."""
    column = backtest["cutoff"]
    if not isinstance(column.dtype, pd.DatetimeTZDtype) or not len(column) or column.hasnans:
        return pd.factorize(column, sort=True)
    stamps = column.array.asi8
    _, first, codes = np.unique(stamps, return_index=True, return_inverse=True)
    return codes.astype(np.int64), pd.DatetimeIndex(column.array[first])


def _known_before(index: pd.Index, cutoffs: pd.Index) -> Callable[[int], object]:
    """Fold ``k`` → which hours of ``index`` are at or before its cutoff: ``index <= cutoff``,
    or the equivalent slice of a sorted index."""
    if isinstance(index, pd.DatetimeIndex) and index.is_monotonic_increasing:
        ends = index.searchsorted(cutoffs, side="right")
        return lambda k: slice(0, int(ends[k]))
    return lambda k: index <= cutoffs[k]
