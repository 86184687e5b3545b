"""Targets derived from the GPU plan: GPUs (and replicas) per hour, hourly cost, scale events."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

import capacity
from app import forecast_store, plans, repository
from app.db.models import GpuProfile
from app.grafana.protocol import (
    GrafanaInputError,
    QueryContext,
    choice,
    epoch_ms,
    flag,
    in_range,
    number,
    table,
    target_series,
    text_list,
    timeseries,
)

PLAN_BANDS = tuple(capacity.PLAN_BANDS)
ANNOTATION_COLUMNS = (
    ("Time", "time"),
    ("TimeEnd", "time"),
    ("Title", "string"),
    ("Text", "string"),
    ("Tags", "string"),
)


def plan_params(payload: dict[str, Any]) -> plans.PlanParams:
    return plans.PlanParams(
        band=choice(payload, "band", PLAN_BANDS, "hi_80"),
        utilization_target=number(payload, "utilization_target", 0.75, low=0.01, high=1.0),
        safety_factor=number(payload, "safety_factor", 1.2, low=1.0, high=10.0),
        min_gpus=int(number(payload, "min_gpus", 1, low=0, high=100_000)),
    )


def resolve_profile(ctx: QueryContext, payload: dict[str, Any]) -> GpuProfile:
    """The payload's GPU profile; without one, the only profile if exactly one exists."""
    profiles = repository.list_gpu_profiles(ctx.session)
    names = [p.name for p in profiles]
    chosen = text_list(payload, "profile")
    if len(chosen) > 1:
        raise GrafanaInputError(f"payload.profile takes one value, got {chosen}")
    if not chosen:
        if len(profiles) == 1:
            return profiles[0]
        raise GrafanaInputError(
            "payload.profile is required; GPU profiles: "
            + (", ".join(names) or "none defined yet (POST /v1/gpu-profiles)")
        )
    for profile in profiles:
        if profile.name == chosen[0]:
            return profile
    raise GrafanaInputError(
        f"GPU profile {chosen[0]!r} not found; GPU profiles: {', '.join(names) or 'none'}"
    )


def _plans(
    ctx: QueryContext, payload: dict[str, Any]
) -> list[tuple[str, GpuProfile, plans.SeriesPlan]]:
    """One plan per series that has a complete forecast (series without one are skipped)."""
    profile = resolve_profile(ctx, payload)
    params = plan_params(payload)
    out = []
    for name in target_series(ctx, payload):
        series = repository.get_series(ctx.session, name=name)
        if not any(
            forecast_store.latest_run(ctx.session, series_id=series.id, metric=m)
            for m in ("tokens", "requests")
        ):
            continue
        plan = plans.series_plan(
            ctx.session,
            series_name=name,
            profile_name=profile.name,
            params=params,
            cache=ctx.plan_cache,
        )
        out.append((name, profile, plan))
    return out


def gpus(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Planned GPUs per forecast hour; ``replicas: true`` adds the replica count."""
    with_replicas = flag(payload, "replicas")
    out = []
    for name, profile, plan in _plans(ctx, payload):
        frame = in_range(plan.plan.frame, "hour", ctx)
        out.append(timeseries(f"{name} gpus ({profile.name})", frame, "hour", "gpus"))
        if with_replicas:
            out.append(timeseries(f"{name} replicas ({profile.name})", frame, "hour", "replicas"))
    return out


def hourly_cost_usd(plan: plans.SeriesPlan, profile: GpuProfile) -> pd.Series:
    """USD per plan hour of the executed schedule, priced as the plan's cost is (reserved
    where busy beyond break-even, the rest on demand; a rise's cold-start minutes belong to
    the hour before it). Sums to ``plan.cost.total_usd``."""
    if plan.cost is None:
        return pd.Series(0.0, index=plan.plan.frame.index)
    return pd.Series(np.asarray(plan.cost.hourly_usd, dtype=float), index=plan.plan.frame.index)


def cost(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Hourly USD of the GPU plan (same payload as ``gpus``)."""
    out = []
    for name, profile, plan in _plans(ctx, payload):
        if not profile.usd_per_hour_on_demand:
            raise GrafanaInputError(
                f"GPU profile {profile.name!r} has no on-demand price; set "
                "usd_per_hour_on_demand to chart cost"
            )
        frame = plan.plan.frame.assign(usd=hourly_cost_usd(plan, profile))
        frame = in_range(frame, "hour", ctx)
        out.append(timeseries(f"{name} cost usd/h ({profile.name})", frame, "hour", "usd"))
    return out


def scale_events(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Annotations: the plan hours where the GPU count changes from the hour before."""
    rows = []
    for name, profile, plan in _plans(ctx, payload):
        frame = plan.plan.frame
        previous = frame["gpus"].shift(1)
        changed = frame[previous.notna() & (frame["gpus"] != previous)]
        for hour, before, after in zip(
            changed["hour"], previous[changed.index], changed["gpus"], strict=True
        ):
            before, after = int(before), int(after)
            direction = "up" if after > before else "down"
            stamp = epoch_ms(hour)
            rows.append(
                [
                    stamp,
                    stamp,
                    f"scale {direction} {before} → {after} GPUs",
                    f"{name} on {profile.name}: {before} → {after} GPUs "
                    f"({plan.params.band}, target {plan.params.utilization_target:g})",
                    f"scale-{direction},{name},{profile.name}",
                ]
            )
    start, end = epoch_ms(ctx.start), epoch_ms(ctx.end)
    rows = sorted((r for r in rows if start <= r[0] <= end), key=lambda r: r[0])
    return [table(ANNOTATION_COLUMNS, rows)]
