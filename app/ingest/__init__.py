"""Ingestion: one code path for the CLI and the REST API.

Parsers turn a file or body into the canonical hourly frame; :func:`store` writes it inside the
caller's transaction. The caller commits once, so a file or request is all-or-nothing.
"""

from __future__ import annotations

import pandas as pd
from sqlalchemy.orm import Session

from app.ingest.hourly import HourlyOptions, read_hourly_csv, read_hourly_json
from app.ingest.limits import MAX_HOURLY_VALUE, check_frame
from app.ingest.requests import RequestLogOptions, aggregate_request_log
from app.ingest.summary import IngestSummary, SeriesCoverage, coverage
from app.ingest.writer import resolve_series_ids, upsert_observations

__all__ = [
    "HourlyOptions",
    "IngestSummary",
    "MAX_HOURLY_VALUE",
    "RequestLogOptions",
    "SeriesCoverage",
    "aggregate_request_log",
    "read_hourly_csv",
    "read_hourly_json",
    "request_log_frame",
    "store",
]


def store(
    session: Session, frame: pd.DataFrame, *, create_series: bool, notes: list[str] | None = None
) -> IngestSummary:
    """Upsert a canonical hourly frame (flush only; the caller commits).

    Every value is checked against :mod:`app.ingest.limits` first, whatever produced the frame,
    so no path can store a non-finite, negative or overflowing number.
    """
    check_frame(frame)
    names = sorted(frame["series"].unique().tolist())
    ids = resolve_series_ids(session, names, create=create_series)
    written = upsert_observations(session, frame, ids)
    session.flush()
    return IngestSummary(rows_written=written, series=coverage(frame), notes=notes or [])


def request_log_frame(hourly: pd.DataFrame, series: str) -> tuple[pd.DataFrame, list[str]]:
    """Canonical frame of an aggregated request log, with notes on partial edge hours."""
    from app.common.names import validate_series_name

    validate_series_name(series)
    frame = hourly.assign(series=series)
    notes = []
    if len(frame) >= 1:
        notes.append(
            "the first and last hour of a request log may be partial: they hold only the "
            "requests the log contains"
        )
    return frame, notes
