"""Grafana JSON datasource (simpod-json-datasource): the protocol routes under ``/grafana``.

Errors follow the REST API: an unknown target, payload value or variable query is a 400 whose
detail names the valid ones; an unknown series is a 404 naming it; a malformed body is a 422.
A series that exists but has no data (no forecast yet, nothing in range) answers an empty result.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import Response
from pydantic import TypeAdapter

from app import grafana
from app.api.deps import DatabaseDep, ReadAuth, SessionDep
from app.api.heavy import run_heavy
from app.api.plan_query import single_flight
from app.common.cancel import checkpoint
from app.db import Database, repository

router = APIRouter(prefix="/grafana", tags=["grafana"], dependencies=[ReadAuth])

ERRORS: dict[int | str, dict[str, Any]] = {400: {}, 404: {}, 422: {}}


@router.get("/")
@router.get("", include_in_schema=False)
def datasource_health() -> dict[str, Any]:
    """'Test connection' in Grafana: any 200 means the datasource is working."""
    return {"status": "ok", "service": "gpucast", "targets": list(grafana.TARGETS)}


@router.post("/metrics", responses=ERRORS)
def list_metrics(
    session: SessionDep, body: Annotated[grafana.MetricsRequest | None, Body()] = None
) -> list[dict[str, Any]]:
    """Every target with its payload editors; drop-down options list what exists."""
    payload = body.payload if body is not None else {}
    return grafana.metric_definitions(session, payload)


@router.post("/metric-payload-options", responses=ERRORS)
def metric_payload_options(
    session: SessionDep, body: grafana.PayloadOptionsRequest
) -> list[dict[str, str]]:
    """Options of one payload drop-down given the payload chosen so far."""
    options = grafana.payload_options(
        session, metric=body.metric, name=body.name, payload=body.payload
    )
    return options or []


@router.post("/query", responses=ERRORS | {429: {}}, response_model=list[dict[str, Any]])
async def query(request: Request, database: DatabaseDep, body: grafana.QueryRequest) -> Response:
    """Data for every visible target: time series ``[value, epoch_ms]`` or tables.

    A dashboard's range ends at ``now``, so each refresh posts a different body. Each target's
    answer is computed once over a window that does not move with the milliseconds and cut to
    the exact range (:mod:`app.grafana.ranges`); the computed answer is kept as the response
    cache keeps answers (``GPUCAST_READ_CACHE_TTL_S``, cleared by every write through this
    server) and concurrent queries of one target share one computation. A body posted again
    as it was is served whole from the cache. ``plan_backtest`` may run a plan replay (seconds
    per replayed night) when the stored one is not current; its result is stored, so the next
    refresh reads it."""
    key = ("grafana-query", hashlib.sha256(await request.body()).digest())
    answer = await single_flight(request, key, lambda: _answer(request, database, body))
    return Response(answer, media_type="application/json")


async def _answer(request: Request, database: Database, body: grafana.QueryRequest) -> bytes:
    start, end = grafana.resolve_range(body.range)
    chosen = grafana.series_filters([*body.filters, *body.adhocFilters])
    targets = [
        (grafana.get_target(t.target), t.payload) for t in body.targets if not t.hide and t.target
    ]
    out: list[dict[str, Any]] = []
    for target, payload in targets:
        checkpoint()  # stop between targets once every reader of this query has gone
        window = grafana.window(start, end, reads_range=target.reads_range)
        key = ("grafana-target", target.name, _canonical(payload), chosen, window)
        compute = partial(
            run_heavy, request, _target_items, request, database, target, payload, chosen, window
        )
        items: list[dict[str, Any]] = await single_flight(request, key, compute)
        max_points = body.maxDataPoints if target.downsampled else None
        out.extend(grafana.cut(items, start, end, max_points=max_points))
    return _ANSWER.dump_json(out)


def _target_items(
    request: Request,
    database: Database,
    target: grafana.Target,
    payload: dict[str, Any],
    chosen: grafana.SeriesFilter,
    window: tuple[datetime, datetime],
) -> list[dict[str, Any]]:
    """One target's answer over its window, in a read transaction of its own."""
    checkpoint()
    with database.read_transaction() as session:
        ctx = grafana.QueryContext(
            session=session,
            start=window[0],
            end=window[1],
            series_filter=chosen,
            plan_cache=getattr(request.app.state, "plan_cache", None),
            database=database,
        )
        return grafana.compact(target.handler(ctx, payload))


def _canonical(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)


_ANSWER: TypeAdapter[list[dict[str, Any]]] = TypeAdapter(list[dict[str, Any]])


@router.post("/variable", responses=ERRORS)
def variable(session: SessionDep, body: grafana.VariableRequest) -> list[dict[str, str]]:
    """Template-variable values: ``series``, ``profiles``, ``metrics`` and more."""
    return grafana.variable_values(session, body.query())


@router.post("/tag-keys")
def tag_keys(body: Annotated[dict[str, Any] | None, Body()] = None) -> list[dict[str, str]]:
    """Ad-hoc filter keys: only ``series``."""
    return [{"type": "string", "text": "series"}]


@router.post("/tag-values", responses=ERRORS)
def tag_values(session: SessionDep, body: grafana.TagValuesRequest) -> list[dict[str, str]]:
    if body.key != "series":
        raise grafana.GrafanaInputError(f"unknown tag key {body.key!r}; the only key is 'series'")
    return [{"text": s.name} for s in repository.list_series(session)]
