"""Targets derived from the GPU plan: GPUs (and replicas) per hour, hourly cost, scale events.

Every count served is the **executed** schedule (cold-start lead, scale-down hold, floor,
quota); ``raw_gpus: true`` adds the unconstrained count of the formula alone. A plan whose
forecast was trained more than 36 h ago is marked in each of its series' names (the legend a
Grafana user reads) with :data:`STALE_SUFFIX`; a plan of band auto names the quantile it
was sized on (``"(l4-small, auto → q70)"``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select

import capacity
from app import plans
from app.common.names import echo
from app.common.words import count
from app.db import repository
from app.db.models import GpuProfile
from app.forecasts import store as forecast_store
from app.grafana.protocol import (
    GrafanaInputError,
    QueryContext,
    boolean,
    choice,
    epoch_ms,
    flag,
    in_range,
    integer,
    number,
    optional_integer,
    table,
    target_series,
    text_list,
    timeseries,
    wants_all,
)
from app.profiles.deployments import optional_binding, profile_needed

PLAN_BANDS = ("auto", *capacity.PLAN_BANDS)
STALE_HOURS = plans.STALE_AFTER.total_seconds() / 3600
STALE_NOTE = f"forecast older than {STALE_HOURS:g} h"
STALE_SUFFIX = f" STALE: {STALE_NOTE}"
PAST_NOTE = "every hour of the plan is past"


def stale_note(plan: plans.SeriesPlan) -> str:
    """Why a stale plan is stale: its forecast's age, else that none of its hours is ahead."""
    valid_until = plan.valid_until
    if valid_until is None or datetime.now(UTC) > valid_until:
        return STALE_NOTE
    return PAST_NOTE


MAX_SCHEDULE_S = 3600  # the schedule's (and Kubernetes') limit for the cold start and the hold
ANNOTATION_COLUMNS = (
    ("Time", "time"),
    ("TimeEnd", "time"),
    ("Title", "string"),
    ("Text", "string"),
    ("Tags", "string"),
)


def plan_params(payload: dict[str, Any]) -> plans.PlanParams:
    """The plan parameters of a payload, with the REST API's defaults and limits."""
    defaults = plans.PlanParams()
    min_gpus = integer(payload, "min_gpus", defaults.min_gpus, low=1, high=100_000)
    max_gpus = optional_integer(payload, "max_gpus", low=1, high=100_000)
    if max_gpus is not None and max_gpus < min_gpus:
        raise GrafanaInputError(f"payload.max_gpus {max_gpus} is below payload.min_gpus {min_gpus}")
    return plans.PlanParams(
        band=choice(payload, "band", PLAN_BANDS, defaults.band),
        utilization_target=number(
            payload, "utilization_target", defaults.utilization_target, low=0.01, high=1.0
        ),
        safety_factor=(
            None
            if payload.get("safety_factor") in (None, "")
            else number(payload, "safety_factor", 1.0, low=1.0, high=10.0)
        ),
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        cold_start_s=integer(
            payload, "cold_start_s", defaults.cold_start_s, low=0, high=MAX_SCHEDULE_S
        ),
        scale_down_hold_s=integer(
            payload, "scale_down_hold_s", defaults.scale_down_hold_s, low=0, high=MAX_SCHEDULE_S
        ),
        max_over_capacity=number(
            payload, "max_over_capacity", defaults.max_over_capacity, low=1e-4, high=0.5
        ),
        reactive_backstop=boolean(payload, "reactive_backstop", defaults.reactive_backstop),
        hpa_tolerance=hpa_tolerance(payload, defaults.hpa_tolerance),
    )


def hpa_tolerance(payload: dict[str, Any], default: float | None) -> float | None:
    """``payload.hpa_tolerance``: the HPA's tolerance band the fleet runs the plan trigger
    with (a share in [0, 1], as REST's and the CLI's ``hpa_tolerance``), or ``none``."""
    value = payload.get("hpa_tolerance")
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, str) and value.strip().lower() == "none":
        return None
    if default is None and (value is None or (isinstance(value, str) and not value.strip())):
        return None
    return number({"hpa_tolerance": value}, "hpa_tolerance", default or 0.0, low=0.0, high=1.0)


