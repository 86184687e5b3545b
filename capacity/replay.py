"""The plan replay: run the actual load against the capacity each policy would have provided.

A policy is judged by what a fleet following it would have lived through, not by forecast
error. The replay knows two kinds of policy:

- :class:`PlanPolicy` — a sequence of :class:`PlanDecision` s, each a plan (executed hourly
  GPUs) that became available at ``at`` and was made from data before it. At every tick the
  fleet's autoscaler reads what the desired-replicas endpoint would have served from the
  freshest decision (:func:`capacity.schedule.desired_gpus`), optionally combined with a
  reactive trigger.
- :class:`ReactivePolicy` — the Kubernetes HPA alone on the observed load.

Every policy runs through the same fleet (:class:`Fleet`): an HPA with scale-up immediate and
a scale-down stabilization window equal to the hold, replicas billed from the moment they are
ordered and serving only after the cold start, the metric lagging one tick. The load is in
tokens/s on a regular time index; KPIs are measured on the finer of the load step and the
tick. Nothing is sized from the replayed load except by the ``oracle`` bound a caller builds.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from capacity._checks import require_fraction, require_int, require_non_negative, require_positive
from capacity.errors import InvalidParameterError
from capacity.kubernetes.hpa import hpa_average_value_replicas
from capacity.sizing.cost import Prices, timeline_cost_usd
from capacity.sizing.rounding import round_up_count
from capacity.sizing.schedule import ScheduleRules, desired_gpus

REPLAY_KPIS = (
    "gpu_hours",
    "cost_usd",
    "time_over_capacity_share",
    "requests_over_capacity_share",
    "time_over_85_share",
    "scale_events",
    "peak_gpus",
    "mean_utilization",
)
#: The KPI a replay adds when it is given the SLO capacity per replica (one column more).
SLO_KPI = "time_over_slo_share"


@dataclass(frozen=True)
class PlanDecision:
    """A plan that became available at ``at``: executed GPUs for consecutive hours from
    ``start`` (the schedule rules already applied)."""

    at: pd.Timestamp
    start: pd.Timestamp
    gpus: np.ndarray

    def __post_init__(self) -> None:
        gpus = np.asarray(self.gpus)
        if gpus.ndim != 1 or len(gpus) == 0 or (gpus < 1).any():
            raise InvalidParameterError("a plan decision needs hourly GPU counts >= 1")


@dataclass(frozen=True)
class ReactiveSpec:
    """The HPA rule on the observed load: desired = ceil(load / (replica capacity x target)),
    unchanged while the usage ratio is within tolerance of 1."""

    target_utilization: float = 0.75
    tolerance: float = 0.1

    def __post_init__(self) -> None:
        require_fraction("target_utilization", self.target_utilization)
        require_fraction("tolerance", self.tolerance, allow_zero=True)


@dataclass(frozen=True)
class PlanPolicy:
    name: str
    decisions: tuple[PlanDecision, ...]
    reactive: ReactiveSpec | None = None
    recommended: bool = False
    bound: bool = False
    description: str = ""


@dataclass(frozen=True)
class ReactivePolicy:
    name: str = "reactive-hpa"
    reactive: ReactiveSpec = field(default_factory=ReactiveSpec)
    recommended: bool = False
    bound: bool = False
    description: str = "Kubernetes HPA alone on the observed load"


@dataclass(frozen=True)
class InstantBound:
    """Every measured step's load at ``utilization_target``, rounded up to whole replicas
    (at least the fleet's minimum) and serving at once — no cold start, no hold, no quota:
    a true lower bound of the GPU-hours any policy spends at 0 % time over capacity. When the
    replay is given an SLO capacity, the replicas are of that capacity at each step's mix:
    the bound at 0 % time over the SLO."""

    name: str = "instant-bound"
    utilization_target: float = 0.75
    recommended: bool = False
    bound: bool = True
    description: str = (
        "each minute's load at utilization 0.75, rounded up to whole replicas, no cold start: "
        "the least GPU-hours at 0 % over capacity (a bound, never a choice)"
    )

    def __post_init__(self) -> None:
        require_fraction("utilization_target", self.utilization_target)


@dataclass(frozen=True)
class Fleet:
    """What every policy runs on: GPUs of one profile behind one HPA.

    rules: cold start (serving delay of added replicas) and hold (the HPA's scale-down
    stabilization window); rules.min_gpus / max_gpus bound the replicas. tick_s: how often the
    autoscaler decides (default: the largest step <= 60 s dividing 3600, the cold start and
    the hold); the metric it sees is the mean load of the previous tick. hpa_tolerance: the
    HPA's dead band on the plan trigger (both directions; default 0, what gpucast writes into
    the ScaledObject): the plan's replicas pass through the replica calculator's proposal
    (:func:`capacity.hpa_average_value_replicas`) first, so with Kubernetes' 10 % a fleet of
    more than 10 replicas ignores the plan's steps by one.
    """

    per_gpu_tokens_per_s: float
    gpus_per_replica: int = 1
    rules: ScheduleRules = ScheduleRules()
    tick_s: int | None = None
    hpa_tolerance: float = 0.0

    def __post_init__(self) -> None:
        require_positive("per_gpu_tokens_per_s", self.per_gpu_tokens_per_s)
        require_int("gpus_per_replica", self.gpus_per_replica, minimum=1)
        require_fraction("hpa_tolerance", self.hpa_tolerance, allow_zero=True)
        if self.tick_s is not None:
            tick = require_int("tick_s", self.tick_s, minimum=1)
            if math.gcd(tick, self.rules.grid_s()) != tick:
                raise InvalidParameterError(
                    f"tick_s={tick} must divide 3600 s, the cold start and the hold"
                )

    @property
    def tick(self) -> int:
        return self.tick_s or math.gcd(60, self.rules.grid_s())

    @property
    def replica_tokens_per_s(self) -> float:
        return self.per_gpu_tokens_per_s * self.gpus_per_replica

    @property
    def min_replicas(self) -> int:
        return max(math.ceil(self.rules.min_gpus / self.gpus_per_replica), 1)

    @property
    def max_replicas(self) -> int | None:
        if self.rules.max_gpus is None:
            return None
        return max(self.rules.max_gpus // self.gpus_per_replica, self.min_replicas)


@dataclass(frozen=True)
class ReplayResult:
    """table: one row per policy (index "policy"; columns recommended, bound, REPLAY_KPIS);
    timelines: policy -> per-tick frame (desired_replicas, provisioned_gpus, ready_gpus,
    capacity_tokens_per_s, load_tokens_per_s); resolution_s: step the KPIs were measured on."""

    table: pd.DataFrame
    timelines: dict[str, pd.DataFrame]
    resolution_s: int
    tick_s: int
    start: pd.Timestamp
    end: pd.Timestamp


def _regular_load(load: pd.Series) -> tuple[np.ndarray, pd.Timestamp, int]:
    if not isinstance(load.index, pd.DatetimeIndex) or load.index.tz is None:
        raise InvalidParameterError("load needs a timezone-aware (UTC) DatetimeIndex")
    values = np.asarray(load.to_numpy(dtype=float))
    if len(values) < 2:
        raise InvalidParameterError("load needs at least two samples")
    if not np.isfinite(values).all() or (values < 0).any():
        raise InvalidParameterError("load must be finite and >= 0 (fill gaps first)")
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


def _served_gpus(policy: PlanPolicy, fleet: Fleet, ticks: pd.DatetimeIndex) -> np.ndarray:
    """GPUs the desired-replicas endpoint serves at each tick from the freshest decision."""
    decisions = sorted(policy.decisions, key=lambda d: d.at)
    if not decisions or decisions[0].at > ticks[0]:
        raise InvalidParameterError(
            f"policy {policy.name!r} has no plan in force at the replay's start {ticks[0]}"
        )
    tick = fleet.tick
    rules = fleet.rules
    served = np.empty(len(ticks))
    at = np.array([d.at.value for d in decisions])
    owner = np.searchsorted(at, ticks.asi8, side="right") - 1
    for index in np.unique(owner):
        decision = decisions[index]
        mask = owner == index
        curve = desired_gpus(
            np.asarray(decision.gpus, dtype=float),
            cold_start_s=rules.cold_start_s,
            scale_down_hold_s=rules.scale_down_hold_s,
            step_s=tick,
        )
        offset = (ticks.asi8[mask] - decision.start.value) // (tick * 10**9)
        served[mask] = curve[np.clip(offset, 0, len(curve) - 1)]
    return served


def _reactive_replicas(spec: ReactiveSpec, fleet: Fleet, observed: float, current: int) -> int:
    """The HPA on an AverageValue metric of the offered load (tokens/s per replica)."""
    capacity = fleet.replica_tokens_per_s * spec.target_utilization
    if not capacity > 0:
        raise InvalidParameterError(
            "per-GPU tokens/s x utilization target underflows to 0; check the GPU profile"
        )
    ratio = observed / (max(current, 1) * capacity)
    if abs(ratio - 1.0) <= spec.tolerance:
        return max(current, 1)
    return max(round_up_count(observed / capacity), 1)


def _fleet(
    planned: np.ndarray | None,
    spec: ReactiveSpec | None,
    fleet: Fleet,
    observed: np.ndarray,
    initial: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Recommendations and provisioned replicas per tick (the HPA's stabilization windows)."""
    n = len(observed)
    width = max(fleet.rules.scale_down_hold_s // fleet.tick, 1)
    low, high = fleet.min_replicas, fleet.max_replicas
    recommended = np.empty(n, dtype=np.int64)
    provisioned = np.empty(n, dtype=np.int64)
    window: deque[tuple[int, int]] = deque()  # (tick, recommendation), decreasing values
    for k in range(-width + 1, 0):
        window.append((k, initial))
    current = initial
    for k in range(n):
        want = int(planned[k]) if planned is not None else 0
        if planned is not None and fleet.hpa_tolerance:
            # the plan trigger (AverageValue, target 1) as the HPA reads it: unchanged while
            # within the tolerance of the current count
            want = hpa_average_value_replicas(
                current,
                want,
                target_per_replica=1,
                scale_up_tolerance=fleet.hpa_tolerance,
                scale_down_tolerance=fleet.hpa_tolerance,
            )
        if spec is not None:
            want = max(want, _reactive_replicas(spec, fleet, float(observed[k]), current))
        want = max(want, low)
        if high is not None:
            want = min(want, high)
        recommended[k] = want
        while window and window[-1][1] <= want:
            window.pop()
        window.append((k, want))
        while window[0][0] <= k - width:
            window.popleft()
        current = window[0][1]  # the largest recommendation of the stabilization window
        provisioned[k] = current
    return recommended, provisioned


def _ready(provisioned: np.ndarray, initial: int, cold_ticks: int) -> np.ndarray:
    """Replicas serving: those provisioned through the whole last cold start (added replicas
    serve after it; removals, newest first, take effect at once)."""
    if cold_ticks == 0:
        return provisioned.copy()
    padded = np.concatenate([np.full(cold_ticks, initial), provisioned])
    rolling = pd.Series(padded).rolling(cold_ticks + 1, min_periods=1).min().to_numpy()
    return rolling[cold_ticks:].astype(np.int64)


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

    KPIs over [start, end): gpu_hours (provisioned, starting replicas included), cost_usd
    (priced with capacity.timeline_cost_usd: reserved where busy beyond the break-even share),
    time_over_capacity_share (load above 100 % of ready capacity), requests_over_capacity_share
    (load above capacity ÷ all load), time_over_85_share, scale_events, peak_gpus and
    mean_utilization (served ÷ capacity).

    slo_tokens_per_s_per_replica: what one replica sustains within a latency SLO at each
    time's prompt/completion mix (tokens/s, on a UTC index covering [warmup_start, end), held
    from each sample to the next, e.g. hourly). When given, every row gains SLO_KPI
    (time_over_slo_share): the share of steps whose load exceeds the ready replicas times
    that capacity; the other KPIs are unchanged.
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
    tick_mean = grid.reshape(n_ticks, per_tick).mean(axis=1)
    observed = np.concatenate([[require_non_negative("initial", initial_tokens_per_s)], tick_mean])
    ticks = pd.date_range(warm, periods=n_ticks, freq=pd.Timedelta(seconds=tick))
    measured = ticks >= start
    cold_ticks = fleet.rules.cold_start_s // tick
    slo = (
        None
        if slo_tokens_per_s_per_replica is None
        else _slo_on_grid(slo_tokens_per_s_per_replica, warm, n_ticks * per_tick, res)
    )
    in_window = np.repeat(measured, per_tick)
    rows, timelines = [], {}
    for policy in policies:
        if isinstance(policy, InstantBound):
            replicas = _bound_replicas(policy, fleet, grid, slo)
            row, timelines[policy.name] = _instant_bound(
                policy.name, replicas, fleet, ticks, grid, measured, per_tick, res, prices
            )
            if slo is not None:
                row[SLO_KPI] = _over_slo(grid[in_window], replicas[in_window], slo[in_window])
            rows.append(row)
            continue
        planned = None
        if isinstance(policy, PlanPolicy):
            served = _served_gpus(policy, fleet, ticks)
            planned = np.ceil(served / fleet.gpus_per_replica - 1e-9).astype(np.int64)
            initial = int(max(planned[0], fleet.min_replicas))
        else:
            spec = policy.reactive
            initial = _reactive_replicas(spec, fleet, initial_tokens_per_s, 0)
        recommended, provisioned = _fleet(planned, policy.reactive, fleet, observed[:-1], initial)
        ready = _ready(provisioned, initial, cold_ticks)
        gpus = provisioned * fleet.gpus_per_replica
        capacity = ready * fleet.replica_tokens_per_s
        kpis = _kpis(
            grid.reshape(n_ticks, per_tick)[measured].ravel(),
            np.repeat(capacity[measured], per_tick),
            np.repeat(gpus[measured], per_tick),
            res,
            prices,
        )
        if slo is not None:
            kpis[SLO_KPI] = _over_slo(
                grid[in_window], np.repeat(ready[measured], per_tick), slo[in_window]
            )
        rows.append(
            {"policy": policy.name, "recommended": policy.recommended, "bound": policy.bound} | kpis
        )
        timelines[policy.name] = pd.DataFrame(
            {
                "desired_replicas": recommended,
                "provisioned_gpus": gpus,
                "ready_gpus": ready * fleet.gpus_per_replica,
                "capacity_tokens_per_s": capacity,
                "load_tokens_per_s": tick_mean,
            },
            index=ticks,
        )
    table = pd.DataFrame(rows).set_index("policy")
    return ReplayResult(
        table=table, timelines=timelines, resolution_s=res, tick_s=tick, start=start, end=end
    )


