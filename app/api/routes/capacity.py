"""The GPU plan of one series: the plan, what the autoscaler should hold now, a KEDA object
that carries it out, and the replay of past plans against what really happened."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse, Response
from pydantic import TypeAdapter

import capacity
from app import plans
from app.api.deps import DatabaseDep, ReadAuth, SessionDep
from app.api.heavy import run_heavy
from app.api.plan_query import PlanQuery, ProfileParam, SloQuery, single_flight
from app.api.schemas import BacktestOut, CompareOut, DesiredReplicasOut, PlanOut
from app.common.options import resolved_fallback_behavior
from app.db import Database
from app.ingest.timestamps import validate_timezone
from app.plans.backtest import current_replay, run_backtest
from app.plans.compare import compare_profiles, profile_names
from app.plans.kubernetes import (
    backstop_warning,
    desired_replicas_url,
    k8s_name,
    max_replicas,
    pinned,
    reactive_trigger,
    scaled_object_error,
)
from app.plans.replay import ReplayOptions, candidate_models
from app.profiles.deployments import Slo

FallbackBehaviorParam = Annotated[
    Literal["auto", "static", "currentReplicas", "currentReplicasIfHigher"],
    Query(
        description="the ScaledObject's fallback.behavior, and what the replay runs: what a "
        "trigger whose source fails answers from its 4th failed poll — static (the fallback "
        "replicas: the expected P99 peak), currentReplicas (the fleet holds where it is; KEDA "
        ">= 2.17) or currentReplicasIfHigher; auto: currentReplicas beside a reactive "
        "trigger, else static"
    ),
]

router = APIRouter(prefix="/v1/series", tags=["capacity"])
_JSON: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def _plan(
    request: Request,
    session: Any,
    name: str,
    profile: str | None,
    params: plans.PlanParams,
    slo: Slo | None = None,
) -> Any:
    return plans.series_plan(
        session,
        series_name=name,
        profile_name=profile,
        params=params,
        cache=getattr(request.app.state, "plan_cache", None),
        slo=slo,
    )


def _plan_json(
    request: Request,
    database: Database,
    name: str,
    profile: str | None,
    params: plans.PlanParams,
    slo: Slo | None,
) -> bytes:
    with database.read_transaction() as session:
        return _plan(request, session, name, profile, params, slo).as_json()


@router.get(
    "/{name:path}/capacity",
    dependencies=[ReadAuth],
    response_model=PlanOut,
    responses={404: {}, 422: {}, 429: {}},
)
async def series_capacity(
    name: str,
    request: Request,
    database: DatabaseDep,
    params: PlanQuery,
    slo: SloQuery,
    profile: ProfileParam = None,
) -> Response:
    """Tomorrow's hourly GPU plan from the freshest forecast: per hour the unconstrained
    count (``raw_gpus``) and the executed schedule (``gpus``, ``replicas``: cold-start lead,
    scale-down hold, floor, quota), the peak factor, utilization, short hours, staleness and
    the cost against a static fleet priced the same way. Every parameter is echoed.

    Served from a short-lived response cache when the same plan was read in the last few
    seconds (see app/api/response_cache.py); otherwise computed from the stored forecast.
    """
    key = ("capacity", name, profile, params, slo)
    body = await single_flight(
        request,
        key,
        lambda: run_heavy(request, _plan_json, request, database, name, profile, params, slo),
    )
    return Response(body, media_type="application/json")


def _compare_json(
    request: Request,
    database: Database,
    name: str,
    names: list[str],
    params: plans.PlanParams,
    slo: Slo | None,
) -> bytes:
    with database.read_transaction() as session:
        result = compare_profiles(
            session,
            series_name=name,
            profiles=names,
            params=params,
            slo=slo,
            cache=getattr(request.app.state, "plan_cache", None),
        )
    return _JSON.dump_json(result)


@router.get(
    "/{name:path}/capacity/compare",
    dependencies=[ReadAuth],
    response_model=CompareOut,
    responses={404: {}, 422: {}, 429: {}},
)
async def capacity_compare(
    name: str,
    request: Request,
    database: DatabaseDep,
    params: PlanQuery,
    slo: SloQuery,
    profiles: Annotated[
        str,
        Query(
            min_length=1,
            max_length=2000,
            description="comma-separated GPU profiles to plan the series on",
        ),
    ],
) -> Response:
    """The cheapest GPU type: tomorrow's plan on each profile (GPUs per hour, GPU-hours,
    ``cost_usd`` priced as the plan is), sized to the given SLO or the deployment's — a
    load-test profile at the SLO capacity of each hour's mix — whether the SLO can be met at
    all (``slo_met``), and ``cheapest: true`` on the cheapest priced profile that meets it."""
    names = profile_names(profiles)
    key = ("compare", name, tuple(names), params, slo)
    body = await single_flight(
        request,
        key,
        lambda: run_heavy(request, _compare_json, request, database, name, names, params, slo),
    )
    return Response(body, media_type="application/json")


@router.get(
    "/{name:path}/desired-replicas",
    dependencies=[ReadAuth],
    response_model=DesiredReplicasOut,
    responses={404: {}, 422: {}, 429: {}},
)
def desired_replicas(
    name: str,
    request: Request,
    session: SessionDep,
    params: PlanQuery,
    slo: SloQuery,
    profile: ProfileParam = None,
) -> dict[str, Any]:
    """The replicas the freshest plan wants now — what the KEDA ``metrics-api`` trigger of
    the generated ScaledObject polls (``valueLocation: desired_replicas``). A stale plan
    (forecast trained more than 36 h ago) answers ``fallback_replicas``: the expected fleet's
    P99 peak, never below the floor's peak (the ScaledObject's ``fallback`` too)."""
    plan = _plan(request, session, name, profile, params, slo)
    return plans.desired_replicas(plan, now=datetime.now(UTC))


DnsLabel = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


@router.get(
    "/{name:path}/kubernetes",
    dependencies=[ReadAuth],
    response_class=PlainTextResponse,
    responses={200: {"content": {"application/yaml": {}}}, 404: {}, 422: {}, 429: {}},
)
def series_kubernetes(
    name: str,
    request: Request,
    session: SessionDep,
    params: PlanQuery,
    slo: SloQuery,
    profile: ProfileParam = None,
    namespace: Annotated[str, Query(pattern=DnsLabel, max_length=63)] = "default",
    deployment: Annotated[
        str | None, Query(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)
    ] = None,
    mode: Annotated[Literal["live", "cron"], Query(description="live trigger or daily cron")] = (
        "live"
    ),
    gpucast_url: Annotated[
        str | None,
        Query(
            pattern=r"^https?://[^\s?#]+$",
            max_length=500,
            description="base URL at which KEDA reaches gpucast (default: GPUCAST_PUBLIC_URL)",
        ),
    ] = None,
    auth_secret: Annotated[
        str | None,
        Query(pattern=DnsLabel, max_length=253, description="TriggerAuthentication name"),
    ] = None,
    reactive_query: Annotated[str | None, Query(min_length=1, max_length=2000)] = None,
    reactive_target: Annotated[
        float | None, Query(gt=0, le=1e9, description="reactive metric per replica")
    ] = None,
    prometheus_url: Annotated[
        str | None, Query(pattern=r"^https?://[^\s]+$", max_length=500)
    ] = None,
    timezone: Annotated[str, Query(max_length=64, description="cron mode time zone")] = "UTC",
    fallback_behavior: FallbackBehaviorParam = "auto",
) -> PlainTextResponse:
    """A KEDA ScaledObject that carries the plan out on its own: a live ``metrics-api`` trigger
    polling desired-replicas (or daily cron triggers with ``mode=cron``), an optional reactive
    Prometheus trigger, a fallback at the expected fleet's P99 peak (never below the plan's
    peak), and HPA behavior matching the schedule
    rules (scale-up immediate, scale-down stabilization = the hold)."""
    plan = _plan(request, session, name, profile, params, slo)
    object_name = k8s_name(name)
    base_url = gpucast_url or request.app.state.settings.public_url
    url = desired_replicas_url(base_url, name, pinned(plan), params, slo=slo)
    reactive = reactive_trigger(reactive_query, reactive_target, prometheus_url)
    warning = backstop_warning(params, reactive)
    try:
        text = capacity.keda_scaled_object(
            plan.plan,
            name=object_name,
            namespace=namespace,
            deployment=deployment or object_name,
            mode=mode,
            desired_replicas_url=url,
            auth_ref=auth_secret,
            reactive=reactive,
            timezone=validate_timezone(timezone) or "UTC",
            hpa_tolerance=params.hpa_tolerance,
            max_replicas=max_replicas(plan),
            fallback_replicas=plans.fallback_replicas(plan),
            fallback_behavior=resolved_fallback_behavior(
                fallback_behavior, reactive=reactive is not None
            ),
        )
    except capacity.CapacityError as exc:
        raise scaled_object_error(exc, params, reactive) from exc
    if warning:
        text = f"# WARNING: {warning}\n{text}"
    return PlainTextResponse(text, media_type="application/yaml")


def _backtest_json(
    database: Database, name: str, profile: str | None, params: plans.PlanParams, options: Any
) -> bytes:
    """The kept replay when current (one query), else a replay run now and kept."""
    with database.transaction() as session:
        kept = current_replay(
            session, series_name=name, profile_name=profile, params=params, options=options
        )
    if kept is not None:
        return _JSON.dump_json(kept)
    result = run_backtest(
        database, series_name=name, profile_name=profile, params=params, options=options
    )
    return _JSON.dump_json(result)


@router.get(
    "/{name:path}/capacity/backtest",
    dependencies=[ReadAuth],
    response_model=BacktestOut,
    responses={404: {}, 422: {}},
)
async def capacity_backtest(
    name: str,
    request: Request,
    database: DatabaseDep,
    params: PlanQuery,
    profile: ProfileParam = None,
    days: Annotated[int, Query(ge=1, le=90, description="days replayed")] = 7,
    nightly_hour_utc: Annotated[int, Query(ge=0, le=23)] = 2,
    models: Annotated[
        str | None, Query(max_length=200, description="comma-separated candidates (default all)")
    ] = None,
    tradeoff: Annotated[
        bool,
        Query(
            description="band auto: also replay risk targets 0.1 %, 0.5 %, 1 %, 2 % and 5 % "
            "(GPU-hours and achieved time over capacity of each)"
        ),
    ] = False,
    fallback_behavior: FallbackBehaviorParam = "auto",
) -> Response:
    """Replay the last ``days`` days: at each nightly run refit gpucast's models on the data
    before it, at every hour refresh the forecast and rebuild the plan gpucast would have
    served from the hours before it (band auto re-chosen each night from the previous days),
    and run the stored load (busiest minute at peak_rps) against the capacity it and four
    other policies would have provided (the instant bound, the reactive HPA's frontier and
    the HPA at gpucast's risk among them). A replay is slow (one fit per night, one refresh
    per hour), so the result is kept and served again, as Grafana's ``plan_backtest`` does,
    until a newer observed hour makes it stale; the overview and Grafana read it too."""
    options = ReplayOptions(
        days=days,
        nightly_hour_utc=nightly_hour_utc,
        models=candidate_models(models),
        tradeoff=tradeoff,
        fallback_behavior=fallback_behavior,
    )
    key = ("backtest", name, profile, params, options)
    body = await single_flight(
        request,
        key,
        lambda: run_heavy(request, _backtest_json, database, name, profile, params, options),
    )
    return Response(body, media_type="application/json")