def sized_band(plan: plans.SeriesPlan) -> str:
    """The band a plan is sized on as its readers name it: ``auto → yhat x 1.16`` for band
    auto (the headroom over the point forecast chosen for the nightly run behind the plan; the
    fallback band while not calibrated), else the band asked for."""
    if plan.params.band != "auto":
        return plan.params.band
    choice = plan.band_choice or {}
    return f"auto → {choice.get('label') if choice.get('headroom') else plan.plan.band}"


def legend_name(name: str, what: str, profile: GpuProfile, plan: plans.SeriesPlan) -> str:
    """``"{series} {what} ({profile})"``, with the quantile chosen for band auto
    (``"({profile}, auto → q70)"``), ending in STALE_SUFFIX when the plan is stale.

    An explicit band keeps the plain name, so field overrides matched on it keep working."""
    band = f", {sized_band(plan)}" if plan.params.band == "auto" else ""
    stale = f" STALE: {stale_note(plan)}" if plan.is_stale() else ""
    return f"{name} {what} ({profile.name}{band}){stale}"


def resolve_profiles(
    ctx: QueryContext, payload: dict[str, Any], series_name: str
) -> list[GpuProfile]:
    """The payload's GPU profiles (several from a multi-value variable: one result each; its
    "All": every profile); without one, the series' deployment, else the only profile
    (:func:`app.profiles.optional_binding`)."""
    if wants_all(payload, "profile"):
        return list(repository.list_gpu_profiles(ctx.session))
    chosen = text_list(payload, "profile")
    if chosen:
        found = {
            p.name: p
            for p in ctx.session.scalars(select(GpuProfile).where(GpuProfile.name.in_(chosen)))
        }
        missing = [name for name in chosen if name not in found]
        if missing:
            names = [p.name for p in repository.list_gpu_profiles(ctx.session)]
            raise GrafanaInputError(
                f"GPU profile {echo(missing[0])} not found; GPU profiles: "
                f"{', '.join(names) or 'none'}"
            )
        return [found[name] for name in chosen]
    binding = optional_binding(ctx.session, series_name=series_name)
    if binding is None:
        names = [p.name for p in repository.list_gpu_profiles(ctx.session)]
        raise GrafanaInputError(
            "payload.profile is required: " + profile_needed(series_name, names)
        )
    return [repository.get_gpu_profile(ctx.session, name=binding.profile)]


def has_forecast(ctx: QueryContext, name: str) -> bool:
    """True when the series has a complete forecast to plan from (tokens or requests)."""
    series = repository.get_series(ctx.session, name=name)
    return any(
        forecast_store.latest_run(ctx.session, series_id=series.id, metric=metric)
        for metric in ("tokens", "requests")
    )


def profile_plan(
    ctx: QueryContext, name: str, profile: GpuProfile, params: plans.PlanParams
) -> plans.SeriesPlan:
    """The plan of one series on one profile, through the query's plan cache."""
    return plans.series_plan(
        ctx.session,
        series_name=name,
        profile_name=profile.name,
        params=params,
        cache=ctx.plan_cache,
    )


def _plans(
    ctx: QueryContext, payload: dict[str, Any]
) -> list[tuple[str, GpuProfile, plans.SeriesPlan]]:
    """One plan per series that has a complete forecast (series without one are skipped) and
    profile: the payload's profiles, or the series' own deployment."""
    params = plan_params(payload)
    return [
        (name, profile, profile_plan(ctx, name, profile, params))
        for name in target_series(ctx, payload)
        if has_forecast(ctx, name)
        for profile in resolve_profiles(ctx, payload, name)
    ]


