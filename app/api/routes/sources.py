"""The Prometheus source of one series: set (PUT), read (GET, credentials redacted), remove."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app import sources
from app.api.deps import ReadAuth, SessionDep, WriteAuth
from app.api.routes.loadtests import CREATE_RACE
from app.api.schemas import SourceIn, SourceOut
from app.db import repository

router = APIRouter(prefix="/v1/series", tags=["sources"])


@router.put(
    "/{name:path}/source",
    dependencies=[WriteAuth],
    responses={404: {}, 409: {"description": CREATE_RACE}, 422: {}},
)
def put_source(name: str, body: SourceIn, session: SessionDep) -> SourceOut:
    """Set where the hourly loop imports this series from, replacing any previous source.
    The bearer token is write-only: send it with every PUT."""
    series = repository.get_series(session, name=name)
    source = sources.set_source(session, series=series, spec=body.spec())
    return SourceOut.model_validate(sources.describe(name, source))


@router.get("/{name:path}/source", dependencies=[ReadAuth], responses={404: {}})
def get_source(name: str, session: SessionDep) -> SourceOut:
    """The series' source and its import state; the URL's password and the token redacted."""
    return SourceOut.model_validate(sources.describe(name, sources.get_source(session, name=name)))


@router.delete(
    "/{name:path}/source", status_code=204, dependencies=[WriteAuth], responses={404: {}}
)
def delete_source(name: str, session: SessionDep) -> Response:
    """Stop importing this series (its stored hours stay)."""
    sources.delete_source(session, name=name)
    return Response(status_code=204)
