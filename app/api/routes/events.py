"""Business calendar events (promotions, launches, holidays)."""

from __future__ import annotations

from fastapi import APIRouter

from app import repository
from app.api.deps import ReadAuth, SessionDep, WriteAuth
from app.api.schemas import EventCreate, EventOut, IsoDatetime
from app.db.models import Event

router = APIRouter(prefix="/v1/events", tags=["events"])


def event_out(event: Event, series_name: str | None) -> EventOut:
    return EventOut(
        id=event.id,
        name=event.name,
        start=event.start,
        end=event.end,
        series=series_name,
        multiplier=event.multiplier,
        description=event.description,
    )


@router.post("", status_code=201, dependencies=[WriteAuth], responses={404: {}, 422: {}})
def create_event(body: EventCreate, session: SessionDep) -> EventOut:
    event = repository.create_event(
        session,
        name=body.name,
        start=body.start,
        end=body.end,
        series_name=body.series,
        multiplier=body.multiplier,
        description=body.description,
    )
    return event_out(event, body.series)


@router.get("", dependencies=[ReadAuth], responses={404: {}})
def list_events(
    session: SessionDep,
    series: str | None = None,
    start: IsoDatetime | None = None,
    end: IsoDatetime | None = None,
) -> list[EventOut]:
    """Events overlapping [start, end); with ``series``, its events plus global ones."""
    return [
        event_out(e, n)
        for e, n in repository.list_events(session, series_name=series, start=start, end=end)
    ]
