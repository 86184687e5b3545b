"""Business calendar events (promotions, launches, holidays)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from app.api.deps import ReadAuth, SessionDep, WriteAuth
from app.api.paging import PAGE_HEADERS, Page, set_page_headers
from app.api.schemas import EventCreate, EventOut, IsoDatetime
from app.common.timebounds import check_query_bound
from app.db import repository
from app.db.models import Event

router = APIRouter(prefix="/v1/events", tags=["events"])

# Ids are int4 on every database: a larger number can name no event (and would overflow).
EventId = Annotated[int, Path(ge=1, le=2**31 - 1, description="the event's id")]


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


@router.get(
    "",
    dependencies=[ReadAuth],
    responses={200: {"headers": PAGE_HEADERS}, 404: {}, 422: {}},
)
def list_events(
    session: SessionDep,
    request: Request,
    response: Response,
    page: Page,
    series: str | None = None,
    start: IsoDatetime | None = None,
    end: IsoDatetime | None = None,
) -> list[EventOut]:
    """Events overlapping [start, end); with ``series``, its events plus global ones. One page
    at a time (``limit``, ``offset``); the total is in ``X-Total-Count``, the next page in
    ``Link``."""
    start = check_query_bound(start, what="start")
    end = check_query_bound(end, what="end")
    events = repository.list_events(
        session, series_name=series, start=start, end=end, offset=page.offset, limit=page.limit
    )
    total = repository.count_events(session, series_name=series, start=start, end=end)
    set_page_headers(response, request, page, total)
    return [event_out(e, n) for e, n in events]


@router.put("/{event_id}", dependencies=[WriteAuth], responses={404: {}, 422: {}})
def replace_event(event_id: EventId, body: EventCreate, session: SessionDep) -> EventOut:
    """Replace every field of an event (same rules as creating one); 404 for an unknown id."""
    event = repository.update_event(
        session,
        event_id=event_id,
        name=body.name,
        start=body.start,
        end=body.end,
        series_name=body.series,
        multiplier=body.multiplier,
        description=body.description,
    )
    return event_out(event, body.series)


@router.delete("/{event_id}", status_code=204, dependencies=[WriteAuth], responses={404: {}})
def delete_event(event_id: EventId, session: SessionDep) -> Response:
    repository.delete_event(session, event_id=event_id)
    return Response(status_code=204)
