"""Ingest and read hourly observations of one series."""

from __future__ import annotations

import io
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from app import ingest
from app.api.body import read_limited_body
from app.api.deps import DatabaseDep, ReadAuth, SessionDep, SettingsDep, WriteAuth
from app.api.schemas import IngestOut, IsoDatetime, ObservationOut
from app.common.timebounds import check_query_bound
from app.db import Database, repository
from app.errors import IngestError, UnsupportedMediaTypeError
from app.ingest.timestamps import validate_timezone
from app.jobs.refresh import refresh_after_ingest

router = APIRouter(prefix="/v1/series", tags=["observations"])

CSV_TYPES = ("text/csv", "application/csv", "text/plain")
JSON_TYPES = ("application/json",)

INGEST_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"type": "array", "items": {"type": "object"}},
                        {
                            "type": "object",
                            "properties": {
                                "series": {"type": "string"},
                                "observations": {"type": "array", "items": {"type": "object"}},
                            },
                            "required": ["observations"],
                        },
                    ]
                },
                "example": [
                    {
                        "timestamp": "2026-11-30T14:00:00Z",
                        "requests": 3600,
                        "prompt_tokens": 1200000,
                        "completion_tokens": 300000,
                    }
                ],
            },
            "text/csv": {
                "schema": {"type": "string"},
                "example": "timestamp,requests,prompt_tokens,completion_tokens\n"
                "2026-11-30T14:00:00Z,3600,1200000,300000\n",
            },
        },
    }
}


@router.post(
    "/{name:path}/observations",
    dependencies=[WriteAuth],
    status_code=200,
    openapi_extra=INGEST_BODY_DOC,
    responses={404: {}, 413: {}, 415: {}, 422: {}},
)
async def ingest_observations(
    name: str,
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    timezone: Annotated[str | None, Query(max_length=64)] = None,
) -> IngestOut:
    """Upsert hourly observations (JSON or CSV). All rows or none are written."""
    body = await read_limited_body(request, settings.max_body_bytes)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    options = ingest.HourlyOptions(series=name, timezone=validate_timezone(timezone))
    # Parsing and the database work block, so they run in the thread pool, never on the loop.
    return await run_in_threadpool(_ingest, database, name, body, content_type, options)


def _ingest(
    database: Database, name: str, body: bytes, content_type: str, options: ingest.HourlyOptions
) -> IngestOut:
    with database.transaction() as session:
        repository.get_series(session, name=name)
        if content_type in JSON_TYPES:
            frame = ingest.read_hourly_json(body, options)
        elif content_type in CSV_TYPES:
            _check_utf8(body)
            frame = ingest.read_hourly_csv(io.BytesIO(body), options)
        else:
            raise UnsupportedMediaTypeError(
                f"unsupported content type {content_type or 'none'!r}; "
                "send application/json or text/csv"
            )
        summary = ingest.store(session, frame, create_series=False)
    summary.notes.extend(refresh_after_ingest(database, [s.series for s in summary.series]))
    return IngestOut.model_validate(summary.as_dict())


@router.get("/{name:path}/observations", dependencies=[ReadAuth], responses={404: {}, 422: {}})
def read_observations(
    name: str,
    session: SessionDep,
    start: IsoDatetime | None = None,
    end: IsoDatetime | None = None,
    limit: Annotated[int, Query(ge=1, le=100_000)] = 10_000,
) -> list[ObservationOut]:
    """Observations in [start, end), oldest first."""
    series = repository.get_series(session, name=name)
    start = check_query_bound(start, what="start")
    end = check_query_bound(end, what="end")
    frame = repository.observations_frame(session, series_id=series.id, start=start, end=end)
    frame = frame.head(limit)
    return [
        ObservationOut(
            hour=row.hour.to_pydatetime(),
            requests=row.requests,
            qps=row.requests / 3600.0,
            prompt_tokens=_none(row.prompt_tokens),
            completion_tokens=_none(row.completion_tokens),
            total_tokens=_none(row.total_tokens),
            peak_rps=_none(row.peak_rps),
        )
        for row in frame.itertuples(index=False)
    ]


def _none(value: float | None) -> float | None:
    return None if value is None or value != value else float(value)


def _check_utf8(body: bytes) -> None:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(f"body is not valid UTF-8 (byte {exc.start})") from exc