def gpus(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The executed GPU schedule per forecast hour (the floor KEDA's plan trigger holds);
    ``replicas: true`` adds the replica count, ``raw_gpus: true`` the unconstrained count (the
    formula before the schedule rules) and ``expected_fleet: true`` the fleet the deployment
    is expected to run (P50 and P90, where band auto measured it: app.plans.expected)."""
    columns = ["gpus"]
    columns += ["replicas"] if flag(payload, "replicas") else []
    columns += ["raw_gpus"] if flag(payload, "raw_gpus") else []
    expected = flag(payload, "expected_fleet")
    out = []
    for name, profile, plan in _plans(ctx, payload):
        frame = plan.plan.frame
        fleet = plan.expected.fleet if plan.expected is not None else None
        shown = list(columns)
        if expected and fleet is not None:
            frame = frame.assign(expected_gpus_p50=fleet.p50, expected_gpus_p90=fleet.p90)
            shown += ["expected_gpus_p50", "expected_gpus_p90"]
        frame = in_range(frame, "hour", ctx)
        for column in shown:
            out.append(timeseries(legend_name(name, column, profile, plan), frame, "hour", column))
    return out


def hourly_cost_usd(plan: plans.SeriesPlan, profile: GpuProfile) -> pd.Series:
    """USD per plan hour of the executed schedule, priced as the plan's cost is (reserved
    where busy beyond break-even, the rest on demand; a rise's cold-start minutes belong to
    the hour before it). Sums to ``plan.cost.total_usd``."""
    if plan.cost is None:
        return pd.Series(0.0, index=plan.plan.frame.index)
    return pd.Series(np.asarray(plan.cost.hourly_usd, dtype=float), index=plan.plan.frame.index)


def cost(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Hourly USD of the GPU plan's floor (same payload as ``gpus``); ``expected_fleet: true``
    adds the expected fleet's hourly USD."""
    out = []
    for name, profile, plan in _plans(ctx, payload):
        if not profile.usd_per_hour_on_demand:
            raise GrafanaInputError(
                f"GPU profile {profile.name!r} has no on-demand price; set "
                "usd_per_hour_on_demand to chart cost"
            )
        frame = plan.plan.frame.assign(usd=hourly_cost_usd(plan, profile))
        expected = plan.expected.cost if plan.expected is not None else None
        shown = [("usd", "cost usd/h")]
        if flag(payload, "expected_fleet") and expected is not None:
            frame = frame.assign(expected_usd=np.asarray(expected.hourly_usd, dtype=float))
            shown.append(("expected_usd", "expected fleet cost usd/h"))
        frame = in_range(frame, "hour", ctx)
        for column, label in shown:
            out.append(timeseries(legend_name(name, label, profile, plan), frame, "hour", column))
    return out


def scale_events(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Annotations: the executed schedule's changes. A rise is a region from the moment the
    GPUs are ordered (one cold start ahead) to the hour they serve; a drop is a point at the
    hour the GPUs are released (after the plan asked for fewer for the scale-down hold)."""
    rows = []
    for name, profile, plan in _plans(ctx, payload):
        frame = plan.plan.frame
        previous = frame["gpus"].shift(1)
        changed = frame[previous.notna() & (frame["gpus"] != previous)]
        for hour, before, after in zip(
            changed["hour"], previous[changed.index], changed["gpus"], strict=True
        ):
            rows.append(
                _scale_row(name, profile, plan, pd.Timestamp(hour), int(before), int(after))
            )
    start, end = epoch_ms(ctx.start), epoch_ms(ctx.end)
    rows = sorted((r for r in rows if r[0] <= end and r[1] >= start), key=lambda r: r[1])
    return [table(ANNOTATION_COLUMNS, rows)]


def _scale_row(
    name: str,
    profile: GpuProfile,
    plan: plans.SeriesPlan,
    hour: pd.Timestamp,
    before: int,
    after: int,
) -> list[Any]:
    params = plan.params
    sized = f"{sized_band(plan)}, target {params.utilization_target:g}"
    stale = f" (stale plan: {stale_note(plan)})" if plan.is_stale() else ""
    if after > before:
        ordered = hour - pd.Timedelta(seconds=params.cold_start_s)
        title = f"scale up {before} → {count(after, 'GPU')}"
        text = (
            f"{name} on {profile.name}: {count(after - before, 'GPU')} ordered at "
            f"{ordered:%H:%M} UTC, "
            f"one cold start ({params.cold_start_s} s) ahead, so {after} serve from "
            f"{hour:%H:%M} UTC ({sized}){stale}"
        )
        direction = "up"
    else:
        ordered = hour
        title = f"scale down {before} → {count(after, 'GPU')}"
        text = (
            f"{name} on {profile.name}: {count(before - after, 'GPU')} released at "
            f"{hour:%H:%M} UTC, "
            f"after the plan asked for fewer for the {params.scale_down_hold_s} s hold "
            f"({sized}){stale}"
        )
        direction = "down"
    tags = f"scale-{direction},{name},{profile.name}" + (",stale" if stale else "")
    return [epoch_ms(ordered), epoch_ms(hour), title, text, tags]
