"""A GPU profile's observations: production hours of the fleet it serves, posted and read back."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from app.api.body import read_limited_body
from app.api.deps import DatabaseDep, ReadAuth, SessionDep, SettingsDep, WriteAuth
from app.api.loadtest_schemas import ObservationsStoredOut, ProfileObservationOut
from app.api.routes.loadtests import ProfileName
from app.api.schemas import IsoDatetime
from app.common.names import parse_json
from app.common.timebounds import check_query_bound
from app.db import Database, repository
from app.profiles.observations import (
    FIELDS,
    MAX_ROWS_PER_REQUEST,
    store_observations,
    stored_rows,
    validated_rows,
)
from app.profiles.slo_capacity import lab_expectations

router = APIRouter(prefix="/v1/gpu-profiles", tags=["gpu-profiles"])

OBSERVATIONS_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_ROWS_PER_REQUEST,
                    "items": {
                        "type": "object",
                        "required": list(FIELDS),
                        "additionalProperties": False,
                        "properties": {
                            "hour": {"type": "string", "format": "date-time"},
                            "replicas": {"type": "integer", "minimum": 1},
                            "requests": {"type": "number", "minimum": 0},
                            "prompt_tokens": {"type": "number", "minimum": 0},
                            "completion_tokens": {"type": "number", "minimum": 0},
                            "ttft_p95_s": {"type": "number", "exclusiveMinimum": 0},
                            "tpot_p95_s": {"type": "number", "exclusiveMinimum": 0},
                        },
                    },
                },
                "example": [
                    {
                        "hour": "2026-11-30T14:00:00Z",
                        "replicas": 3,
                        "requests": 21600,
                        "prompt_tokens": 4320000,
                        "completion_tokens": 4320000,
                        "ttft_p95_s": 0.42,
                        "tpot_p95_s": 0.028,
                    }
                ],
            }
        },
    }
}


@router.post(
    "/{name}/observations",
    dependencies=[WriteAuth],
    openapi_extra=OBSERVATIONS_BODY_DOC,
    responses={404: {}, 413: {}, 422: {"description": "a bad row (row and field named)"}},
)
async def post_observations(
    name: ProfileName, request: Request, database: DatabaseDep, settings: SettingsDep
) -> ObservationsStoredOut:
    """Store production hours of the fleet profile ``name`` serves: a JSON list of
    ``{hour, replicas, requests, prompt_tokens, completion_tokens, ttft_p95_s, tpot_p95_s}``
    (requests and tokens are the hour's totals across the replicas; p95s as served). An hour
    posted again replaces the stored one. Every row is checked first: a bad one is a 422 naming
    the row and field, and nothing of the list is stored."""
    body = await read_limited_body(request, settings.max_body_bytes)
    return await run_in_threadpool(_store, database, name, body)


def _store(database: Database, name: str, body: bytes) -> ObservationsStoredOut:
    rows = parse_json(body, what="the body")
    hours = validated_rows(rows)
    # the model's expectations first, outside the write (a first fit takes a second or two,
    # and SQLite's write lock would be held through it)
    with database.read_transaction() as session:
        profile = repository.get_gpu_profile(session, name=name)
        expected = lab_expectations(session, profile=profile, hours=hours)
    with database.transaction() as session:
        profile = repository.get_gpu_profile(session, name=name)
        written = store_observations(session, profile=profile, hours=hours, expected=expected)
    stamps = [hour.hour for hour in hours]
    return ObservationsStoredOut(
        profile=name, rows_written=written, first_hour=min(stamps), last_hour=max(stamps)
    )


@router.get("/{name}/observations", dependencies=[ReadAuth], responses={404: {}, 422: {}})
def get_observations(
    name: ProfileName,
    session: SessionDep,
    start: IsoDatetime | None = None,
    end: IsoDatetime | None = None,
    limit: Annotated[int, Query(ge=1, le=100_000)] = 10_000,
) -> list[ProfileObservationOut]:
    """The profile's production hours in [start, end), oldest first."""
    profile = repository.get_gpu_profile(session, name=name)
    rows = stored_rows(
        session,
        profile_id=profile.id,
        start=check_query_bound(start, what="start"),
        end=check_query_bound(end, what="end"),
        limit=limit,
    )
    return [ProfileObservationOut.model_validate(row) for row in rows]
