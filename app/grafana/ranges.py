"""One target's answer computed once, then cut to each query's exact range.

A dashboard whose range ends at ``now`` posts a different range, to the millisecond, on every
refresh and for every viewer. Nothing a target serves changes within an hour, though: stored
observations, forecasts and plans are hourly. So a target is computed over a **window** that
does not move with the milliseconds — for the targets that read data in proportion to the range
(``history``, ``events``) the range widened to whole hours, for every other target (a forecast,
a plan, a table) everything it has — and that answer is cut to the exact range:

- a time series keeps its points with ``from <= time <= to``;
- an annotation table keeps its rows overlapping the range (``Time <= to``, ``TimeEnd >=
  from``); any other table is kept whole;
- a downsampled target (``history``) is averaged into at most ``maxDataPoints`` points after
  the cut, and says so in a notice.

Cutting the window's answer gives exactly the answer computed on the range itself: every target
filters with these same inclusive bounds. Notices travel in each item's ``meta.notices``, where
Grafana shows them in the panel header (``toDataFrame`` keeps ``meta``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

#: The window of a target whose answer does not depend on the range.
EVERYTHING = (datetime(1970, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
HOUR = timedelta(hours=1)


def window(start: datetime, end: datetime, *, reads_range: bool) -> tuple[datetime, datetime]:
    """The range a target is computed on: [from, to] widened to whole hours when the target
    reads data by range, else :data:`EVERYTHING`."""
    if not reads_range:
        return EVERYTHING
    floor = start.replace(minute=0, second=0, microsecond=0)
    ceil = end.replace(minute=0, second=0, microsecond=0)
    return floor, ceil if ceil == end else ceil + HOUR


def epoch_ms_bounds(start: datetime, end: datetime) -> tuple[int, int]:
    """[from, to] in whole epoch milliseconds that hold the same whole-millisecond times."""
    start_ms = math.ceil(start.timestamp() * 1000 - 1e-6)
    end_ms = math.floor(end.timestamp() * 1000 + 1e-6)
    return start_ms, end_ms


@dataclass(frozen=True)
class Points:
    """A time series' points, compact while cached: epoch ms and values (NaN: null)."""

    times_ms: np.ndarray
    values: np.ndarray

    @classmethod
    def of(cls, datapoints: list[list[Any]]) -> Points:
        times = np.array([p[1] for p in datapoints], dtype=np.int64)
        values = np.array([np.nan if p[0] is None else p[0] for p in datapoints], dtype=float)
        return cls(times, values)

    def as_datapoints(self) -> list[list[Any]]:
        values = [None if math.isnan(v) else v for v in self.values.tolist()]
        return [[v, t] for v, t in zip(values, self.times_ms.tolist(), strict=True)]


def compact(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` as they are cached: each time series' points as :class:`Points`."""
    return [
        {**item, "datapoints": Points.of(item["datapoints"])} if "datapoints" in item else item
        for item in items
    ]


def cut(
    items: list[dict[str, Any]],
    start: datetime,
    end: datetime,
    *,
    max_points: int | None = None,
) -> list[dict[str, Any]]:
    """``items`` (one target's :func:`compact` answer over its window) as the answer on
    [start, end]; with ``max_points``, each time series averaged down to at most that many
    points."""
    start_ms, end_ms = epoch_ms_bounds(start, end)
    out = []
    for item in items:
        if "datapoints" in item:
            out.append(_cut_series(item, start_ms, end_ms, max_points))
        elif _is_annotation(item):
            rows = [r for r in item["rows"] if r[0] <= end_ms and r[1] >= start_ms]
            out.append({**item, "rows": rows})
        else:
            out.append(item)
    return out


def _is_annotation(item: dict[str, Any]) -> bool:
    columns = [c.get("text") for c in item.get("columns", ())[:2]]
    return item.get("type") == "table" and columns == ["Time", "TimeEnd"]


def _cut_series(
    item: dict[str, Any], start_ms: int, end_ms: int, max_points: int | None
) -> dict[str, Any]:
    points: Points = item["datapoints"]
    first = int(np.searchsorted(points.times_ms, start_ms, side="left"))
    last = int(np.searchsorted(points.times_ms, end_ms, side="right"))
    kept = Points(points.times_ms[first:last], points.values[first:last])
    count = len(kept.times_ms)
    if not max_points or count <= max_points:
        return {**item, "datapoints": kept.as_datapoints()}
    size = math.ceil(count / max_points)
    averaged = downsample(kept, size)
    notice = {
        "severity": "info",
        "text": f"{count:,} hourly points averaged in buckets of {size} h "
        f"({len(averaged.times_ms):,} points) to fit the panel's {max_points:,} data points",
    }
    meta = item.get("meta", {})
    return {
        **item,
        "datapoints": averaged.as_datapoints(),
        "meta": {**meta, "notices": [*meta.get("notices", []), notice]},
    }


def downsample(points: Points, size: int) -> Points:
    """Means of consecutive buckets of ``size`` points (nulls skipped; a bucket of nulls is
    null), each stamped at its first point's time."""
    stamps = points.times_ms[::size]
    padded = np.full(len(stamps) * size, np.nan)
    padded[: len(points.values)] = points.values
    buckets = padded.reshape(len(stamps), size)
    counts = np.sum(~np.isnan(buckets), axis=1)
    sums = np.nansum(buckets, axis=1)
    means = np.divide(sums, counts, out=np.full(len(stamps), np.nan), where=counts > 0)
    return Points(stamps, means)


def with_notice(items: list[dict[str, Any]], text: str, severity: str = "info") -> None:
    """Add a notice to every item (Grafana shows each once in the panel header)."""
    for item in items:
        meta = item.setdefault("meta", {})
        meta["notices"] = [*meta.get("notices", []), {"severity": severity, "text": text}]