def _instant_bound(
    name: str,
    replicas: np.ndarray,
    fleet: Fleet,
    ticks: pd.DatetimeIndex,
    grid: np.ndarray,
    measured: np.ndarray,
    per_tick: int,
    res: int,
    prices: Prices | None,
) -> tuple[dict[str, object], pd.DataFrame]:
    """The bound's KPI row and per-tick timeline (each tick at its busiest step's fleet)."""
    gpus = replicas * fleet.gpus_per_replica
    capacity = replicas * fleet.replica_tokens_per_s
    in_window = np.repeat(measured, per_tick)
    kpis = _kpis(grid[in_window], capacity[in_window], gpus[in_window], res, prices)
    by_tick = replicas.reshape(len(ticks), per_tick).max(axis=1)
    timeline = pd.DataFrame(
        {
            "desired_replicas": by_tick,
            "provisioned_gpus": by_tick * fleet.gpus_per_replica,
            "ready_gpus": by_tick * fleet.gpus_per_replica,
            "capacity_tokens_per_s": by_tick * fleet.replica_tokens_per_s,
            "load_tokens_per_s": grid.reshape(len(ticks), per_tick).mean(axis=1),
        },
        index=ticks,
    )
    return {"policy": name, "recommended": False, "bound": True} | kpis, timeline


