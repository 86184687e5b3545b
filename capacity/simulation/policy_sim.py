"""Replay a load series under scaling policies and report replicas over time and KPIs."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from capacity._checks import require_non_negative, require_positive
from capacity.errors import InvalidParameterError
from capacity.simulation.policies import Policy, SimContext

TIMELINE_COLUMNS = (
    "load",
    "provisioned_replicas",
    "ready_replicas",
    "capacity",
    "utilization",
    "rate_limited",
)
KPI_COLUMNS = (
    "gpu_hours",
    "cost_usd",
    "mean_utilization",
    "hours_above_75",
    "hours_above_85",
    "hours_above_95",
    "hours_above_100",
    "rate_limited",
    "rate_limited_share",
    "scale_events",
    "peak_replicas",
)


@dataclass(frozen=True)
class SimulationResult:
    """One policy's run: a per-tick timeline (columns TIMELINE_COLUMNS) and its KPIs."""

    policy: str
    timeline: pd.DataFrame
    kpis: dict[str, float]


@dataclass(frozen=True)
class PolicyComparison:
    """table: one row per policy (index = policy name, columns KPI_COLUMNS);
    timelines: policy name -> that policy's per-tick timeline."""

    table: pd.DataFrame
    timelines: dict[str, pd.DataFrame]


def _step_seconds(load: pd.Series | np.ndarray, step_s: float | None) -> float:
    if step_s is not None:
        return require_positive("step_s", step_s)
    if isinstance(load, pd.Series) and isinstance(load.index, pd.DatetimeIndex) and len(load) > 1:
        steps = np.diff(load.index.asi8) / 1e9
        if not np.allclose(steps, steps[0]):
            raise InvalidParameterError("load index must be regular; resample it first")
        return float(steps[0])
    raise InvalidParameterError("step_s is required unless load has a regular DatetimeIndex")


def _tick_load(values: np.ndarray, ticks_per_sample: int, interpolation: str) -> np.ndarray:
    if interpolation == "step":
        return np.repeat(values, ticks_per_sample)
    if interpolation == "linear":
        # Sample values sit at the middle of their interval; ticks are read at their middles.
        centers = np.arange(len(values)) * ticks_per_sample + ticks_per_sample / 2
        ticks = np.arange(len(values) * ticks_per_sample) + 0.5
        return np.interp(ticks, centers, values)
    raise InvalidParameterError(f"interpolation must be 'step' or 'linear', got {interpolation!r}")


def _context(
    load: pd.Series | np.ndarray,
    *,
    capacity_per_replica: float,
    tick_s: float,
    cold_start_s: float,
    step_s: float | None,
    interpolation: str,
) -> SimContext:
    values = np.asarray(load, dtype=float)
    if values.ndim != 1 or len(values) == 0:
        raise InvalidParameterError("load must be a non-empty 1-D series")
    if np.isnan(values).any() or (values < 0).any():
        raise InvalidParameterError("load must be >= 0 with no NaN; fill gaps first")
    step = _step_seconds(load, step_s)
    tick = require_positive("tick_s", tick_s)
    per_sample = step / tick
    if abs(per_sample - round(per_sample)) > 1e-9:
        raise InvalidParameterError(f"tick_s={tick_s} must divide the load step of {step} s")
    per_sample = int(round(per_sample))
    ticks = _tick_load(values, per_sample, interpolation)
    if isinstance(load, pd.Series) and isinstance(load.index, pd.DatetimeIndex):
        index = pd.date_range(load.index[0], periods=len(ticks), freq=pd.Timedelta(seconds=tick))
    else:
        index = pd.Index(np.arange(len(ticks)) * tick, name="t_s")
    return SimContext(
        capacity_per_replica=require_positive("capacity_per_replica", capacity_per_replica),
        tick_s=tick,
        cold_start_ticks=int(np.ceil(require_non_negative("cold_start_s", cold_start_s) / tick)),
        load=ticks,
        tick_index=index,
        ticks_per_sample=per_sample,
    )


def _run(
    policy: Policy, ctx: SimContext, initial_load: float
) -> tuple[np.ndarray, np.ndarray, int]:
    controller = policy.start(ctx)
    n = len(ctx.load)
    provisioned_out, ready_out = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    # The fleet before the replay was sized for the load seen before it (never the future).
    provisioned = ready = max(int(controller.initial(initial_load)), 0)
    pending: deque[list[int]] = deque()  # [tick ready, count], oldest first
    events = 0
    for tick in range(n):
        while pending and pending[0][0] <= tick:
            ready += pending.popleft()[1]
        observed = ctx.load[tick - 1] if tick else initial_load
        desired = max(int(controller.decide(tick, observed, provisioned, ready)), 0)
        if desired > provisioned:
            if ctx.cold_start_ticks:
                pending.append([tick + ctx.cold_start_ticks, desired - provisioned])
            else:
                ready += desired - provisioned
        elif desired < provisioned:
            surplus = provisioned - desired
            while surplus and pending:  # cancel the newest starting replicas first
                cancelled = min(surplus, pending[-1][1])
                pending[-1][1] -= cancelled
                surplus -= cancelled
                if not pending[-1][1]:
                    pending.pop()
            ready -= surplus
        events += desired != provisioned
        provisioned = desired
        provisioned_out[tick], ready_out[tick] = provisioned, ready
    return provisioned_out, ready_out, events


