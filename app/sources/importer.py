"""Import the last complete hours of every series that has a source.

Per series: the hours after its newest stored hour (at most ``lookback_hours`` back) up to the
last complete hour are fetched from Prometheus for each metric, outside any transaction; then
one transaction stores them like ``gpucast ingest prometheus`` (requests first, so token hours
find their requests) and records the success. Re-importing an hour replaces it. A source that
fails (unreachable, rejected query, no data, unusable values) stores nothing, is recorded with
its error (credentials redacted) and skips only its own series.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app import ingest
from app.common.words import count
from app.db import Database
from app.db.models import Observation
from app.errors import AppError
from app.ingest.prometheus import RangeQuery, fetch_hourly, merge_metric
from app.ingest.writer import resolve_series_ids
from app.sources.spec import SourceSpec, plain_url, redact
from app.sources.store import list_sources, record_failure, record_success, spec_of

logger = logging.getLogger(__name__)

HOUR = timedelta(hours=1)


class SourceError(AppError):
    """One metric of a source could not be fetched; the message names the metric."""


@dataclass
class SourceOutcome:
    """What one series' import did: ``imported``, ``up to date`` or ``failed``. ``start`` and
    ``end`` bound the hours asked for, ``first_hour`` and ``last_hour`` those stored."""

    series: str
    status: str
    start: datetime | None = None
    end: datetime | None = None
    rows: int = 0
    first_hour: datetime | None = None
    last_hour: datetime | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def line(self) -> str:
        if self.failed:
            asked = f" for {_hour(self.start)} .. {_hour(self.end)}" if self.start else ""
            return f"import {self.series}: FAILED{asked}: {self.error}"
        if self.status == "up to date":
            return f"import {self.series}: up to date (the last complete hour is stored)"
        hours = f"{self.rows} hour{'s' if self.rows != 1 else ''}"
        span = f", {_hour(self.first_hour)} .. {_hour(self.last_hour)}" if self.rows else ""
        notes = "".join(f"; {note}" for note in self.notes)
        return f"import {self.series}: {hours}{span}{notes}"


def _hour(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%dT%H:%MZ}" if moment is not None else "-"


def last_complete_hour_end(now: datetime | None = None) -> datetime:
    """The exclusive end of the import window: ``now`` floored to the hour (UTC)."""
    current = (now or datetime.now(UTC)).astimezone(UTC)
    return current.replace(minute=0, second=0, microsecond=0)


def import_sources(
    database: Database, *, now: datetime | None = None, series: list[str] | None = None
) -> list[SourceOutcome]:
    """Import every source (or those of ``series``); one outcome per source, by name.

    A database that cannot be reached raises (it is no source's fault); anything a source
    does wrong is caught, recorded and reported in its outcome.
    """
    end = last_complete_hour_end(now)
    with database.transaction() as session:
        sources = [
            (name, source.series_id, spec_of(source))
            for name, source in list_sources(session)
            if series is None or name in series
        ]
    return [import_source(database, name, sid, spec, end=end) for name, sid, spec in sources]


def import_source(
    database: Database, name: str, series_id: int, spec: SourceSpec, *, end: datetime
) -> SourceOutcome:
    """Import the missing complete hours of one series before ``end`` (exclusive)."""
    attempted = datetime.now(UTC)
    start: datetime | None = None
    try:
        with database.transaction() as session:
            start = _window_start(session, series_id, end=end, lookback_hours=spec.lookback_hours)
            if start >= end:
                record_success(session, series_id=series_id, at=attempted)
                return SourceOutcome(name, "up to date")
        fetched, notes = _fetch(spec, start=start, end=end)
        with database.transaction() as session:
            rows = _store(session, name, series_id, fetched, notes)
            record_success(session, series_id=series_id, at=attempted)
        hours = fetched[0][1].index
    except OperationalError:
        raise
    except Exception as exc:  # a failing source skips only its own series
        error = redact(f"{exc}" or type(exc).__name__, spec)
        logger.warning("source of series %r failed: %s", name, error)
        with database.transaction() as session:
            record_failure(session, series_id=series_id, at=attempted, error=error)
        return SourceOutcome(name, "failed", start=start, end=end, error=error)
    return SourceOutcome(
        name,
        "imported",
        start=start,
        end=end,
        rows=rows,
        first_hour=hours.min().to_pydatetime() if rows else None,
        last_hour=hours.max().to_pydatetime() if rows else None,
        notes=notes,
    )


def _window_start(
    session: Session, series_id: int, *, end: datetime, lookback_hours: int
) -> datetime:
    newest = session.scalar(
        select(func.max(Observation.hour)).where(Observation.series_id == series_id)
    )
    earliest = end - lookback_hours * HOUR
    if newest is None:
        return earliest
    newest = newest if newest.tzinfo else newest.replace(tzinfo=UTC)
    return max(newest + HOUR, earliest)


def _fetch(
    spec: SourceSpec, *, start: datetime, end: datetime
) -> tuple[list[tuple[str, pd.Series]], list[str]]:
    """Every metric's hourly values; credentials go on the client, never into the URL shown."""
    url = plain_url(spec.url)
    parsed = httpx.URL(spec.url)
    auth = httpx.BasicAuth(parsed.username, parsed.password) if parsed.userinfo else None
    headers = {"Authorization": f"Bearer {spec.bearer_token}"} if spec.bearer_token else None
    fetched: list[tuple[str, pd.Series]] = []
    notes: list[str] = []
    for metric, query in spec.queries():
        request = RangeQuery(
            url=url, query=query, start=start, end=end, shift=spec.shift, timeout_s=spec.timeout_s
        )
        try:
            values, warnings = fetch_hourly(request, auth=auth, headers=headers)
        except AppError as exc:  # every unusable answer is one (prometheus_response)
            raise SourceError(f"{metric} query: {exc}") from exc
        fetched.append((metric, values))
        notes += warnings
    return fetched, list(dict.fromkeys(notes))


def _store(
    session: Session,
    name: str,
    series_id: int,
    fetched: list[tuple[str, pd.Series]],
    notes: list[str],
) -> int:
    """Merge and upsert each metric in order inside the caller's transaction; hours written."""
    # Lock the series row like every ingest, and never re-create a series deleted meanwhile.
    resolve_series_ids(session, [name], create=False)
    rows = 0
    for metric, values in fetched:
        if metric != "requests":
            values = _hours_with_requests(session, series_id, values, metric, notes)
            if values.empty:
                continue
        frame, _ = merge_metric(session, series=name, metric=metric, values=values)
        summary = ingest.store(session, frame, create_series=False)
        if metric == "requests":
            rows = summary.rows_written
    return rows


def _hours_with_requests(
    session: Session, series_id: int, values: pd.Series, metric: str, notes: list[str]
) -> pd.Series:
    """Token values of hours that have requests. The loop cannot import requests for the
    others first, and rejecting them would block the series until they leave the window."""
    if values.empty:
        return values
    stored = session.scalars(
        select(Observation.hour).where(
            Observation.series_id == series_id,
            Observation.hour >= values.index.min().to_pydatetime(),
            Observation.hour <= values.index.max().to_pydatetime(),
        )
    ).all()
    hours = pd.DatetimeIndex(pd.to_datetime(list(stored), utc=True))
    kept = values[values.index.isin(hours)]
    if len(kept) < len(values):
        left = count(len(values) - len(kept), f"{metric} hour")
        notes.append(f"{left} without requests left out")
    return kept
