"""Series: create, list, read, delete."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.api.deps import ReadAuth, SessionDep, WriteAuth
from app.api.paging import PAGE_HEADERS, Page, set_page_headers
from app.api.schemas import SeriesCreate, SeriesOut
from app.db import repository
from app.db.models import Series

collection = APIRouter(prefix="/v1/series", tags=["series"])
item = APIRouter(prefix="/v1/series", tags=["series"])


def series_out(session: SessionDep, series: Series) -> SeriesOut:
    stats = repository.series_stats(session, series_id=series.id)
    return SeriesOut(name=series.name, labels=series.labels, created_at=series.created_at, **stats)


@collection.post("", status_code=201, dependencies=[WriteAuth], responses={409: {}, 422: {}})
def create_series(body: SeriesCreate, session: SessionDep) -> SeriesOut:
    """Register a series (an inference service)."""
    series = repository.create_series(session, name=body.name, labels=body.labels)
    return series_out(session, series)


@collection.get("", dependencies=[ReadAuth], responses={200: {"headers": PAGE_HEADERS}, 422: {}})
def list_series(
    session: SessionDep, request: Request, response: Response, page: Page
) -> list[SeriesOut]:
    """Series by name, one page at a time (``limit``, ``offset``); the total is in
    ``X-Total-Count`` and the next page in ``Link``."""
    series = repository.list_series(session, offset=page.offset, limit=page.limit)
    stats = repository.series_stats_many(session, series_ids=[s.id for s in series])
    set_page_headers(response, request, page, repository.count_series(session))
    return [
        SeriesOut(name=s.name, labels=s.labels, created_at=s.created_at, **stats[s.id])
        for s in series
    ]


@item.get("/{name:path}", dependencies=[ReadAuth], responses={404: {}})
def get_series(name: str, session: SessionDep) -> SeriesOut:
    return series_out(session, repository.get_series(session, name=name))


@item.delete("/{name:path}", status_code=204, dependencies=[WriteAuth], responses={404: {}})
def delete_series(name: str, session: SessionDep) -> Response:
    """Delete a series with all its observations."""
    repository.delete_series(session, name=name)
    return Response(status_code=204)
