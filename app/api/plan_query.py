"""The plan parameters as query parameters, shared by every route that serves a plan."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Depends, Query, Request

from app.api.response_cache import cached_read
from app.common import options
from app.errors import InputError
from app.plans import PlanParams
from app.plans.params import HPA_TOLERANCE_HELP, parse_hpa_tolerance
from app.profiles.deployments import MAX_SLO_S, Slo, slo_of

BandParam = Annotated[
    Literal["auto", "yhat", "hi_80", "hi_95", "q50", "q60", "q70", "q80", "q90", "q95", "q99"],
    Query(description="forecast column sized for; " + options.band_auto_help("max_over_capacity")),
]
# Below 1 % a plan is meaningless, and near 0 the GPU count overflows.
UtilParam = Annotated[float, Query(ge=0.01, le=1, description="utilization target [0.01, 1]")]
SafetyParam = Annotated[
    float | None,
    Query(
        ge=1,
        le=10,
        description="safety factor >= 1 (default: 1.0 with band auto, whose calibrated headroom "
        "is the margin; 1.2 with an explicit band); given with auto it stacks",
    ),
]
ProfileParam = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=100,
        description="GPU profile (default: the series' deployment, else the only profile)",
    ),
]


async def plan_params(
    band: BandParam = "auto",
    utilization_target: UtilParam = 0.75,
    safety_factor: SafetyParam = None,
    min_gpus: Annotated[int, Query(ge=1, le=100_000, description="floor in every hour")] = 1,
    max_gpus: Annotated[int | None, Query(ge=1, le=100_000, description="GPU quota")] = None,
    cold_start_s: Annotated[
        int, Query(ge=0, le=3600, description="seconds from ordering a replica to serving")
    ] = 300,
    scale_down_hold_s: Annotated[
        int, Query(ge=0, le=3600, description="sustained lower demand before scaling down")
    ] = 1800,
    max_over_capacity: Annotated[
        float,
        Query(gt=0, le=0.5, description="band auto's risk target: share of time over capacity"),
    ] = options.MAX_OVER_CAPACITY,
    reactive_backstop: Annotated[
        bool,
        Query(
            description="band auto is calibrated for a fleet that runs a reactive trigger beside "
            "the plan (KEDA's second trigger); false: for the plan trigger alone"
        ),
    ] = True,
    hpa_tolerance: Annotated[str, Query(max_length=20, description=HPA_TOLERANCE_HELP)] = "0",
) -> PlanParams:
    if max_gpus is not None and max_gpus < min_gpus:
        raise InputError(f"max_gpus={max_gpus} is below min_gpus={min_gpus}")
    return PlanParams(
        band=band,
        utilization_target=utilization_target,
        safety_factor=safety_factor,
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        cold_start_s=cold_start_s,
        scale_down_hold_s=scale_down_hold_s,
        max_over_capacity=max_over_capacity,
        reactive_backstop=reactive_backstop,
        hpa_tolerance=parse_hpa_tolerance(hpa_tolerance),
    )


T = TypeVar("T")
PlanQuery = Annotated[PlanParams, Depends(plan_params)]

_SLO_HELP = (
    "p95 {} in seconds: with ttft_p95_s and tpot_p95_s together the plan is sized to this "
    "SLO instead of the deployment's (a load-test profile: the SLO capacity at each hour's mix)"
)


async def slo_override(
    ttft_p95_s: Annotated[
        float | None,
        Query(gt=0, le=MAX_SLO_S, allow_inf_nan=False, description=_SLO_HELP.format("TTFT")),
    ] = None,
    tpot_p95_s: Annotated[
        float | None,
        Query(gt=0, le=MAX_SLO_S, allow_inf_nan=False, description=_SLO_HELP.format("TPOT")),
    ] = None,
) -> Slo | None:
    return slo_of(ttft_p95_s, tpot_p95_s)


SloQuery = Annotated[Slo | None, Depends(slo_override)]


async def single_flight(
    request: Request, key: tuple[Any, ...], compute: Callable[[], Awaitable[T]]
) -> T:
    """The response cache's answer for ``key``, else one computation per key at a time: when
    a cached answer expires under load, the concurrent readers wait for the same computation
    instead of each running it. Never an answer computed before a write that has returned
    (see :func:`app.api.response_cache.cached_read`)."""
    state = request.app.state.__dict__
    inflight: dict[tuple[Any, ...], asyncio.Future[Any]] = state.setdefault("inflight_plans", {})
    cache = getattr(request.app.state, "response_cache", None)
    return await cached_read(cache, key, compute, inflight)
