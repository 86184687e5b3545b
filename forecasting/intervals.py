"""Prediction intervals: from a model's residuals, and calibrated from backtest errors.

Simple models get bands from the empirical quantiles of their own in-sample forecast errors.
Whatever a model's bands, :func:`conformal_factors` rescales them with split-conformal factors
learnt from out-of-sample backtest errors — in :func:`forecasting.auto_forecast` the *nested*
ones (each fold forecast by the rule applied to the other folds, :mod:`forecasting.nested`),
so the errors that chose the model do not also size its bands. For every point the error is
divided by the band's half-width on that side at that horizon step, and the level-quantile of
those ratios (the finite-sample conformal rank, at the nominal level: no margin) becomes the
widening or narrowing factor. Dividing by the model's own per-step half-width keeps its growth
over the horizon, so a few dozen points are enough to correct the overall width.

Evidence depth. The 80 % factor rests on a fifth of the points' errors, the 95 % one on a
twentieth — about a dozen exceedances from five daily folds, which share each fold's errors.
So the 95 % factor may also rest on older folds' errors (``tail``: in ``auto_forecast`` the
anchor ARIMA's backtest on as many daily folds again before the selection's), and is never
below the 80 % factor: the tail is not calibrated lighter than the body, whose quantile rests
on four times the exceedances. When the backtest holds fewer folds than were asked for
(``windows``: a short history, or folds left out around a level shift), the miss rate allowed
shrinks by the share of folds missing, ``(1 - level) · folds / windows``: days not seen are
not taken to be as calm as the few that were.

Guard rails: every half-width is measured and applied with a floor of ``MIN_HALF_WIDTH[level]``
of the forecast (a zero-width band of a noiseless or sparse series gives finite ratios, not
×3000), and factors stay within ``[FACTOR_FLOOR, FACTOR_CAP]`` (a noiseless backtest cannot
collapse the bands, one blown fold cannot multiply them without bound).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._series import LEVELS

MIN_CALIBRATION_POINTS = 24
#: Calibrate to a level this far from nominal towards 100 %. Zero: the nested errors are
#: already out of sample, and no margin is tuned on an evaluation.
LEVEL_MARGIN = 0.0
FACTOR_FLOOR = 0.25
FACTOR_CAP = 10.0
#: Smallest half-width of each band, as a share of the forecast.
MIN_HALF_WIDTH = {80: 0.02, 95: 0.03}
#: The levels whose factor also rests on older folds' errors when they are given.
TAIL_LEVELS = (95,)


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
    backtest: pd.DataFrame,
    *,
    margin: float = LEVEL_MARGIN,
    windows: int | None = None,
    tail: pd.DataFrame | None = None,
) -> dict[int, float] | None:
    """Per-level factors that make the backtest bands cover their target share of actuals.

    ``backtest`` is a long frame from :func:`forecasting.backtest` (out-of-sample errors); the
    target level is the nominal one moved ``margin`` of the way to 100 %, and further by the
    share of the ``windows`` folds asked for that ``backtest`` lacks. ``tail``: an optional
    frame of older folds' out-of-sample errors that the ``TAIL_LEVELS`` factors also rest on.
    The 95 % factor is at least the 80 % one. Factors are clipped to ``[FACTOR_FLOOR,
    FACTOR_CAP]``. Returns ``None`` when ``backtest`` holds fewer than
    ``MIN_CALIBRATION_POINTS`` scored points.
    """
    frame = scored_points(backtest)
    if frame is None:
        return None
    missing = 0.0
    if windows:  # the share of the folds asked for that the backtest lacks
        missing = max(windows - int(frame["cutoff"].nunique()), 0) / windows
    deep = frame
    if tail is not None and not tail.empty:
        older = tail[np.isfinite(tail["y"].to_numpy(dtype=float))]
        deep = pd.concat([frame, older[frame.columns.intersection(older.columns)]])
    factors = {}
    for level in LEVELS:
        ratio = band_ratios(deep if level in TAIL_LEVELS else frame, level)
        n = len(ratio)
        target = 1 - (1 - level / 100) * (1 - margin) * (1 - missing)
        q = min(1.0, np.ceil((n + 1) * target) / n)
        factor = float(np.quantile(ratio, q, method="higher"))
        factors[level] = float(np.clip(factor, FACTOR_FLOOR, FACTOR_CAP))
    factors[95] = max(factors[95], factors[80])
    return factors


def scored_points(backtest: pd.DataFrame) -> pd.DataFrame | None:
    """The rows of a backtest frame with an actual, or None when there are fewer than
    ``MIN_CALIBRATION_POINTS`` of them."""
    frame = backtest[np.isfinite(backtest["y"].to_numpy(dtype=float))]
    return frame if len(frame) >= MIN_CALIBRATION_POINTS else None


def band_ratios(frame: pd.DataFrame, level: int) -> np.ndarray:
    """Each point's error ÷ its band's half-width on the error's side (floored as
    :func:`apply_factors` floors it): the factor that band needed to just cover the point."""
    y = frame["y"].to_numpy(dtype=float)
    yhat = frame["yhat"].to_numpy(dtype=float)
    lo = frame[f"lo_{level}"].to_numpy(dtype=float)
    hi = frame[f"hi_{level}"].to_numpy(dtype=float)
    width = np.where(y >= yhat, hi - yhat, yhat - lo)
    return np.abs(y - yhat) / np.maximum(width, _least_width(yhat, level))


def _least_width(yhat: np.ndarray, level: int) -> np.ndarray:
    """The half-width floor: ``MIN_HALF_WIDTH`` of the forecast, and never below 0.1 % of
    the mean forecast (or 1e-3 for a forecast of zeros)."""
    scale = max(float(np.mean(np.abs(yhat))), 1.0) * 1e-3
    return np.maximum(MIN_HALF_WIDTH[level] * np.abs(yhat), scale)


def apply_factors(frame: pd.DataFrame, factors: dict[int, float]) -> pd.DataFrame:
    """Rescale every band's half-widths around ``yhat`` by its level's factor (copy)."""
    out = frame.copy()
    yhat = out["yhat"].to_numpy(dtype=float)
    for level in LEVELS:
        lo = out[f"lo_{level}"].to_numpy(dtype=float)
        hi = out[f"hi_{level}"].to_numpy(dtype=float)
        f = factors[level]
        least = _least_width(yhat, level)
        out[f"lo_{level}"] = np.clip(yhat - f * np.maximum(yhat - lo, least), 0.0, None)
        out[f"hi_{level}"] = yhat + f * np.maximum(hi - yhat, least)
    out["lo_95"] = np.fmin(out["lo_95"], out["lo_80"])
    out["hi_95"] = np.fmax(out["hi_95"], out["hi_80"])
    return out
