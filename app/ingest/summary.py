"""What an ingest did: rows written, hours covered and gaps found, per series."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import pandas as pd


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
        out = [f"wrote {self.rows_written} hourly rows for {len(self.series)} series"]
        for s in self.series:
            gap_text = (
                f"{s.missing_hours} missing hours in {len(s.gaps)} gaps" if s.gaps else "no gaps"
            )
            out.append(
                f"  {s.series}: {s.rows} hours {s.first_hour:%Y-%m-%d %H:%M}Z .. "
                f"{s.last_hour:%Y-%m-%d %H:%M}Z, {gap_text}"
            )
        out.extend(f"  note: {note}" for note in self.notes)
        return out


MAX_GAPS_LISTED = 20


def coverage(frame: pd.DataFrame) -> list[SeriesCoverage]:
    """Coverage per series of a canonical frame (columns ``series``, ``hour``)."""
    result = []
    for name, group in frame.groupby("series", sort=True):
        hours = group["hour"].sort_values().reset_index(drop=True)
        step = hours.diff().dt.total_seconds().div(3600).fillna(1).astype("int64")
        gap_starts = step[step > 1]
        gaps = [
            (
                (hours[i - 1] + pd.Timedelta(hours=1)).to_pydatetime(),
                (hours[i] - pd.Timedelta(hours=1)).to_pydatetime(),
            )
            for i in gap_starts.index[:MAX_GAPS_LISTED]
        ]
        result.append(
            SeriesCoverage(
                series=str(name),
                rows=len(hours),
                first_hour=hours.iloc[0].to_pydatetime(),
                last_hour=hours.iloc[-1].to_pydatetime(),
                missing_hours=int((gap_starts - 1).sum()),
                gaps=gaps,
            )
        )
    return result
