"""History hygiene: gaps, collection outages and spikes, each decision written down.

:func:`clean_history` turns a raw hourly history into a regular series that models can fit,
plus the notes and the flagged hours that operators should see:

1. validation — a Series on whole UTC hours, no duplicates, no negative or infinite values;
2. gaps — absent hours and NaN become missing;
3. outages — a run of zeros where the same hour of the neighbouring days carried real load
   is a collection outage, not idle demand, and becomes missing;
4. spikes and dips — an hour far (``threshold`` robust z-scores, MAD) from both the median of
   the same hour on the three days either side and, with three weeks or more, the same hour of
   the neighbouring weeks, is flagged and replaced by that median for fitting. Hours inside
   business events are never flagged: they are expected to be unusual. Neither are the last
   24 hours: there a jump may be the start of a new level, and the forecast must follow it;
5. filling — short gaps (≤ 3 h) are interpolated linearly, longer ones take the median of
   the same hour on the surrounding days.

Scoring uses ``observed`` (missing and outage hours NaN, spikes kept: they were real load).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ._series import as_hourly, regular
from .events import event_hours, validate_events

__all__ = ["CleanHistory", "clean_history", "detect_anomalies"]

DAY = 24
WEEK = 168
SHORT_GAP = 3
ANOMALY_COLUMNS = ("ds", "kind", "value", "expected", "score")


@dataclass(frozen=True)
class CleanHistory:
    """Result of :func:`clean_history`.

    ``y``: regular hourly series without NaN, for fitting. ``observed``: the same index with
    missing and outage hours NaN, for scoring. ``anomalies``: one row per flagged hour
    (``ds, kind, value, expected, score``; kind is ``outage``, ``spike`` or ``dip``).
    ``notes``: human-readable decisions.
    """

    y: pd.Series
    observed: pd.Series
    anomalies: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def _shifted(values: np.ndarray, lag: int) -> np.ndarray:
    out = np.full(len(values), np.nan)
    if lag > 0 and lag < len(values):
        out[:-lag] = values[lag:]
    elif lag < 0 and -lag < len(values):
        out[-lag:] = values[:lag]
    return out


def same_hour_median(values: np.ndarray, period: int, reach: int) -> np.ndarray:
    """Median of ``values`` at ``±period·k`` for ``k = 1..reach`` (the hour itself excluded)."""
    lags = [sign * period * k for k in range(1, reach + 1) for sign in (1, -1)]
    stack = np.vstack([_shifted(values, lag) for lag in lags])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns give NaN, as wanted
        return np.nanmedian(stack, axis=0)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, stop)`` index pairs of the True runs of ``mask``."""
    padded = np.concatenate([[False], mask, [False]]).astype(int)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2], edges[1::2], strict=True))


def _describe(index: pd.DatetimeIndex, runs: list[tuple[int, int]], limit: int = 3) -> str:
    parts = [
        f"{index[a]:%Y-%m-%d %H:%M}" + (f"–{index[b - 1]:%Y-%m-%d %H:%M}" if b - a > 1 else "")
        for a, b in runs[:limit]
    ]
    more = f" and {len(runs) - limit} more" if len(runs) > limit else ""
    return ", ".join(parts) + more


def _level(values: np.ndarray) -> float:
    positive = values[np.isfinite(values) & (values > 0)]
    return float(np.median(positive)) if positive.size else 0.0


def _outages(values: np.ndarray, min_level: float) -> list[tuple[int, int, float]]:
    """Zero runs where the same hour of neighbouring days carried load: (start, stop, expected)."""
    finite = values[np.isfinite(values)]
    level = _level(values)
    if level == 0 or np.mean(finite == 0) >= 0.5:
        return []  # a mostly idle series: zeros are demand
    expected = same_hour_median(np.where(values == 0, np.nan, values), DAY, 3)
    neighbours = same_hour_median(values, DAY, 3)
    out = []
    for start, stop in _runs(values == 0):
        hint = expected[start:stop]
        hint = hint[np.isfinite(hint)]
        typical = float(np.median(hint)) if hint.size else level
        around = neighbours[start:stop]
        idle_hour = np.isfinite(around).any() and np.nanmax(around) == 0
        if typical > min_level * level and not idle_hour:
            out.append((start, stop, typical))
    return out


def _robust_z(residual: np.ndarray, floor: float) -> np.ndarray:
    finite = residual[np.isfinite(residual)]
    if not finite.size:
        return np.full(len(residual), np.nan)
    mad = 1.4826 * float(np.median(np.abs(finite - np.median(finite))))
    return residual / max(mad, floor)


