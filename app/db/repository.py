"""Repository functions: take the session and keyword arguments, flush but never commit."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.common.names import echo, validate_series_name
from app.db.models import Event, GpuProfile, Observation, Series
from app.errors import ConflictError, NotFoundError


def create_series(session: Session, *, name: str, labels: dict[str, Any] | None = None) -> Series:
    validate_series_name(name)
    if session.scalar(select(Series.id).where(Series.name == name)) is not None:
        raise ConflictError(f"series {name!r} already exists")
    series = Series(name=name, labels=labels or {})
    session.add(series)
    try:
        session.flush()
    except IntegrityError as exc:
        raise ConflictError(f"series {name!r} already exists") from exc
    return series


def get_series(session: Session, *, name: str) -> Series:
    series = session.scalar(select(Series).where(Series.name == name))
    if series is None:
        raise NotFoundError(f"series {echo(name)} not found")
    return series


def list_series(session: Session, *, offset: int = 0, limit: int | None = None) -> list[Series]:
    """Series by name; ``offset``/``limit`` select one page of them."""
    query = select(Series).order_by(Series.name).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def count_series(session: Session) -> int:
    return int(session.scalar(select(func.count()).select_from(Series)) or 0)


def series_stats_many(session: Session, *, series_ids: list[int]) -> dict[int, dict[str, Any]]:
    """``series_stats`` of several series in one grouped query (a series without rows too)."""
    stats = {sid: {"observations": 0, "first_hour": None, "last_hour": None} for sid in series_ids}
    if not series_ids:
        return stats
    rows = session.execute(
        select(
            Observation.series_id,
            func.count(),
            func.min(Observation.hour),
            func.max(Observation.hour),
        )
        .where(Observation.series_id.in_(series_ids))
        .group_by(Observation.series_id)
    )
    for sid, count, first, last in rows:
        stats[sid] = {"observations": count, "first_hour": first, "last_hour": last}
    return stats


def delete_series(session: Session, *, name: str) -> None:
    """Delete the series and its observations. The series row is locked first, as every
    ingest locks it (``app.ingest.writer.resolve_series_ids``): a delete waits for an ingest
    in progress to commit and then deletes its rows too, and an ingest that starts later finds
    the series gone; observations, which have no foreign key, are never left orphaned."""
    series = session.scalar(select(Series).where(Series.name == name).with_for_update())
    if series is None:
        raise NotFoundError(f"series {echo(name)} not found")
    session.execute(delete(Observation).where(Observation.series_id == series.id))
    session.delete(series)
    session.flush()


def series_stats(session: Session, *, series_id: int) -> dict[str, Any]:
    from sqlalchemy import func

    row = session.execute(
        select(func.count(), func.min(Observation.hour), func.max(Observation.hour)).where(
            Observation.series_id == series_id
        )
    ).one()
    return {"observations": row[0], "first_hour": row[1], "last_hour": row[2]}


def observations_frame(
    session: Session,
    *,
    series_id: int,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pd.DataFrame:
    """Observations of one series in [start, end), sorted by hour, as a frame."""
    query = select(
        Observation.hour,
        Observation.requests,
        Observation.prompt_tokens,
        Observation.completion_tokens,
        Observation.total_tokens,
        Observation.peak_rps,
    ).where(Observation.series_id == series_id)
    if start is not None:
        query = query.where(Observation.hour >= start)
    if end is not None:
        query = query.where(Observation.hour < end)
    rows = session.execute(query.order_by(Observation.hour)).all()
    columns = ["hour", "requests", "prompt_tokens", "completion_tokens", "total_tokens", "peak_rps"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["hour"] = pd.to_datetime(frame["hour"], utc=True)
    return frame


def recent_observations_frame(session: Session, *, series_id: int, span: timedelta) -> pd.DataFrame:
    """Observations of one series from ``span`` before its newest stored hour on (that hour
    included), as :func:`observations_frame`; empty when the series has no hours."""
    newest = session.scalar(
        select(func.max(Observation.hour)).where(Observation.series_id == series_id)
    )
    if newest is None:
        return observations_frame(session, series_id=series_id)
    return observations_frame(session, series_id=series_id, start=newest - span)


def create_event(
    session: Session,
    *,
    name: str,
    start: datetime,
    end: datetime,
    series_name: str | None = None,
    multiplier: float | None = None,
    description: str | None = None,
) -> Event:
    series_id = get_series(session, name=series_name).id if series_name else None
    event = Event(
        name=name,
        start=start,
        end=end,
        series_id=series_id,
        multiplier=multiplier,
        description=description,
    )
    session.add(event)
    session.flush()
    return event


def get_event(session: Session, *, event_id: int) -> Event:
    event = session.get(Event, event_id)
    if event is None:
        raise NotFoundError(f"event {event_id} not found")
    return event


def update_event(
    session: Session,
    *,
    event_id: int,
    name: str,
    start: datetime,
    end: datetime,
    series_name: str | None = None,
    multiplier: float | None = None,
    description: str | None = None,
) -> Event:
    """Replace every field of an event (a PUT): an unknown id or series is a 404."""
    event = get_event(session, event_id=event_id)
    event.series_id = get_series(session, name=series_name).id if series_name else None
    event.name, event.start, event.end = name, start, end
    event.multiplier, event.description = multiplier, description
    session.flush()
    return event


def delete_event(session: Session, *, event_id: int) -> None:
    session.delete(get_event(session, event_id=event_id))
    session.flush()


def list_events(
    session: Session,
    *,
    series_name: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> list[tuple[Event, str | None]]:
    """Events overlapping [start, end); for a series, its own plus the global ones;
    ``offset``/``limit`` select one page of them."""
    query = select(Event, Series.name).outerjoin(Series, Event.series_id == Series.id)
    if series_name is not None:
        series = get_series(session, name=series_name)
        query = query.where((Event.series_id == series.id) | (Event.series_id.is_(None)))
    if start is not None:
        query = query.where(Event.end >= start)
    if end is not None:
        query = query.where(Event.start < end)
    query = query.order_by(Event.start, Event.id).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    return [(e, n) for e, n in session.execute(query).all()]


def count_events(
    session: Session,
    *,
    series_name: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> int:
    """How many events ``list_events`` selects without a page."""
    query = select(func.count()).select_from(Event)
    if series_name is not None:
        series = get_series(session, name=series_name)
        query = query.where((Event.series_id == series.id) | (Event.series_id.is_(None)))
    if start is not None:
        query = query.where(Event.end >= start)
    if end is not None:
        query = query.where(Event.start < end)
    return int(session.scalar(query) or 0)


def create_gpu_profile(session: Session, **fields: Any) -> GpuProfile:
    if session.scalar(select(GpuProfile.id).where(GpuProfile.name == fields["name"])):
        raise ConflictError(f"GPU profile {fields['name']!r} already exists")
    profile = GpuProfile(**fields)
    session.add(profile)
    session.flush()
    return profile


def get_gpu_profile(session: Session, *, name: str) -> GpuProfile:
    profile = session.scalar(select(GpuProfile).where(GpuProfile.name == name))
    if profile is None:
        raise NotFoundError(f"GPU profile {echo(name)} not found")
    return profile


def list_gpu_profiles(session: Session) -> list[GpuProfile]:
    return list(session.scalars(select(GpuProfile).order_by(GpuProfile.name)))


def update_gpu_profile(session: Session, *, name: str, **fields: Any) -> GpuProfile:
    profile = get_gpu_profile(session, name=name)
    for key, value in fields.items():
        setattr(profile, key, value)
    session.flush()
    return profile


def delete_gpu_profile(session: Session, *, name: str) -> None:
    session.delete(get_gpu_profile(session, name=name))
    session.flush()