def _bound_replicas(
    policy: InstantBound, fleet: Fleet, grid: np.ndarray, slo: np.ndarray | None = None
) -> np.ndarray:
    """The bound's replicas at each step: the load at the target in whole replicas — of the
    SLO capacity at the step's mix when an SLO applies (the one number where the SLO cannot
    be met at that mix), so the bound is the least GPU-hours at 0 % over the SLO."""
    per_replica = np.full(grid.shape, fleet.replica_tokens_per_s)
    if slo is not None:
        per_replica = np.where(slo > 0, slo, per_replica)
    per_replica = per_replica * policy.utilization_target
    return np.maximum(np.ceil(grid / per_replica - 1e-9), fleet.min_replicas).astype(np.int64)


def _kpis(
    load: np.ndarray,
    cap: np.ndarray,
    held: np.ndarray,
    step_s: int,
    prices: Prices | None,
) -> dict[str, float]:
    """KPIs of one policy over the measured steps (load, capacity and GPUs per step)."""
    total = load.sum()
    over = np.clip(load - cap, 0.0, None)
    served = load - over
    gpu_hours = float(held.sum() * step_s / 3600.0)
    cost = timeline_cost_usd(held.astype(float), step_s, prices)[0] if prices else 0.0
    changes = np.count_nonzero(np.diff(held)) if len(held) > 1 else 0
    return {
        "gpu_hours": gpu_hours,
        "cost_usd": float(cost),
        "time_over_capacity_share": float((load > cap).mean()),
        "requests_over_capacity_share": float(over.sum() / total) if total else 0.0,
        "time_over_85_share": float((load > 0.85 * cap).mean()),
        "scale_events": int(changes),
        "peak_gpus": int(held.max()),
        "mean_utilization": float(served.sum() / cap.sum()) if cap.sum() else 0.0,
    }


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


def _over_slo(load: np.ndarray, replicas: np.ndarray, per_replica: np.ndarray) -> float:
    """Share of steps whose load exceeds what the ready replicas sustain within the SLO."""
    return float((load > replicas * per_replica).mean()) if len(load) else 0.0
