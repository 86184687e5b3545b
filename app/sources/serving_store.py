"""Deployments' serving sources in the database. Functions take the session, flush and never
commit."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.common.names import echo
from app.db import repository
from app.db.models import Series, utcnow
from app.db.serving_models import ServingSource
from app.errors import NotFoundError
from app.profiles.deployments import get_deployment
from app.sources.serving_spec import NAMES, ServingSpec
from app.sources.spec import redact_url
from app.sources.store import MAX_ERROR_LENGTH

SETTINGS = (
    "url",
    "engine",
    *NAMES,
    "selector",
    "kube_deployment",
    "replicas_query",
    "bearer_token",
    "timeout_s",
    "lookback_hours",
)


def set_serving_source(session: Session, *, series_name: str, spec: ServingSpec) -> ServingSource:
    """Store ``spec`` (resolved and validated) as the serving source of the deployed series,
    replacing any previous one whole; 404 when the series has no deployment."""
    spec = spec.validate()
    get_deployment(session, series_name=series_name)
    series = repository.get_series(session, name=series_name)
    source = session.get(ServingSource, series.id)
    if source is None:
        source = ServingSource(series_id=series.id, failures_total=0, hours_skipped_total=0)
        session.add(source)
    for name in SETTINGS:
        setattr(source, name, getattr(spec, name))
    source.consecutive_failures = 0
    source.last_error = None
    source.updated_at = utcnow()
    session.flush()
    return source


def get_serving_source(session: Session, *, series_name: str) -> ServingSource:
    series = repository.get_series(session, name=series_name)
    source = session.get(ServingSource, series.id)
    if source is None:
        raise NotFoundError(f"series {echo(series_name)} has no serving source")
    return source


def delete_serving_source(session: Session, *, series_name: str) -> None:
    session.delete(get_serving_source(session, series_name=series_name))
    session.flush()


def list_serving_sources(session: Session) -> list[tuple[str, ServingSource]]:
    """Every serving source with its series name, by name."""
    rows = session.execute(
        select(Series.name, ServingSource)
        .join(Series, Series.id == ServingSource.series_id)
        .order_by(Series.name)
    ).all()
    return [(name, source) for name, source in rows]


def serving_spec_of(source: ServingSource) -> ServingSpec:
    return ServingSpec(**{name: getattr(source, name) for name in SETTINGS})


def record_attempt(
    session: Session, *, series_id: int, at: datetime, error: str | None, skipped: int = 0
) -> None:
    """Record an import: a success (``error`` None) or a failure (``error`` redacted)."""
    source = session.get(ServingSource, series_id)
    if source is None:  # removed while the import ran
        return
    source.last_attempt_at = at
    source.hours_skipped_total = (source.hours_skipped_total or 0) + skipped
    if error is None:
        source.last_success_at = at
        source.last_error = None
        source.consecutive_failures = 0
    else:
        source.last_error = error[:MAX_ERROR_LENGTH]
        source.consecutive_failures = (source.consecutive_failures or 0) + 1
        source.failures_total = (source.failures_total or 0) + 1
    session.flush()


def describe_serving(name: str, source: ServingSource) -> dict[str, Any]:
    """What the CLI and the API show: the URL's password redacted, the token only ``"set"``,
    and the PromQL each hour is measured with."""
    shown: dict[str, Any] = {"series": name}
    shown |= {key: getattr(source, key) for key in SETTINGS}
    shown["url"] = redact_url(source.url)
    shown["bearer_token"] = "set" if source.bearer_token else None
    shown["queries"] = dict(serving_spec_of(source).queries())
    for key in (
        "last_attempt_at",
        "last_success_at",
        "last_error",
        "consecutive_failures",
        "failures_total",
        "hours_skipped_total",
        "created_at",
        "updated_at",
    ):
        shown[key] = getattr(source, key)
    return shown
