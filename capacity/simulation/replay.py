"""The plan replay: run the actual load against the capacity each policy would have provided.

A policy is judged by what a fleet following it would have lived through, not by forecast
error. The replay knows two kinds of policy:

- :class:`PlanPolicy` — a sequence of :class:`PlanDecision` s, each a plan (executed hourly
  GPUs) that became available at ``at`` and was made from data before it. At every tick the
  fleet's autoscaler reads what the desired-replicas endpoint would have served from the
  freshest decision (:func:`capacity.desired_gpus`), optionally combined with a
  reactive trigger.
- :class:`ReactivePolicy` — the Kubernetes HPA alone on the observed load.

Every policy runs through the same fleet (:class:`Fleet`): an HPA with scale-up immediate and
a scale-down stabilization window equal to the hold, replicas billed from the moment they are
ordered and serving only after the cold start, the metric lagging one tick. The load is in
tokens/s on a regular time index; KPIs are measured on the finer of the load step and the
tick. Nothing is sized from the replayed load except by the ``oracle`` bound a caller builds.

In parts: what is replayed (``replay_policies``), the fleet it runs on (``fleet``), how each
policy is scored (``replay_kpis``), and here the replay itself on one grid of ticks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from capacity._checks import require_non_negative
from capacity.errors import InvalidParameterError
from capacity.simulation.fleet import (
    Fleet,
    autoscale,
    bound_replicas,
    reactive_replicas,
    ready_replicas,
    served_gpus,
    served_load_gpus,
)
from capacity.simulation.replay_kpis import SLO_KPI, instant_bound, policy_kpis
from capacity.simulation.replay_policies import InstantBound, PlanPolicy, ReactivePolicy
from capacity.sizing.cost import Prices


@dataclass(frozen=True)
class ReplayResult:
    """table: one row per policy (index "policy"; columns recommended, bound, REPLAY_KPIS);
    timelines: policy -> per-tick frame (desired_replicas, provisioned_gpus, ready_gpus,
    plan_gpus, capacity_tokens_per_s, load_tokens_per_s and, for a plan whose decisions carry
    ``load_gpus``, sized_load_gpus); resolution_s: step the KPIs were measured on;
    unobserved_share: the share of [start, end) whose load was not observed (NaN)."""

    table: pd.DataFrame
    timelines: dict[str, pd.DataFrame]
    resolution_s: int
    tick_s: int
    start: pd.Timestamp
    end: pd.Timestamp
    unobserved_share: float = 0.0


def _regular_load(load: pd.Series) -> tuple[np.ndarray, pd.Timestamp, int]:
    if not isinstance(load.index, pd.DatetimeIndex) or load.index.tz is None:
        raise InvalidParameterError("load needs a timezone-aware (UTC) DatetimeIndex")
    values = np.asarray(load.to_numpy(dtype=float))
    if len(values) < 2:
        raise InvalidParameterError("load needs at least two samples")
    seen = ~np.isnan(values)
    if np.isinf(values).any() or (values[seen] < 0).any():
        raise InvalidParameterError("load must be finite and >= 0 where observed (NaN: not)")
    if not seen.any():
        raise InvalidParameterError("load has no observed sample (all NaN)")
    steps = np.diff(load.index.asi8) // 10**9
    if not (steps == steps[0]).all() or steps[0] < 1:
        raise InvalidParameterError("load must be on a regular step of at least 1 s")
    return values, load.index[0].tz_convert("UTC"), int(steps[0])


def _on_grid(
    values: np.ndarray, origin: pd.Timestamp, step_s: int, start: pd.Timestamp, n: int, res: int
) -> np.ndarray:
    """Load values at each of n grid points of res seconds from start (sample holding)."""
    offsets = (start - origin).total_seconds() + np.arange(n) * res
    positions = np.floor(offsets / step_s + 1e-9).astype(np.int64)
    if positions[0] < 0 or positions[-1] >= len(values):
        raise InvalidParameterError(
            f"the load covers {origin} .. {origin + pd.Timedelta(seconds=step_s * len(values))}"
            f" but the replay needs {start} .. {start + pd.Timedelta(seconds=n * res)}"
        )
    return values[positions]


def replay(
    load_tokens_per_s: pd.Series,
    policies: Sequence[PlanPolicy | ReactivePolicy | InstantBound],
    *,
    fleet: Fleet,
    start: pd.Timestamp,
    end: pd.Timestamp,
    warmup_start: pd.Timestamp | None = None,
    initial_tokens_per_s: float = 0.0,
    prices: Prices | None = None,
    slo_tokens_per_s_per_replica: pd.Series | None = None,
) -> ReplayResult:
    """Replay the load on [start, end) under every policy; fleets run from warmup_start
    (default start), where each starts ready at what it would have held: a plan policy at what
    its plan served, the HPA sized for ``initial_tokens_per_s`` (the load before warmup).

    Every policy is scored against one capacity line (:func:`capacity_line`): the tokens/s
    one replica sustains at each step. KPIs over [start, end): gpu_hours (provisioned,
    starting replicas included), cost_usd (priced with capacity.timeline_cost_usd: reserved
    where busy beyond the break-even share), time_over_capacity_share (load above the ready
    replicas on the line), requests_over_capacity_share (load above capacity ÷ all load),
    time_over_85_share, scale_events, peak_gpus and mean_utilization (served ÷ capacity).

    Load NaN is not observed (telemetry lost): the reactive trigger's read fails there
    (:mod:`capacity.simulation.fleet`: no scale-down, then a PlanPolicy's fallback), those
    steps are left out of every load KPI (GPU-hours and cost count them), and the instant
    bound bridges them with a straight line between the observed steps either side.

    slo_tokens_per_s_per_replica: what one replica sustains within a latency SLO at each
    time's prompt/completion mix (tokens/s, on a UTC index covering [warmup_start, end), held
    from each sample to the next, e.g. hourly). When given it is the line for every policy
    and the bound, and every row gains SLO_KPI (time_over_slo_share, equal to
    time_over_capacity_share). The autoscaler's reactive trigger keeps its own setting (the
    profile's tokens/s x its target): what the ScaledObject writes.
    """
    names = [p.name for p in policies]
    if not names or len(set(names)) != len(names):
        raise InvalidParameterError("give at least one policy, with unique names")
    values, origin, step = _regular_load(load_tokens_per_s)
    tick = fleet.tick
    warm = warmup_start if warmup_start is not None else start
    start, end, warm = (pd.Timestamp(t).tz_convert("UTC") for t in (start, end, warm))
    if not warm <= start < end:
        raise InvalidParameterError("need warmup_start <= start < end")
    if ((start - warm).total_seconds() % tick) or ((end - start).total_seconds() % tick):
        raise InvalidParameterError(f"start, end and warmup must be whole ticks of {tick} s apart")
    n_ticks = int((end - warm).total_seconds() // tick)
    res = math.gcd(step, tick)
    per_tick = tick // res
    grid = _on_grid(values, origin, step, warm, n_ticks * per_tick, res)
    tick_mean = _tick_means(grid, n_ticks, per_tick)
    observed = np.concatenate([[require_non_negative("initial", initial_tokens_per_s)], tick_mean])
    ticks = pd.date_range(warm, periods=n_ticks, freq=pd.Timedelta(seconds=tick))
    measured = ticks >= start
    cold_ticks = fleet.rules.cold_start_s // tick
    slo = (
        None
        if slo_tokens_per_s_per_replica is None
        else _slo_on_grid(slo_tokens_per_s_per_replica, warm, n_ticks * per_tick, res)
    )
    line = capacity_line(fleet, slo, len(grid))
    in_window = np.repeat(measured, per_tick)
    unobserved = float(np.isnan(grid[in_window]).mean())
    rows, timelines = [], {}
    for policy in policies:
        if isinstance(policy, InstantBound):
            replicas = bound_replicas(fleet, _bridged(grid), line)
            row, timelines[policy.name] = instant_bound(
                policy.name, replicas, line, fleet, ticks, grid, measured, per_tick, res, prices
            )
            if slo is not None:
                row[SLO_KPI] = row["time_over_capacity_share"]
            rows.append(row)
            continue
        planned, load_gpus, fallback = None, None, None
        if isinstance(policy, PlanPolicy):
            fallback = policy.fallback_at(ticks)
            load_gpus = served_load_gpus(policy, ticks)
            served = served_gpus(policy, fleet, ticks)
            planned = np.ceil(served / fleet.gpus_per_replica - 1e-9).astype(np.int64)
            initial = int(max(planned[0], fleet.min_replicas))
        else:
            spec = policy.reactive
            initial = reactive_replicas(spec, fleet, initial_tokens_per_s, 0)
        recommended, provisioned = autoscale(
            planned,
            policy.reactive,
            fleet,
            observed[:-1],
            initial,
            fallback,
            policy.fallback_behavior if isinstance(policy, PlanPolicy) else "static",
        )
        ready = ready_replicas(provisioned, initial, cold_ticks)
        gpus = provisioned * fleet.gpus_per_replica
        capacity = ready * line.reshape(n_ticks, per_tick)[:, 0]
        kpis = policy_kpis(
            grid[in_window],
            np.repeat(ready, per_tick)[in_window] * line[in_window],
            np.repeat(gpus[measured], per_tick),
            res,
            prices,
        )
        if slo is not None:
            kpis[SLO_KPI] = kpis["time_over_capacity_share"]
        rows.append(
            {"policy": policy.name, "recommended": policy.recommended, "bound": policy.bound} | kpis
        )
        frame = pd.DataFrame(
            {
                "desired_replicas": recommended,
                "provisioned_gpus": gpus,
                "ready_gpus": ready * fleet.gpus_per_replica,
                # the floor the plan trigger asked for (0 for the HPA alone)
                "plan_gpus": (
                    np.zeros(n_ticks, dtype=np.int64)
                    if planned is None
                    else planned * fleet.gpus_per_replica
                ),
                "capacity_tokens_per_s": capacity,
                "load_tokens_per_s": tick_mean,
            },
            index=ticks,
        )
        if load_gpus is not None:  # the load the plan sized for (capacity.hourly_fleet)
            frame["sized_load_gpus"] = load_gpus
        timelines[policy.name] = frame
    table = pd.DataFrame(rows).set_index("policy")
    return ReplayResult(
        table=table,
        timelines=timelines,
        resolution_s=res,
        tick_s=tick,
        start=start,
        end=end,
        unobserved_share=unobserved,
    )


def _tick_means(grid: np.ndarray, n_ticks: int, per_tick: int) -> np.ndarray:
    """The metric each tick reads: the mean of its observed steps (NaN when none was)."""
    by_tick = grid.reshape(n_ticks, per_tick)
    seen = ~np.isnan(by_tick)
    counts = seen.sum(axis=1)
    sums = np.where(seen, by_tick, 0.0).sum(axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _bridged(grid: np.ndarray) -> np.ndarray:
    """The load with each unobserved stretch bridged by a straight line between the observed
    steps either side (held flat at the ends): the instant bound's guess of what ran there."""
    seen = ~np.isnan(grid)
    if seen.all():
        return grid
    positions = np.arange(len(grid))
    return np.interp(positions, positions[seen], grid[seen])


