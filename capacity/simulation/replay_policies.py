"""What the plan replay runs (:func:`capacity.replay`): plans that became available at a
time and were made from data before it, the Kubernetes HPA alone on the observed load, and
the instant bound."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from capacity._checks import require_fraction
from capacity.errors import InvalidParameterError
from capacity.kubernetes.keda import FALLBACK_BEHAVIORS


@dataclass(frozen=True)
class PlanDecision:
    """A plan that became available at ``at``: executed GPUs for consecutive hours from
    ``start`` (the schedule rules already applied). ``load_gpus`` (optional, one per hour):
    the load the plan sized each hour for, in GPUs at 100 % of the capacity line, before the
    utilization target, rounding and the schedule rules — what the expected fleet is
    measured against (:func:`capacity.fleet_ratios`)."""

    at: pd.Timestamp
    start: pd.Timestamp
    gpus: np.ndarray
    load_gpus: np.ndarray | None = None

    def __post_init__(self) -> None:
        gpus = np.asarray(self.gpus)
        if gpus.ndim != 1 or len(gpus) == 0 or (gpus < 1).any():
            raise InvalidParameterError("a plan decision needs hourly GPU counts >= 1")
        if self.load_gpus is not None:
            load = np.asarray(self.load_gpus, dtype=float)
            if load.shape != gpus.shape or not np.isfinite(load).all() or (load < 0).any():
                raise InvalidParameterError(
                    "a plan decision's load_gpus needs one finite figure >= 0 per hour"
                )


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
    """Plans served by the desired-replicas endpoint, with an optional reactive trigger.

    fallback_replicas: what KEDA's ``fallback`` holds once the reactive trigger's reads have
    failed long enough (the load not observed: NaN in the replayed load) — one count, or
    ``(from, replicas)`` pairs in time order (each night's published fallback); None: a failed
    read only stops scale-down, as the HPA does for a metric it cannot read.
    fallback_behavior: KEDA's ``fallback.behavior`` (``capacity.FALLBACK_BEHAVIORS``): the
    failing trigger then answers the fallback's replicas ("static"), the current count
    ("currentReplicas") or the larger of the two ("currentReplicasIfHigher")."""

    name: str
    decisions: tuple[PlanDecision, ...]
    reactive: ReactiveSpec | None = None
    recommended: bool = False
    bound: bool = False
    description: str = ""
    fallback_replicas: int | tuple[tuple[pd.Timestamp, int], ...] | None = None
    fallback_behavior: str = "static"

    def __post_init__(self) -> None:
        if self.fallback_behavior not in FALLBACK_BEHAVIORS:
            raise InvalidParameterError(
                f"fallback_behavior must be one of {', '.join(FALLBACK_BEHAVIORS)}, "
                f"got {self.fallback_behavior!r}"
            )
        fallback = self.fallback_replicas
        pairs = () if fallback is None or isinstance(fallback, int) else fallback
        counts = [fallback] if isinstance(fallback, int) else [count for _, count in pairs]
        if any(isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 1 for c in counts):
            raise InvalidParameterError("fallback_replicas must be whole replicas >= 1")
        times = [pd.Timestamp(at) for at, _ in pairs]
        if any(t.tzinfo is None for t in times) or times != sorted(times):
            raise InvalidParameterError(
                "fallback_replicas pairs need timezone-aware times in increasing order"
            )

    def fallback_at(self, ticks: pd.DatetimeIndex) -> np.ndarray | None:
        """The fallback's replicas at each tick (the first pair's before it starts), or None."""
        fallback = self.fallback_replicas
        if fallback is None:
            return None
        if isinstance(fallback, int):
            return np.full(len(ticks), fallback, dtype=np.int64)
        if not fallback:
            return None
        at = np.array([pd.Timestamp(t).value for t, _ in fallback])
        counts = np.array([int(c) for _, c in fallback], dtype=np.int64)
        owner = np.clip(np.searchsorted(at, ticks.asi8, side="right") - 1, 0, None)
        return counts[owner]


@dataclass(frozen=True)
class ReactivePolicy:
    name: str = "reactive-hpa"
    reactive: ReactiveSpec = field(default_factory=ReactiveSpec)
    recommended: bool = False
    bound: bool = False
    description: str = "Kubernetes HPA alone on the observed load"


@dataclass(frozen=True)
class InstantBound:
    """Every measured step's load on the capacity line (100 % of what a replica sustains: the
    SLO capacity at the step's mix when the replay is given one, else the profile's tokens/s),
    rounded up to whole replicas (at least the fleet's minimum) and serving at once — no cold
    start, no hold, no quota: the least GPU-hours any policy spends at 0 % time over the line."""

    name: str = "instant-bound"
    recommended: bool = False
    bound: bool = True
    description: str = (
        "each minute's load on the capacity line, rounded up to whole replicas, no cold start: "
        "the least GPU-hours at 0 % over capacity (a bound, never a choice)"
    )
