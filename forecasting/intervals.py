"""Prediction intervals: from a model's residuals, and calibrated from backtest errors.

Simple models get bands from the empirical quantiles of their own in-sample forecast errors.
Whatever a model's bands, :func:`calibrate` rescales them with split-conformal factors learnt
from the rolling-origin backtest: for every backtest point the error is divided by the band's
half-width on that side, and the level-quantile of those ratios becomes the widening (or
narrowing) factor. Dividing by the model's own per-step half-width keeps its growth over the
horizon, so a few dozen backtest points are enough to correct the overall width.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._series import LEVELS

MIN_CALIBRATION_POINTS = 24
#: Calibrate to a level this far from nominal towards 100 % (0.5: 80 % → 90 %, 95 % → 97.5 %).
#: The chosen model's backtest errors are optimistic — it won because they were small, on a
#: handful of windows — and tomorrow is further out of sample than the backtest. On the real
#: traffic evaluation nominal calibration covered 68 % (80 % band) and 92 % (95 % band);
#: with this margin 80 % and 95 % (bench/RESULTS.md).
LEVEL_MARGIN = 0.5


def residual_bands(
    yhat: np.ndarray, residuals: np.ndarray, scale: np.ndarray | float = 1.0
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Bands ``yhat + quantile(residuals) * scale`` for the 80 % and 95 % levels.

    ``residuals`` are actual minus forecast (any shape, NaN ignored); ``scale`` widens the
    bands per horizon step (e.g. ``sqrt`` of the number of seasons ahead).
    """
    res = np.asarray(residuals, dtype=float).ravel()
    res = res[np.isfinite(res)]
    yhat = np.asarray(yhat, dtype=float)
    scale = np.broadcast_to(np.asarray(scale, dtype=float), yhat.shape)
    bands = {}
    for level in LEVELS:
        alpha = (100 - level) / 200
        if len(res) >= 10:
            lo_q, hi_q = np.quantile(res, [alpha, 1 - alpha])
        elif len(res) >= 2:
            z = {80: 1.2816, 95: 1.9600}[level]
            sd = float(np.std(res, ddof=1))
            lo_q, hi_q = -z * sd, z * sd
        else:
            lo_q = hi_q = 0.0
        bands[level] = (yhat + min(lo_q, 0.0) * scale, yhat + max(hi_q, 0.0) * scale)
    return bands


def conformal_factors(
    backtest: pd.DataFrame, *, margin: float = LEVEL_MARGIN
) -> dict[int, float] | None:
    """Per-level factors that make the backtest bands cover their target share of actuals.

    ``backtest`` is a long frame from :func:`forecasting.backtest`; the target level is the
    nominal one moved ``margin`` of the way to 100 %. Returns ``None`` when the frame holds
    fewer than ``MIN_CALIBRATION_POINTS`` scored points.
    """
    frame = backtest[np.isfinite(backtest["y"].to_numpy(dtype=float))]
    if len(frame) < MIN_CALIBRATION_POINTS:
        return None
    y = frame["y"].to_numpy(dtype=float)
    yhat = frame["yhat"].to_numpy(dtype=float)
    scale_floor = max(float(np.mean(np.abs(y))), 1.0) * 1e-3
    factors = {}
    for level in LEVELS:
        lo = frame[f"lo_{level}"].to_numpy(dtype=float)
        hi = frame[f"hi_{level}"].to_numpy(dtype=float)
        width = np.where(y >= yhat, hi - yhat, yhat - lo)
        ratio = np.abs(y - yhat) / np.maximum(width, scale_floor)
        n = len(ratio)
        target = level / 100 + margin * (1 - level / 100)
        q = min(1.0, np.ceil((n + 1) * target) / n)
        factors[level] = float(np.quantile(ratio, q, method="higher"))
    return factors


def apply_factors(frame: pd.DataFrame, factors: dict[int, float]) -> pd.DataFrame:
    """Rescale every band's half-widths around ``yhat`` by its level's factor (copy)."""
    out = frame.copy()
    yhat = out["yhat"].to_numpy(dtype=float)
    scale_floor = max(float(np.mean(np.abs(yhat))), 1.0) * 1e-3
    for level in LEVELS:
        lo = out[f"lo_{level}"].to_numpy(dtype=float)
        hi = out[f"hi_{level}"].to_numpy(dtype=float)
        f = factors[level]
        out[f"lo_{level}"] = np.clip(yhat - f * np.maximum(yhat - lo, scale_floor), 0.0, None)
        out[f"hi_{level}"] = yhat + f * np.maximum(hi - yhat, scale_floor)
    out["lo_95"] = np.fmin(out["lo_95"], out["lo_80"])
    out["hi_95"] = np.fmax(out["hi_95"], out["hi_80"])
    return out
