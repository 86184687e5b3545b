"""One calibrated distribution per forecast hour: the bands *are* four of its quantiles.

A refreshed forecast's error distribution (:mod:`forecasting.refresh`) gives the shape at every
level; the backtest calibration (:mod:`forecasting.intervals`) fixes four of its quantiles,
the band ends: ``lo_95 = q2.5``, ``lo_80 = q10``, ``hi_80 = q90``, ``hi_95 = q97.5``. Every
other stored quantile is carried along by a monotone piecewise-linear map of the raw
distribution through those four knots (beyond ``q97.5`` with the slope of the ``q90 → q97.5``
piece), so plans on ``hi_80`` and on ``q90`` size the same hour alike.

The nightly run fixes the knots at its calibrated bands and keeps, in its refresh state, each
knot's width ratio (calibrated half-width ÷ raw half-width, summed over the horizon); a refresh
run widens its raw knots around its forecast by those ratios and maps the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

#: Band columns and the quantile level each one is.
KNOTS = {"lo_95": 0.025, "lo_80": 0.1, "hi_80": 0.9, "hi_95": 0.975}
#: The stored quantile columns and their levels (as ``forecasting.refresh.QUANTILES``).
QUANTILE_LEVELS = {f"q{round(q * 100)}": q for q in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)}
RATIO_FLOOR, RATIO_CAP = 0.25, 10.0  # as the conformal factors' guard rails

Columns = Mapping[str, np.ndarray]


def width_ratios(raw: Columns, calibrated: Columns) -> dict[str, float]:
    """Per band column: the calibrated half-width around its ``yhat`` over the raw one around
    its own ``yhat``, summed over all hours (1.0 when the raw band has no width)."""
    ratios = {}
    for name in KNOTS:
        raw_width = float(np.sum(np.abs(np.asarray(raw[name]) - np.asarray(raw["yhat"]))))
        wide = float(np.sum(np.abs(np.asarray(calibrated[name]) - np.asarray(calibrated["yhat"]))))
        ratio = wide / raw_width if raw_width > 0 else 1.0
        ratios[name] = round(float(np.clip(ratio, RATIO_FLOOR, RATIO_CAP)), 6)
    return ratios


def widened_knots(raw: Columns, ratios: Mapping[str, float]) -> dict[str, np.ndarray]:
    """The band ends of ``raw`` with each half-width around ``yhat`` scaled by its ratio."""
    yhat = np.asarray(raw["yhat"], dtype=float)
    knots = {
        name: yhat + float(ratios.get(name, 1.0)) * (np.asarray(raw[name], dtype=float) - yhat)
        for name in KNOTS
    }
    knots["lo_80"] = np.clip(knots["lo_80"], 0.0, None)
    knots["lo_95"] = np.clip(np.fmin(knots["lo_95"], knots["lo_80"]), 0.0, None)
    knots["hi_95"] = np.fmax(knots["hi_95"], knots["hi_80"])
    return knots


def through_knots(raw: Columns, knots: Columns) -> dict[str, np.ndarray]:
    """The quantile columns of ``raw`` mapped through the calibrated band ends ``knots``
    (``q90`` equals ``knots["hi_80"]``), plus the knots themselves; monotone and
    non-negative. ``raw`` must hold the band columns and the quantile columns, monotone."""
    r = {name: np.asarray(raw[name], dtype=float) for name in KNOTS}
    c = {name: np.asarray(knots[name], dtype=float) for name in KNOTS}
    out = {name: c[name].copy() for name in KNOTS}
    for name, level in QUANTILE_LEVELS.items():
        if name not in raw:
            continue
        x = np.asarray(raw[name], dtype=float)
        lo_80, hi_80, hi_95 = ((r[k], c[k], KNOTS[k]) for k in ("lo_80", "hi_80", "hi_95"))
        if level <= 0.9:
            out[name] = _piece(x, level, lo_80, hi_80)
        elif level <= 0.975:
            out[name] = _piece(x, level, hi_80, hi_95)
        else:
            span = r["hi_95"] - r["hi_80"]
            slope = np.divide(c["hi_95"] - c["hi_80"], span, out=np.ones_like(span), where=span > 0)
            out[name] = c["hi_95"] + np.clip(x - r["hi_95"], 0.0, None) * slope
    order = ["lo_95", "lo_80", *[q for q in QUANTILE_LEVELS if q in out], "hi_95"]
    order.sort(key=lambda name: KNOTS.get(name, QUANTILE_LEVELS.get(name, 0.0)))
    stacked = np.maximum.accumulate(np.clip(np.stack([out[n] for n in order]), 0.0, None), axis=0)
    result = {name: stacked[i] for i, name in enumerate(order)}
    result["hi_80"] = result.get("q90", c["hi_80"])
    return result


def _piece(
    x: np.ndarray,
    level: float,
    low: tuple[np.ndarray, np.ndarray, float],
    high: tuple[np.ndarray, np.ndarray, float],
) -> np.ndarray:
    """``x`` mapped linearly from the raw ``[low, high]`` knots onto the calibrated ones; where
    the raw piece has no width, by the level's position between the two knots' levels."""
    (r0, c0, l0), (r1, c1, l1) = low, high
    span = r1 - r0
    share = np.divide(x - r0, span, out=np.full_like(x, (level - l0) / (l1 - l0)), where=span > 0)
    return c0 + np.clip(share, 0.0, 1.0) * (c1 - c0)