def simulate_policy(
    load: pd.Series | np.ndarray,
    policy: Policy,
    *,
    capacity_per_replica: float,
    gpus_per_replica: int = 1,
    usd_per_gpu_hour: float = 0.0,
    cold_start_s: float = 600.0,
    tick_s: float = 60.0,
    step_s: float | None = None,
    interpolation: str = "step",
    initial_load: float = 0.0,
) -> SimulationResult:
    """Replay `load` (units/s, e.g. requests/s) under `policy` and measure the outcome.

    load: a regular time series (step from its DatetimeIndex, or step_s seconds per sample),
    expanded to tick_s ticks by holding each value ("step") or interpolating ("linear").
    capacity_per_replica: load one replica serves at 100 % utilization (same unit as load).
    Added replicas serve only after cold_start_s; removed replicas stop at once. Replicas are
    billed while starting. rate_limited counts load-seconds (requests, if load is requests/s)
    above what the gateway admits: admit_up_to x ready capacity (1.0, the tiered policy 0.95).
    initial_load: the load measured just before the replay (default 0); the fleet at the
    start is what each policy would have chosen for it, already ready. Nothing is sized from
    the replayed load itself.
    """
    ctx = _context(
        load,
        capacity_per_replica=capacity_per_replica,
        tick_s=tick_s,
        cold_start_s=cold_start_s,
        step_s=step_s,
        interpolation=interpolation,
    )
    provisioned, ready, events = _run(
        policy, ctx, require_non_negative("initial_load", initial_load)
    )
    capacity = ready * ctx.capacity_per_replica
    with np.errstate(divide="ignore", invalid="ignore"):
        utilization = np.where(capacity > 0, ctx.load / capacity, np.where(ctx.load > 0, np.inf, 0))
    admitted = np.minimum(ctx.load, policy.admit_up_to * capacity)
    limited = (ctx.load - admitted) * ctx.tick_s
    hours = ctx.tick_s / 3600.0
    gpu_hours = float(provisioned.sum() * gpus_per_replica * hours)
    kpis = {
        "gpu_hours": gpu_hours,
        "cost_usd": gpu_hours * require_non_negative("usd_per_gpu_hour", usd_per_gpu_hour),
        "mean_utilization": float(admitted.sum() / capacity.sum()) if capacity.sum() else 0.0,
        "hours_above_75": float((utilization > 0.75).sum() * hours),
        "hours_above_85": float((utilization > 0.85).sum() * hours),
        "hours_above_95": float((utilization > 0.95).sum() * hours),
        "hours_above_100": float((utilization > 1.0).sum() * hours),
        "rate_limited": float(limited.sum()),
        "rate_limited_share": float(limited.sum() / (ctx.load.sum() * ctx.tick_s))
        if ctx.load.sum()
        else 0.0,
        "scale_events": int(events),
        "peak_replicas": int(provisioned.max()),
    }
    timeline = pd.DataFrame(
        {
            "load": ctx.load,
            "provisioned_replicas": provisioned,
            "ready_replicas": ready,
            "capacity": capacity,
            "utilization": utilization,
            "rate_limited": limited,
        },
        index=ctx.tick_index,
    )
    return SimulationResult(policy=policy.name, timeline=timeline, kpis=kpis)


def simulate_policies(
    load: pd.Series | np.ndarray,
    policies: Sequence[Policy] | Mapping[str, Policy],
    **options: Any,
) -> PolicyComparison:
    """Run several policies on the same load (options as in :func:`simulate_policy`).

    Returns a PolicyComparison whose table has one row per policy, in the order given.
    """
    named = dict(policies) if isinstance(policies, Mapping) else {p.name: p for p in policies}
    if len(named) != len(policies):
        raise InvalidParameterError("policy names must be unique; pass a mapping to rename them")
    results = {name: simulate_policy(load, policy, **options) for name, policy in named.items()}
    table = pd.DataFrame([r.kpis for r in results.values()], index=list(results))
    table.index.name = "policy"
    return PolicyComparison(
        table=table[list(KPI_COLUMNS)],
        timelines={name: r.timeline for name, r in results.items()},
    )
