"""The fleet every replayed policy runs on: GPUs of one profile behind one HPA.

Tick by tick: what the desired-replicas endpoint serves from the freshest plan decision,
the reactive trigger on the observed load, the HPA's scale-down stabilization window, the
cold start before added replicas serve, and the instant bound's replicas (no cold start).

A tick whose load was not observed (NaN: the scrape target lost, the exporter down) is a
failed read of the reactive trigger, run as Kubernetes and KEDA run it: the HPA does not scale
down on a read it could not make (it still scales up to the plan), and once more than
``failure_threshold`` of KEDA's polls in a row have failed (one per polling interval from the
first failed one: :attr:`Fleet.fallback_after_ticks`) its ``fallback`` answers for the
reactive trigger, as ``fallback.behavior`` says: the fallback's replicas (static), the count
held (currentReplicas) or the larger of the two (currentReplicasIfHigher). That is what the
ScaledObject writes: ``ignoreNullValues: "false"``, so an empty query is a failure, not 0."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

from capacity._checks import require_fraction, require_int, require_positive
from capacity.errors import InvalidParameterError
from capacity.kubernetes.hpa import hpa_average_value_replicas
from capacity.simulation.replay_policies import PlanPolicy, ReactiveSpec
from capacity.sizing.rounding import round_up_count, round_up_counts
from capacity.sizing.schedule import ScheduleRules, desired_gpus


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
    failure_threshold: int = 3
    polling_interval_s: int = 30

    def __post_init__(self) -> None:
        require_positive("per_gpu_tokens_per_s", self.per_gpu_tokens_per_s)
        require_int("failure_threshold", self.failure_threshold, minimum=1)
        require_int("polling_interval_s", self.polling_interval_s, minimum=1)
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
    def fallback_after_ticks(self) -> int:
        """Failed ticks in a row by which KEDA's fallback is in force: its polls (one each
        polling interval from the first failed one) have failed more than failure_threshold
        times, the last of them failure_threshold polling intervals after the first."""
        return math.ceil(self.failure_threshold * self.polling_interval_s / self.tick) + 1

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


def served_gpus(policy: PlanPolicy, fleet: Fleet, ticks: pd.DatetimeIndex) -> np.ndarray:
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


def served_load_gpus(policy: PlanPolicy, ticks: pd.DatetimeIndex) -> np.ndarray | None:
    """The load the freshest decision sized each tick's hour for (``load_gpus``, in GPUs at
    100 % of the line), or None when a decision does not carry it."""
    decisions = sorted(policy.decisions, key=lambda d: d.at)
    if not decisions or any(d.load_gpus is None for d in decisions):
        return None
    out = np.empty(len(ticks))
    at = np.array([d.at.value for d in decisions])
    owner = np.clip(np.searchsorted(at, ticks.asi8, side="right") - 1, 0, None)
    for index in np.unique(owner):
        decision = decisions[index]
        mask = owner == index
        hour = (ticks.asi8[mask] - decision.start.value) // (3600 * 10**9)
        load = np.asarray(decision.load_gpus, dtype=float)
        out[mask] = load[np.clip(hour, 0, len(load) - 1)]
    return out


def reactive_replicas(spec: ReactiveSpec, fleet: Fleet, observed: float, current: int) -> int:
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


def autoscale(
    planned: np.ndarray | None,
    spec: ReactiveSpec | None,
    fleet: Fleet,
    observed: np.ndarray,
    initial: int,
    fallback: np.ndarray | None = None,
    fallback_behavior: str = "static",
) -> tuple[np.ndarray, np.ndarray]:
    """Recommendations and provisioned replicas per tick (the HPA's stabilization windows).
    ``observed`` NaN: the reactive trigger's read failed (module docstring); ``fallback``: the
    replicas KEDA's fallback holds at each tick (None: no fallback, the count is kept), read
    as ``fallback_behavior`` says (``capacity.FALLBACK_BEHAVIORS``)."""
    width = max(fleet.rules.scale_down_hold_s // fleet.tick, 1)
    gaps = spec is not None and not np.isfinite(observed).all()
    if (
        not gaps
        and (spec is None or spec.tolerance == 0)
        and (planned is None or not fleet.hpa_tolerance)
    ):
        return _autoscale_without_tolerance(planned, spec, fleet, observed, initial, width)
    return autoscale_stepwise(planned, spec, fleet, observed, initial, fallback, fallback_behavior)


def autoscale_stepwise(
    planned: np.ndarray | None,
    spec: ReactiveSpec | None,
    fleet: Fleet,
    observed: np.ndarray,
    initial: int,
    fallback: np.ndarray | None = None,
    fallback_behavior: str = "static",
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`autoscale` tick by tick, as the HPA runs (any tolerance, failed reads)."""
    n = len(observed)
    width = max(fleet.rules.scale_down_hold_s // fleet.tick, 1)
    low, high = fleet.min_replicas, fleet.max_replicas
    recommended = np.empty(n, dtype=np.int64)
    provisioned = np.empty(n, dtype=np.int64)
    window: deque[tuple[int, int]] = deque()  # (tick, recommendation), decreasing values
    for k in range(-width + 1, 0):
        window.append((k, initial))
    current = initial
    failures = 0  # the reactive trigger's failed reads in a row
    for k in range(n):
        failed = spec is not None and not math.isfinite(float(observed[k]))
        failures = failures + 1 if failed else 0
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
        if failed and fallback is not None and failures >= fleet.fallback_after_ticks:
            # KEDA answers the fallback for the trigger (pkg/fallback doFallback)
            want = max(want, _fallback_answer(fallback_behavior, int(fallback[k]), current))
        elif failed:
            # a metric the HPA could not read: it scales up to what the others ask, never down
            asked = max(want, low) if high is None else min(max(want, low), high)
            if planned is None or asked < current:
                recommended[k] = provisioned[k] = current
                continue
        elif spec is not None:
            want = max(want, reactive_replicas(spec, fleet, float(observed[k]), current))
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


def _fallback_answer(behavior: str, replicas: int, current: int) -> int:
    """The replicas KEDA's fallback answers for a failing trigger, by ``fallback.behavior``."""
    if behavior == "currentReplicas":
        return current
    if behavior == "currentReplicasIfHigher":
        return max(current, replicas)
    return replicas


def _autoscale_without_tolerance(
    planned: np.ndarray | None,
    spec: ReactiveSpec | None,
    fleet: Fleet,
    observed: np.ndarray,
    initial: int,
    width: int,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`autoscale` when no trigger has a dead band: each recommendation no longer
    depends on the current count, so the whole run is one array expression — the larger of
    the triggers within min/max, and the largest recommendation of the stabilization window
    (the ``width`` ticks up to each, the initial count before the first)."""
    want = np.zeros(len(observed), dtype=np.int64)
    if planned is not None:
        want = np.asarray(planned, dtype=np.int64).copy()
    if spec is not None:
        per_replica = fleet.replica_tokens_per_s * spec.target_utilization
        if not per_replica > 0:
            raise InvalidParameterError(
                "per-GPU tokens/s x utilization target underflows to 0; check the GPU profile"
            )
        reactive = np.maximum(round_up_counts(np.asarray(observed) / per_replica), 1)
        want = np.maximum(want, reactive)
    want = np.maximum(want, fleet.min_replicas)
    if fleet.max_replicas is not None:
        want = np.minimum(want, fleet.max_replicas)
    padded = np.concatenate([np.full(width - 1, initial, dtype=np.int64), want])
    provisioned = np.lib.stride_tricks.sliding_window_view(padded, width).max(axis=1)
    return want, provisioned.astype(np.int64)


def ready_replicas(provisioned: np.ndarray, initial: int, cold_ticks: int) -> np.ndarray:
    """Replicas serving: those provisioned through the whole last cold start (added replicas
    serve after it; removals, newest first, take effect at once)."""
    if cold_ticks == 0:
        return provisioned.copy()
    padded = np.concatenate([np.full(cold_ticks, initial), provisioned])
    rolling = pd.Series(padded).rolling(cold_ticks + 1, min_periods=1).min().to_numpy()
    return rolling[cold_ticks:].astype(np.int64)


def bound_replicas(fleet: Fleet, grid: np.ndarray, line: np.ndarray) -> np.ndarray:
    """The bound's replicas at each step: the load on the capacity line (tokens/s one replica
    sustains at that step) in whole replicas, at least the fleet's minimum."""
    return np.maximum(np.ceil(grid / line - 1e-9), fleet.min_replicas).astype(np.int64)