def _spikes(
    values: np.ndarray, protected: np.ndarray, threshold: float, min_relative: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flag mask, expected values and z-scores of spikes/dips (needs three days of data)."""
    flags = np.zeros(len(values), dtype=bool)
    if np.isfinite(values).sum() < 3 * DAY:
        return flags, np.full(len(values), np.nan), np.zeros(len(values))
    level = _level(values)
    floor = max(level, 1.0) * 1e-6
    expected = same_hour_median(values, DAY, 3)
    z = _robust_z(values - expected, floor)
    flags = np.abs(z) > threshold
    if len(values) >= 3 * WEEK:
        weekly = same_hour_median(values, WEEK, 2)
        z_week = _robust_z(values - weekly, floor)
        flags &= ~(np.abs(z_week) <= threshold)
    flags &= np.abs(values - expected) > min_relative * level
    flags &= np.isfinite(expected) & ~protected
    # In the last day a jump cannot yet be told from a level shift, and the newest hours
    # matter most to the forecast: flag only hours that have a later day to compare with.
    flags[max(0, len(values) - DAY) :] = False
    return flags, expected, z


def _fill(values: np.ndarray) -> np.ndarray:
    series = pd.Series(values)
    short = series.interpolate(limit=SHORT_GAP, limit_area="inside")
    gaps = np.isnan(values)
    keep_short = np.zeros(len(values), dtype=bool)
    for start, stop in _runs(gaps):
        keep_short[start:stop] = stop - start <= SHORT_GAP and start > 0 and stop < len(values)
    filled = np.where(keep_short, short.to_numpy(), values)
    seasonal = same_hour_median(filled, DAY, 7)
    filled = np.where(np.isnan(filled), seasonal, filled)
    return pd.Series(filled).interpolate(limit_direction="both").fillna(0.0).to_numpy()


def clean_history(
    y: pd.Series,
    *,
    events: pd.DataFrame | None = None,
    threshold: float = 6.0,
    min_relative: float = 0.25,
    outage_min_level: float = 0.1,
) -> CleanHistory:
    """Validate, regularise and clean an hourly history (see the module docstring).

    ``threshold`` is the robust z-score above which an hour is a spike/dip; ``min_relative``
    the smallest deviation, as a share of the median positive level, worth flagging;
    ``outage_min_level`` the share of that level the neighbouring days must have carried for
    a zero run to count as an outage.
    """
    notes: list[str] = []
    raw = as_hourly(y)
    if y.index.tz is None:
        notes.append("timestamps had no time zone; taken as UTC")
    if not y.index.is_monotonic_increasing:
        notes.append("history was not in time order; sorted")
    series = regular(raw)
    values = series.to_numpy(dtype=float).copy()
    index = series.index
    missing = np.isnan(values)
    if missing.any():
        runs = _runs(missing)
        notes.append(
            f"{int(missing.sum())} missing hour(s) in {len(runs)} gap(s) filled: "
            f"{_describe(index, runs)}"
        )
    rows = []
    outages = _outages(values, outage_min_level)
    for start, stop, typical in outages:
        values[start:stop] = np.nan
        rows += [(index[i], "outage", 0.0, typical, np.nan) for i in range(start, stop)]
    if outages:
        hours = sum(b - a for a, b, _ in outages)
        notes.append(
            f"{hours} zero hour(s) look like collection outages (the same hours on nearby "
            f"days carried load); treated as missing: {_describe(index, [o[:2] for o in outages])}"
        )
    observed = pd.Series(values.copy(), index=index, name=raw.name)
    protected = event_hours(index, validate_events(events))
    flags, expected, z = _spikes(values, protected, threshold, min_relative)
    for i in np.flatnonzero(flags):
        kind = "spike" if values[i] > expected[i] else "dip"
        rows.append((index[i], kind, values[i], expected[i], round(float(z[i]), 2)))
    if flags.any():
        notes.append(
            f"{int(flags.sum())} spike/dip hour(s) beyond {threshold:g} robust z-scores replaced "
            f"by the same-hour median for fitting: {_describe(index, _runs(flags))}"
        )
        values[flags] = expected[flags]
    filled = pd.Series(_fill(values), index=index, name=raw.name)
    if np.ptp(filled.to_numpy()) == 0:
        notes.append(f"history is constant at {filled.iloc[0]:g}")
    anomalies = pd.DataFrame(rows, columns=list(ANOMALY_COLUMNS))
    anomalies = anomalies.sort_values("ds", ignore_index=True)
    return CleanHistory(y=filled, observed=observed, anomalies=anomalies, notes=notes)


def detect_anomalies(
    y: pd.Series, *, events: pd.DataFrame | None = None, threshold: float = 6.0
) -> pd.DataFrame:
    """Flagged hours for annotations: ``ds`` (UTC), ``kind`` (outage/spike/dip), ``value``
    (observed), ``expected`` (same-hour median), ``score`` (robust z; NaN for outages)."""
    return clean_history(y, events=events, threshold=threshold).anomalies
