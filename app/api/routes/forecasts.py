"""Forecasts of one series: run now, read the latest, list runs, accuracy; its GPU plan."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool

import capacity
from app import accuracy, forecast_store, planning, repository
from app.api.deps import DatabaseDep, ReadAuth, SessionDep, WriteAuth
from app.api.schemas import PlanOut
from app.db import Database
from app.db.models import ForecastRun
from app.errors import InputError
from app.jobs import ForecastOptions
from app.jobs.nightly import build_items
from app.jobs.work import ItemResult, run_item

router = APIRouter(prefix="/v1/series", tags=["forecasts"])

MetricParam = Annotated[Literal["requests", "tokens"], Query(description="forecast metric")]
BandParam = Annotated[Literal["yhat", "hi_80", "hi_95"], Query(description="band sized for")]


def run_dict(run: ForecastRun, series: str, points: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": run.id,
        "series": series,
        "metric": run.metric,
        "status": run.status,
        "model": run.model,
        "reason": run.reason,
        "trained_until": run.trained_until,
        "horizon": run.horizon,
        "backtest_metric": run.backtest_metric,
        "backtest_error": run.backtest_error,
        "duration_s": run.duration_s,
        "created_at": run.created_at,
        "error": run.error,
    }
    if points is not None:
        out["scores"] = run.scores
        out["notes"] = run.notes
        out["anomalies"] = run.anomalies
        out["points"] = [
            {
                "ds": row.ds.to_pydatetime(),
                "yhat": row.yhat,
                "lo_80": row.lo_80,
                "hi_80": row.hi_80,
                "lo_95": row.lo_95,
                "hi_95": row.hi_95,
            }
            for row in points.itertuples(index=False)
        ]
    return out


@router.post("/{name:path}/forecast", dependencies=[WriteAuth], responses={404: {}, 422: {}})
async def run_forecast_now(
    name: str,
    database: DatabaseDep,
    metric: Annotated[Literal["requests", "tokens"] | None, Query()] = None,
    models: Annotated[str | None, Query(description="comma-separated candidates")] = None,
    windows: Annotated[int | None, Query(ge=1, le=30)] = None,
) -> dict[str, Any]:
    """Backtest, select and forecast this series now (synchronously); returns the new runs."""
    options = ForecastOptions(
        series=(name,),
        metrics=(metric,) if metric else ("requests", "tokens"),
        models=tuple(m.strip() for m in models.split(",") if m.strip()) if models else None,
        windows=windows,
        workers=1,
    )
    options.validate()
    items, skipped = await run_in_threadpool(build_items, database, options)
    if not items:
        raise InputError(f"series {name!r} has no history to forecast ({'; '.join(skipped)})")
    results = [await run_in_threadpool(run_item, item) for item in items]
    runs = await run_in_threadpool(_save_runs, database, name, results)
    return {"series": name, "runs": runs, "skipped": skipped}


def _save_runs(database: Database, name: str, results: list[ItemResult]) -> list[dict[str, Any]]:
    runs = []
    with database.transaction() as session:
        series = repository.get_series(session, name=name)
        for result in results:
            run = forecast_store.save_run(session, series_id=series.id, result=result)
            # A failed run has no points: an empty frame, so it is reported like a complete one.
            points = forecast_store.run_points(session, run_id=run.id)
            runs.append(run_dict(run, name, points))
    return runs


@router.get("/{name:path}/forecast/runs", dependencies=[ReadAuth], responses={404: {}})
def list_forecast_runs(
    name: str,
    session: SessionDep,
    metric: Annotated[Literal["requests", "tokens"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> list[dict[str, Any]]:
    """Every stored run, newest first (complete and failed), for audit."""
    series = repository.get_series(session, name=name)
    return [
        run_dict(r, name)
        for r in forecast_store.list_runs(session, series_id=series.id, metric=metric, limit=limit)
    ]


@router.get("/{name:path}/forecast/accuracy", dependencies=[ReadAuth], responses={404: {}})
def forecast_accuracy(
    name: str,
    session: SessionDep,
    metric: MetricParam = "requests",
    limit: Annotated[int, Query(ge=1, le=365)] = 30,
    profile: Annotated[str | None, Query(max_length=100)] = None,
) -> dict[str, Any]:
    """How past runs fared against the actuals that arrived since: WAPE, MASE, hours above the
    80/95 % bands and, with a GPU profile, hours where actual load exceeded planned capacity."""
    series = repository.get_series(session, name=name)
    gpu_profile = repository.get_gpu_profile(session, name=profile) if profile else None
    return accuracy.series_accuracy(
        session,
        series_id=series.id,
        series_name=name,
        metric=metric,
        limit=limit,
        profile=gpu_profile,
    )


@router.get("/{name:path}/forecast", dependencies=[ReadAuth], responses={404: {}})
def latest_forecast(
    name: str, session: SessionDep, metric: MetricParam = "requests"
) -> dict[str, Any]:
    """The latest complete run: points, chosen model and every candidate's backtest scores."""
    series = repository.get_series(session, name=name)
    run = forecast_store.require_latest_run(
        session, series_id=series.id, series_name=name, metric=metric
    )
    return run_dict(run, name, forecast_store.run_points(session, run_id=run.id))


