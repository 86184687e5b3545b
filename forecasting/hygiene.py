"""History hygiene: gaps, collection outages, level shifts and spikes, each decision written down.

:func:`clean_history` turns a raw hourly history into a regular series that models can fit,
plus the notes and the flagged hours that operators should see:

1. validation — a Series on whole UTC hours, no duplicates, no negative or infinite values,
   nothing at or above ``MAX_VALUE`` per hour (the models' arithmetic would overflow);
2. gaps — absent hours and NaN become missing;
3. outages — a run of zeros where the same hour of the neighbouring days carried real load
   is a collection outage, not idle demand, and becomes missing;
4. level shift — a run of at least ``LEVEL_SHIFT_MIN_HOURS`` same-sign anomalies (against the
   same hour of the seven days before) that reaches the end of the history is a new level, not
   a spike: it is kept as it is and annotated, and the hours before it are rescaled to the new
   level for fitting, so that every model forecasts from it;
5. spikes and dips — an hour far (``threshold`` robust z-scores, MAD) from both the median of
   the same hour on the three days either side and, with two weeks or more, the same hour of
   the neighbouring weeks (a weekly pattern is not an anomaly), is flagged and replaced by
   that median for fitting. Not flagged: hours inside business events (expected to be
   unusual), the last 24 hours (a jump there may be the start of a new level), and nothing at
   all in a sparse series (most hours zero or equal to their same-hour median: the robust
   scale is zero there and every non-zero hour would look like a spike);
6. filling — short gaps (≤ 3 h) are interpolated linearly, longer ones take the median of
   the same hour on the surrounding days.

Everything is computed from the history it is given, so cleaning a backtest fold's training
slice sees nothing after the fold's cutoff (:func:`forecasting.backtest.fold_histories`).
Scoring uses ``observed`` (missing and outage hours NaN, spikes kept: they were real load).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ._same_hour import (
    past_median,
    positive_median,
    robust_scale,
    robust_z,
    same_hour_median,
)
from ._series import MAX_VALUE, as_hourly, interpolated, regular
from .events import event_hours, validate_events

__all__ = ["MAX_VALUE", "CleanHistory", "clean_history", "detect_anomalies"]

DAY = 24
WEEK = 168
SHORT_GAP = 3
#: A trailing run of same-sign anomalies this long (hours) is a level shift: the new level has
#: been seen twice at every hour of the day. Shorter runs (an outage, a storm, a holiday) are
#: left to the models: rescaling the history to them over-reacts when they end.
LEVEL_SHIFT_MIN_HOURS = 48
#: How far back before its first clear anomaly a shift's start may be extended over hours that
#: deviate the same way without reaching the threshold (a night-time start, say).
LEVEL_SHIFT_EXTEND_HOURS = 6
#: Share of zero hours from which a series is sparse (intermittent): no spike detection.
SPARSE_ZERO_SHARE = 0.3
ANOMALY_COLUMNS = ("ds", "kind", "value", "expected", "score")
_NO_ANOMALIES = pd.DataFrame([], columns=list(ANOMALY_COLUMNS))


@dataclass(frozen=True)
class CleanHistory:
    """Result of :func:`clean_history`.

    ``y``: regular hourly series without NaN, for fitting. ``observed``: the same index with
    missing and outage hours NaN, for scoring. ``anomalies``: one row per flagged hour
    (``ds, kind, value, expected, score``; kind is ``outage``, ``spike``, ``dip`` or
    ``level_shift`` — one row at the shift's first hour, ``score`` its ratio).
    ``notes``: human-readable decisions. ``level_shift``: the first hour of a new level that
    reaches the end of the history (None when there is none).
    """

    y: pd.Series
    observed: pd.Series
    anomalies: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    level_shift: pd.Timestamp | None = None


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


def _outages(values: np.ndarray, min_level: float) -> list[tuple[int, int, float]]:
    """Zero runs where the same hour of neighbouring days carried load: (start, stop, expected)."""
    finite = values[np.isfinite(values)]
    level = positive_median(values)
    if level == 0 or np.mean(finite == 0) >= 0.5:
        return []  # a mostly idle series: zeros are demand
    if not (values == 0).any():
        return []  # no zero run to judge: spare the two medians
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


def sparse_reason(values: np.ndarray, *, neighbours: np.ndarray | None = None) -> str | None:
    """Why spike detection cannot work on ``values`` (None when it can). ``neighbours``:
    ``same_hour_median(values, DAY, 3)`` when the caller has it."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return None
    zeros = float(np.mean(finite == 0))
    if zeros >= SPARSE_ZERO_SHARE:
        return f"sparse series ({zeros:.0%} of hours are zero)"
    expected = same_hour_median(values, DAY, 3) if neighbours is None else neighbours
    residual = values - expected
    residual = residual[np.isfinite(residual)]
    if residual.size and np.median(np.abs(residual - np.median(residual))) == 0:
        return "most hours equal the same hour of the neighbouring days (robust scale zero)"
    return None


@dataclass(frozen=True)
class LevelShift:
    """A new level that reaches the end of the history: hours ``start`` … end, ``ratio``
    times the same hours of the week before it."""

    start: int
    ratio: float


def level_shift(
    values: np.ndarray,
    threshold: float,
    min_relative: float,
    min_hours: int,
    *,
    neighbours: np.ndarray | None = None,
) -> LevelShift | None:
    """The trailing level shift of ``values`` (NaN = missing), or None.

    Every hour is compared with the median of the same hour on the seven days before it; an
    hour is anomalous beyond ``threshold / 2`` robust z-scores and ``min_relative`` of the
    level. The run is the longest suffix in which at least 60 % of the hours are anomalous
    with one sign, starting with one; it is a level shift when it covers ``min_hours`` or
    more, most of its last ``min_hours`` hours are anomalous, and its level differs from the
    week before it by at least ``min_relative``.
    """
    n = len(values)
    if np.isfinite(values).sum() < 4 * DAY or n < 2 * DAY:
        return None
    level = positive_median(values)
    if level == 0:
        return None
    floor = max(level, 1.0) * 1e-6
    if neighbours is None:
        neighbours = same_hour_median(values, DAY, 3)
    scale = robust_scale(values - neighbours, floor)
    past = past_median(values, DAY, 7)
    deviation = values - past
    significant = np.isfinite(deviation) & (
        np.abs(deviation) > max(threshold / 2 * scale, min_relative * level)
    )
    tail = slice(n - min_hours, n)
    for sign in (1.0, -1.0):
        hits = significant & (np.sign(deviation) == sign)
        if hits[tail].mean() < 0.75:
            continue
        counts = np.cumsum(hits[::-1])[::-1]  # hits in [t, n)
        share = counts / (n - np.arange(n))
        reach = max(0, n - 7 * DAY)
        candidates = np.flatnonzero(hits[reach:] & (share[reach:] >= 0.6)) + reach
        start = int(candidates[0]) if candidates.size else n
        if n - start < min_hours - LEVEL_SHIFT_EXTEND_HOURS:
            continue
        ratio = _shift_ratio(values, start)
        if ratio is None:
            return None
        # a start at night, where the step is small in absolute terms: extend over the hours
        # just before that moved at least half as far, relatively
        lowest = max(reach, start - LEVEL_SHIFT_EXTEND_HOURS)
        while start > lowest and sign * (values[start - 1] / max(past[start - 1], 1e-12) - 1) > (
            0.5 * abs(ratio - 1)
        ):
            start -= 1
        if n - start < min_hours:
            continue
        ratio = _shift_ratio(values, start)
        if ratio is None or abs(ratio - 1) < min_relative:
            return None
        return LevelShift(start=start, ratio=ratio)
    return None


def _shift_ratio(values: np.ndarray, start: int) -> float | None:
    """Load from ``start`` on over the same hours of the week before it (None when that
    week is missing or empty)."""
    before = values[max(0, start - 7 * DAY) : start]
    if np.isfinite(before).sum() < DAY:
        return None
    positions = np.arange(start, len(values))
    reference = float(np.nansum(_hour_profile(values[:start])[(positions - start) % DAY]))
    now = float(np.nansum(values[start:]))
    return now / reference if reference > 0 and now > 0 else None


def _hour_profile(values: np.ndarray) -> np.ndarray:
    """Median of each hour of the day over the last seven days of ``values``; element ``i``
    is the hour of position ``len(values) + i`` (mod 24)."""
    week = values[max(0, len(values) - 7 * DAY) :]
    out = np.full(DAY, np.nan)
    for i in range(DAY):
        hours = week[(i + len(week)) % DAY :: DAY]  # positions ≡ origin + i (mod 24)
        hours = hours[np.isfinite(hours)]
        if hours.size:
            out[i] = float(np.median(hours))
    return out


def _spikes(
    values: np.ndarray,
    protected: np.ndarray,
    threshold: float,
    min_relative: float,
    *,
    neighbours: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flag mask, expected values and z-scores of spikes/dips (needs three days of data)."""
    flags = np.zeros(len(values), dtype=bool)
    if np.isfinite(values).sum() < 3 * DAY:
        return flags, np.full(len(values), np.nan), np.zeros(len(values))
    level = positive_median(values)
    floor = max(level, 1.0) * 1e-6
    expected = same_hour_median(values, DAY, 3) if neighbours is None else neighbours
    z = robust_z(values - expected, floor)
    flags = np.abs(z) > threshold
    if len(values) >= 2 * WEEK:
        # a weekly pattern: the same hour of the neighbouring week(s) looks alike
        weekly = same_hour_median(values, WEEK, 2)
        z_week = robust_z(values - weekly, floor)
        flags &= ~(np.abs(z_week) <= threshold)
    flags &= np.abs(values - expected) > min_relative * level
    flags &= np.isfinite(expected) & ~protected
    # In the last day a jump cannot yet be told from a level shift, and the newest hours
    # matter most to the forecast: flag only hours that have a later day to compare with.
    flags[max(0, len(values) - DAY) :] = False
    return flags, expected, z


def _fill(values: np.ndarray) -> np.ndarray:
    gaps = np.isnan(values)
    if not gaps.any():
        return values.copy()
    keep_short = np.zeros(len(values), dtype=bool)
    for start, stop in _runs(gaps):
        keep_short[start:stop] = stop - start <= SHORT_GAP and start > 0 and stop < len(values)
    filled = np.where(keep_short, interpolated(values), values)
    seasonal = same_hour_median(filled, DAY, 7)
    filled = interpolated(np.where(np.isnan(filled), seasonal, filled))
    return np.where(np.isnan(filled), 0.0, filled)  # no value at all: zeros


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
    # the same-hour median of the neighbouring days, which the next three steps all compare with
    neighbours = same_hour_median(values, DAY, 3)
    sparse = sparse_reason(values, neighbours=neighbours)
    shift = (
        None
        if sparse
        else level_shift(
            values, threshold, min_relative, LEVEL_SHIFT_MIN_HOURS, neighbours=neighbours
        )
    )
    if shift is not None:
        hours = len(values) - shift.start
        rows.append(
            (index[shift.start], "level_shift", values[shift.start], np.nan, round(shift.ratio, 3))
        )
        notes.append(
            f"level shift: the last {hours} h (since {index[shift.start]:%Y-%m-%d %H:%M}) run "
            f"×{shift.ratio:.2f} the same hours of the week before; kept, and the history "
            f"before it rescaled ×{shift.ratio:.2f} for fitting"
        )
        values[: shift.start] *= shift.ratio
        neighbours = same_hour_median(values, DAY, 3)  # of the rescaled history
    if sparse:
        notes.append(f"{sparse}: no spike detection")
        flags = np.zeros(len(values), dtype=bool)
        expected, z = np.full(len(values), np.nan), np.zeros(len(values))
    else:
        flags, expected, z = _spikes(
            values, protected, threshold, min_relative, neighbours=neighbours
        )
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
    if rows:
        anomalies = pd.DataFrame(rows, columns=list(ANOMALY_COLUMNS))
        anomalies = anomalies.sort_values("ds", ignore_index=True)
    else:  # most histories, six times per auto_forecast: a copy is 40x cheaper than building
        anomalies = _NO_ANOMALIES.copy()
    return CleanHistory(
        y=filled,
        observed=observed,
        anomalies=anomalies,
        notes=notes,
        level_shift=None if shift is None else index[shift.start],
    )


def detect_anomalies(
    y: pd.Series, *, events: pd.DataFrame | None = None, threshold: float = 6.0
) -> pd.DataFrame:
    """Flagged hours for annotations: ``ds`` (UTC), ``kind`` (outage/spike/dip), ``value``
    (observed), ``expected`` (same-hour median), ``score`` (robust z; NaN for outages)."""
    return clean_history(y, events=events, threshold=threshold).anomalies