def capacity_line(fleet: Fleet, slo: np.ndarray | None, n: int) -> np.ndarray:
    """The line each step is judged against: tokens/s one replica sustains — the SLO capacity
    at the step's mix (where the SLO can be met there: a 0 keeps the profile's figure), else
    the profile's tokens/s per GPU x GPUs per replica, at 100 %."""
    line = np.full(n, fleet.replica_tokens_per_s)
    if slo is not None:
        line = np.where(slo > 0, slo, line)
    return line


def _slo_on_grid(capacity: pd.Series, start: pd.Timestamp, n: int, res: int) -> np.ndarray:
    """The SLO capacity per replica at each of n steps of res seconds from start (each sample
    held until the next)."""
    if not isinstance(capacity.index, pd.DatetimeIndex) or capacity.index.tz is None:
        raise InvalidParameterError("the SLO capacity needs a timezone-aware (UTC) DatetimeIndex")
    values = capacity.sort_index().astype(float)
    if not np.isfinite(values.to_numpy()).all() or (values < 0).any():
        raise InvalidParameterError("the SLO capacity must be finite and >= 0 tokens/s")
    steps = pd.date_range(start, periods=n, freq=pd.Timedelta(seconds=res))
    held = values.reindex(steps, method="ffill").to_numpy(dtype=float)
    if np.isnan(held).any():
        raise InvalidParameterError(
            f"the SLO capacity starts at {values.index[0] if len(values) else 'nothing'}"
            f" but the replay starts at {start}"
        )
    return held
