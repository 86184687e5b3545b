"""Same-hour statistics on hourly arrays (NaN = missing), shared by history hygiene
(:mod:`forecasting.hygiene`) and the refresh: lagged copies, NaN-ignoring column medians, the
median of the same hour on neighbouring days, and robust scales.
"""

from __future__ import annotations

import numpy as np


def shifted(values: np.ndarray, lag: int) -> np.ndarray:
    """``values`` moved by ``lag`` positions (value at ``t + lag`` placed at ``t``), NaN-padded."""
    out = np.full(len(values), np.nan)
    if lag > 0 and lag < len(values):
        out[:-lag] = values[lag:]
    elif lag < 0 and -lag < len(values):
        out[-lag:] = values[:lag]
    return out


def nanmedian_columns(stack: np.ndarray) -> np.ndarray:
    """``np.nanmedian(stack, axis=0)`` (NaN where a column has no value), bit for bit.

    numpy takes its masked-array path for stacks of a few rows like these, 5-10x slower than
    this: NaN sorts last, so a column's median sits at its count of non-NaN values; the
    middle pair is averaged as ``(lo + hi) / 2``, as numpy does (``lo == hi`` for odd counts).
    """
    ordered = np.sort(stack, axis=0)
    count = stack.shape[0] - np.isnan(stack).sum(axis=0)
    columns = np.arange(stack.shape[1])
    low = ordered[np.maximum(count - 1, 0) // 2, columns]
    high = ordered[count // 2, columns]
    out = (low + high) / 2
    out[count == 0] = np.nan
    return out


def lagged(values: np.ndarray, lags: list[int]) -> np.ndarray:
    """Rows ``shifted(values, lag)`` for every lag, in one array."""
    return np.vstack([shifted(values, lag) for lag in lags])


def same_hour_median(values: np.ndarray, period: int, reach: int) -> np.ndarray:
    """Median of ``values`` at ``±period·k`` for ``k = 1..reach`` (the hour itself excluded)."""
    lags = [sign * period * k for k in range(1, reach + 1) for sign in (1, -1)]
    return nanmedian_columns(lagged(values, lags))


def positive_median(values: np.ndarray) -> float:
    """The median of the positive finite values: a series' typical level (0 when none)."""
    positive = values[np.isfinite(values) & (values > 0)]
    return float(np.median(positive)) if positive.size else 0.0


def robust_scale(residual: np.ndarray, floor: float) -> float:
    """1.4826 × the median absolute deviation of the finite residuals, at least ``floor``."""
    finite = residual[np.isfinite(residual)]
    if not finite.size:
        return floor
    return max(1.4826 * float(np.median(np.abs(finite - np.median(finite)))), floor)


def robust_z(residual: np.ndarray, floor: float) -> np.ndarray:
    """Residuals in robust standard deviations (:func:`robust_scale`)."""
    return residual / robust_scale(residual, floor)


def past_median(values: np.ndarray, period: int, reach: int) -> np.ndarray:
    """Median of ``values`` at ``-period·k`` for ``k = 1..reach`` (the past only)."""
    return nanmedian_columns(lagged(values, [-period * k for k in range(1, reach + 1)]))