def _plan(
    request: Request,
    session: SessionDep,
    name: str,
    profile: str,
    band: str,
    utilization_target: float,
    safety_factor: float,
    min_gpus: int,
) -> planning.SeriesPlan:
    params = planning.PlanParams(
        band=band,
        utilization_target=utilization_target,
        safety_factor=safety_factor,
        min_gpus=min_gpus,
    )
    return planning.series_plan(
        session,
        series_name=name,
        profile_name=profile,
        params=params,
        cache=getattr(request.app.state, "plan_cache", None),
    )


# Below 1 % a plan is meaningless, and near 0 the GPU count overflows.
UtilParam = Annotated[float, Query(ge=0.01, le=1, description="utilization target [0.01, 1]")]
SafetyParam = Annotated[float, Query(ge=1, le=10, description="safety factor >= 1")]
MinGpusParam = Annotated[int, Query(ge=0, le=100_000)]


@router.get(
    "/{name:path}/capacity",
    dependencies=[ReadAuth],
    response_model=PlanOut,
    responses={404: {}, 422: {}},
)
async def series_capacity(
    name: str,
    request: Request,
    database: DatabaseDep,
    profile: Annotated[str, Query(min_length=1, max_length=100)],
    band: BandParam = "hi_80",
    utilization_target: UtilParam = 0.75,
    safety_factor: SafetyParam = 1.2,
    min_gpus: MinGpusParam = 1,
) -> Response:
    """Tomorrow's hourly GPU plan from the latest forecast: GPUs, replicas, utilization, cost.

    Served from a short-lived response cache when the same plan was read in the last few
    seconds (see app/api/response_cache.py); otherwise computed from the stored forecast.
    """
    key = ("capacity", name, profile, band, utilization_target, safety_factor, min_gpus)
    responses = getattr(request.app.state, "response_cache", None)
    body = responses.get(key) if responses is not None else None
    if body is None:
        body = await _single_flight(
            request,
            key,
            lambda: run_in_threadpool(
                _plan_json,
                request,
                database,
                name,
                profile,
                band,
                utilization_target,
                safety_factor,
                min_gpus,
            ),
        )
        if responses is not None:
            responses.put(key, body)
    return Response(body, media_type="application/json")


async def _single_flight(
    request: Request, key: tuple[Any, ...], compute: Callable[[], Awaitable[bytes]]
) -> bytes:
    """One computation per key at a time: when a cached plan expires under load, the
    concurrent readers wait for the same computation instead of each running it."""
    inflight: dict[tuple[Any, ...], asyncio.Future[bytes]] = request.app.state.__dict__.setdefault(
        "inflight_plans", {}
    )
    future = inflight.get(key)
    if future is not None:
        return await asyncio.shield(future)
    future = asyncio.ensure_future(compute())
    inflight[key] = future
    try:
        return await asyncio.shield(future)
    finally:
        inflight.pop(key, None)


def _plan_json(
    request: Request,
    database: Database,
    name: str,
    profile: str,
    band: str,
    utilization_target: float,
    safety_factor: float,
    min_gpus: int,
) -> bytes:
    with database.transaction() as session:
        plan = _plan(
            request, session, name, profile, band, utilization_target, safety_factor, min_gpus
        )
        return plan.as_json()


@router.get(
    "/{name:path}/kubernetes",
    dependencies=[ReadAuth],
    response_class=PlainTextResponse,
    responses={200: {"content": {"application/yaml": {}}}, 404: {}, 422: {}},
)
def series_kubernetes(
    name: str,
    request: Request,
    session: SessionDep,
    profile: Annotated[str, Query(min_length=1, max_length=100)],
    namespace: Annotated[
        str, Query(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    ] = "default",
    deployment: Annotated[
        str | None, Query(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)
    ] = None,
    band: BandParam = "hi_80",
    utilization_target: UtilParam = 0.75,
    safety_factor: SafetyParam = 1.2,
    min_gpus: MinGpusParam = 1,
    lead_minutes: Annotated[int, Query(ge=0, le=120)] = 10,
) -> PlainTextResponse:
    """A KEDA ScaledObject whose cron triggers hold tomorrow's planned replicas, hour by hour."""
    plan = _plan(request, session, name, profile, band, utilization_target, safety_factor, min_gpus)
    object_name = k8s_name(name)
    try:
        text = capacity.keda_scaled_object(
            plan.plan,
            name=object_name,
            namespace=namespace,
            deployment=deployment or object_name,
            lead_minutes=lead_minutes,
        )
    except capacity.CapacityError as exc:
        raise InputError(str(exc)) from exc
    return PlainTextResponse(text, media_type="application/yaml")


def k8s_name(series: str) -> str:
    """A DNS-1123 name from a series name: ``prod-us/llama-3.1-70b`` → ``prod-us-llama-3-1-70b``."""
    import re

    cleaned = re.sub(r"[^a-z0-9-]+", "-", series.lower()).strip("-")
    return (cleaned or "gpucast")[:63].rstrip("-")
