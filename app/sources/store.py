"""Series sources in the database. Functions take the session, flush and never commit."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import repository
from app.db.models import Series, SeriesSource, utcnow
from app.errors import NotFoundError
from app.sources.spec import SourceSpec, redact_url

MAX_ERROR_LENGTH = 2000


def set_source(session: Session, *, series: Series, spec: SourceSpec) -> SeriesSource:
    """Store ``spec`` as the series' source, replacing any previous one as a whole.

    A replaced source starts with a clean failure streak (the old errors were about the old
    settings); ``failures_total`` and ``last_success_at`` carry over.
    """
    spec.validate()
    source = session.get(SeriesSource, series.id)
    if source is None:
        source = SeriesSource(series_id=series.id, failures_total=0)
        session.add(source)
    source.url = spec.url
    source.requests_query = spec.requests_query
    source.prompt_tokens_query = spec.prompt_tokens_query
    source.completion_tokens_query = spec.completion_tokens_query
    source.bearer_token = spec.bearer_token
    source.shift = spec.shift
    source.timeout_s = float(spec.timeout_s)
    source.lookback_hours = int(spec.lookback_hours)
    source.consecutive_failures = 0
    source.last_error = None
    source.updated_at = utcnow()
    session.flush()
    return source


def get_source(session: Session, *, name: str) -> SeriesSource:
    series = repository.get_series(session, name=name)
    source = session.get(SeriesSource, series.id)
    if source is None:
        raise NotFoundError(f"series {name!r} has no source")
    return source


def delete_source(session: Session, *, name: str) -> None:
    session.delete(get_source(session, name=name))
    session.flush()


def list_sources(session: Session) -> list[tuple[str, SeriesSource]]:
    """Every source with its series name, by name."""
    rows = session.execute(
        select(Series.name, SeriesSource)
        .join(Series, Series.id == SeriesSource.series_id)
        .order_by(Series.name)
    ).all()
    return [(name, source) for name, source in rows]


def spec_of(source: SeriesSource) -> SourceSpec:
    return SourceSpec(
        url=source.url,
        requests_query=source.requests_query,
        prompt_tokens_query=source.prompt_tokens_query,
        completion_tokens_query=source.completion_tokens_query,
        bearer_token=source.bearer_token,
        shift=source.shift,
        timeout_s=source.timeout_s,
        lookback_hours=source.lookback_hours,
    )


def record_success(session: Session, *, series_id: int, at: datetime) -> None:
    source = session.get(SeriesSource, series_id)
    if source is None:  # removed while the import ran
        return
    source.last_attempt_at = at
    source.last_success_at = at
    source.last_error = None
    source.consecutive_failures = 0
    session.flush()


def record_failure(session: Session, *, series_id: int, at: datetime, error: str) -> None:
    """Count a failed import; ``error`` must already be redacted."""
    source = session.get(SeriesSource, series_id)
    if source is None:
        return
    source.last_attempt_at = at
    source.last_error = error[:MAX_ERROR_LENGTH]
    source.consecutive_failures = (source.consecutive_failures or 0) + 1
    source.failures_total = (source.failures_total or 0) + 1
    session.flush()


def describe(name: str, source: SeriesSource) -> dict[str, Any]:
    """What the CLI and the API show: credentials redacted, the token only as ``"set"``."""
    return {
        "series": name,
        "url": redact_url(source.url),
        "requests_query": source.requests_query,
        "prompt_tokens_query": source.prompt_tokens_query,
        "completion_tokens_query": source.completion_tokens_query,
        "bearer_token": "set" if source.bearer_token else None,
        "shift": source.shift,
        "timeout_s": source.timeout_s,
        "lookback_hours": source.lookback_hours,
        "last_attempt_at": source.last_attempt_at,
        "last_success_at": source.last_success_at,
        "last_error": source.last_error,
        "consecutive_failures": source.consecutive_failures,
        "failures_total": source.failures_total,
        "created_at": source.created_at,
        "updated_at": source.updated_at,
    }
