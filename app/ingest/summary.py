"""What an ingest did: rows written, hours covered and gaps found, per series."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from app.common.words import count


@dataclass(frozen=True)
class SeriesCoverage:
    series: str
    rows: int
    first_hour: datetime
    last_hour: datetime
    missing_hours: int
    gaps: list[tuple[datetime, datetime]]

    def as_dict(self) -> dict[str, object]:
        return {
            "series": self.series,
            "rows": self.rows,
            "first_hour": self.first_hour.isoformat(),
            "last_hour": self.last_hour.isoformat(),
            "missing_hours": self.missing_hours,
            "gaps": [{"start": a.isoformat(), "end": b.isoformat()} for a, b in self.gaps],
        }


@dataclass(frozen=True)
class IngestSummary:
    rows_written: int
    series: list[SeriesCoverage]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "rows_written": self.rows_written,
            "series": [s.as_dict() for s in self.series],
            "notes": list(self.notes),
        }

    def lines(self) -> list[str]:
        """Human-readable summary, one line per series plus notes."""
        rows = count(self.rows_written, "hourly row")
        out = [f"wrote {rows} for {len(self.series)} series"]
        for s in self.series:
            gap_text = (
                f"{count(s.missing_hours, 'missing hour')} in {count(len(s.gaps), 'gap')}"
                if s.gaps
                else "no gaps"
            )
            out.append(
                f"  {s.series}: {count(s.rows, 'hour')} {s.first_hour:%Y-%m-%d %H:%M}Z .. "
                f"{s.last_hour:%Y-%m-%d %H:%M}Z, {gap_text}"
            )
        out.extend(f"  note: {note}" for note in self.notes)
        return out


MAX_GAPS_LISTED = 20


def coverage(frame: pd.DataFrame) -> list[SeriesCoverage]:
    """Coverage per series of a canonical frame (columns ``series``, ``hour``), vectorised."""
    ordered = frame.loc[:, ["series", "hour"]].sort_values(["series", "hour"], kind="stable")
    series = ordered["series"].to_numpy()
    hours = ordered["hour"].to_numpy(dtype="datetime64[ns]").astype("int64") // 3_600_000_000_000
    same_series = np.r_[False, series[1:] == series[:-1]]
    step = np.r_[1, np.diff(hours)]
    gap_at = np.flatnonzero(same_series & (step > 1))
    stats = ordered.groupby("series", sort=True)["hour"].agg(["size", "min", "max"])
    gaps_by_series: dict[str, list[int]] = {}
    for index in gap_at:
        gaps_by_series.setdefault(str(series[index]), []).append(int(index))
    result = []
    for name, row in stats.iterrows():
        gap_rows = gaps_by_series.get(str(name), [])
        result.append(
            SeriesCoverage(
                series=str(name),
                rows=int(row["size"]),
                first_hour=row["min"].to_pydatetime(),
                last_hour=row["max"].to_pydatetime(),
                missing_hours=int(sum(step[i] - 1 for i in gap_rows)),
                gaps=[
                    (_hour(hours[i - 1] + 1), _hour(hours[i] - 1))
                    for i in gap_rows[:MAX_GAPS_LISTED]
                ],
            )
        )
    return result


def _hour(hours_since_epoch: int) -> datetime:
    return datetime.fromtimestamp(int(hours_since_epoch) * 3600, tz=UTC)
