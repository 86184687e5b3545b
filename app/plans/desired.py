"""What a KEDA ``metrics-api`` trigger polls: the replicas the freshest plan wants now.

The value follows :func:`capacity.desired_gpus`: the executed schedule with each rise one cold
start early and each drop announced up to one hold early (the HPA's scale-down stabilization
window, equal to the hold, delays it back to the hour the schedule drops). Before the plan's
first hour the first hour's count is served, after its last hour the last hour's count, and a
stale plan (forecast trained more than 36 h ago) answers :func:`fallback_replicas` — never a
low number.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

import capacity
from app.plans.service import SeriesPlan


def _step_s(rules: capacity.ScheduleRules) -> int:
    return math.gcd(60, rules.grid_s())


def fallback_replicas(plan: SeriesPlan) -> int:
    """What a fleet that cannot follow its plan holds: the answer to a stale plan here, and
    the generated ScaledObject's ``fallback.replicas`` (a trigger's source failing: gpucast
    unreachable, Prometheus down, the reactive query returning no series). It is the expected
    fleet's P99 peak in replicas — what the deployment is expected to run at its busiest
    (app.plans.expected) — never below the floor's peak: under band auto the floor is a
    fraction of the forecast and the reactive trigger carries the fleet above it, so the
    floor's peak alone would drop a fleet to a fraction of what it runs. Capped by a quota;
    the floor's peak when the expected fleet is not measured."""
    gpu_plan = plan.plan
    floor_peak = max(int(gpu_plan.peak_replicas), 1)
    expected = plan.expected.peak("p99") if plan.expected is not None else None
    if expected is None:
        return floor_peak
    replicas = max(floor_peak, math.ceil(expected / gpu_plan.gpus_per_replica - 1e-9))
    if plan.params.max_gpus is not None:
        replicas = min(replicas, max(plan.params.max_gpus // gpu_plan.gpus_per_replica, 1))
    return replicas


def desired_replicas(plan: SeriesPlan, *, now: datetime | None = None) -> dict[str, Any]:
    """The desired-replicas answer for ``now`` (default: the current time)."""
    moment = pd.Timestamp(now or datetime.now(UTC))
    moment = moment.tz_localize("UTC") if moment.tzinfo is None else moment.tz_convert("UTC")
    gpu_plan = plan.plan
    rules = gpu_plan.rules
    per_replica = gpu_plan.gpus_per_replica
    hours = pd.DatetimeIndex(gpu_plan.frame["hour"])
    gpus = gpu_plan.frame["gpus"].to_numpy(dtype=float)
    step = _step_s(rules)
    served = capacity.desired_gpus(
        gpus,
        cold_start_s=rules.cold_start_s,
        scale_down_hold_s=rules.scale_down_hold_s,
        step_s=step,
    )
    level = capacity.planned_level(gpus, cold_start_s=rules.cold_start_s, step_s=step)
    index = int(np.clip((moment - hours[0]).total_seconds() // step, 0, len(served) - 1))
    stale = plan.is_stale(moment.to_pydatetime())
    fallback = fallback_replicas(plan)
    in_plan = hours[0] <= moment < hours[-1] + pd.Timedelta(hours=1)
    if stale:
        desired, source = fallback, "fallback: the plan is stale (forecast older than 36 h)"
    else:
        desired = int(math.ceil(served[index] / per_replica - 1e-9))
        source = "plan" if in_plan else "plan (outside its hours: nearest hour held)"
    hour_row = int(np.clip((moment - hours[0]) // pd.Timedelta(hours=1), 0, len(hours) - 1))
    fleet = plan.expected.fleet if plan.expected is not None else None
    return {
        "series": plan.series,
        "profile": plan.profile,
        "at": moment.to_pydatetime(),
        "hour": moment.floor("h").to_pydatetime() if in_plan else None,
        "desired_replicas": desired,
        "desired_gpus": desired * per_replica,
        "scheduled_replicas": int(math.ceil(level[index] / per_replica - 1e-9)),
        "fallback_replicas": fallback,
        "stale": stale,
        "source": source,
        "plan_start": hours[0].to_pydatetime(),
        "plan_end": (hours[-1] + pd.Timedelta(hours=1)).to_pydatetime(),
        "trained_until": plan.trained_until,
        "valid_until": plan.valid_until,
        "cold_start_s": rules.cold_start_s,
        "scale_down_hold_s": rules.scale_down_hold_s,
        "gpus_per_replica": per_replica,
        # what the deployment is expected to run this hour beside the floor it polls
        # (app.plans.expected; None when not measured)
        "expected_replicas_p50": _replicas(fleet.p50[hour_row], per_replica) if fleet else None,
        "expected_replicas_p90": _replicas(fleet.p90[hour_row], per_replica) if fleet else None,
    }


def _replicas(gpus: float, per_replica: int) -> int:
    return int(math.ceil(float(gpus) / per_replica - 1e-9))
