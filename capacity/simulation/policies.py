"""Scaling policies for the simulator: static peak, reactive HPA, seeds' tiers, predictive, hybrid.

A policy is a frozen description; :meth:`start` returns a fresh controller holding the run's
state. At the start of every tick the simulator calls ``controller.decide(tick, observed_load,
provisioned, ready)`` with the load measured during the previous tick (metrics lag one tick) and
uses the returned replica count. Decisions look at provisioned replicas (ready + starting), so
a controller never re-orders capacity that is already on its way.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from capacity._checks import require_fraction, require_int, require_non_negative
from capacity.errors import InvalidParameterError
from capacity.kubernetes.hpa import hpa_desired_replicas
from capacity.sizing.rounding import round_up_count, round_up_counts


@dataclass(frozen=True)
class SimContext:
    """What controllers may know about a run (loads in the load's unit per second)."""

    capacity_per_replica: float
    tick_s: float
    cold_start_ticks: int
    load: np.ndarray  # per tick; controllers see it only through decide()'s observed load
    tick_index: pd.Index
    ticks_per_sample: int

    def ticks(self, seconds: float) -> int:
        return int(round(seconds / self.tick_s))

    def replicas_for(self, load: float, utilization: float) -> int:
        return round_up_count(load / (self.capacity_per_replica * utilization))

    def expand(self, samples: np.ndarray | pd.Series) -> np.ndarray:
        """Per-tick values from per-sample values (a Series is aligned on the tick index)."""
        if isinstance(samples, pd.Series) and isinstance(self.tick_index, pd.DatetimeIndex):
            ordered = samples.sort_index()
            last_sample = self.tick_index[-self.ticks_per_sample]
            try:
                covered = (
                    ordered.index[0] <= self.tick_index[0] and ordered.index[-1] >= last_sample
                )
            except TypeError as exc:
                raise InvalidParameterError(
                    "plan and load indexes must both be timezone-aware (UTC) or both naive"
                ) from exc
            if not covered:
                raise InvalidParameterError(
                    f"plan covers {ordered.index[0]} .. {ordered.index[-1]} but the load runs "
                    f"{self.tick_index[0]} .. {last_sample}"
                )
            return ordered.reindex(self.tick_index, method="ffill").to_numpy(dtype=float)
        values = np.asarray(samples, dtype=float)
        return np.repeat(values, self.ticks_per_sample)[: len(self.tick_index)]


class Controller(Protocol):
    def initial(self, load: float) -> int: ...

    def decide(self, tick: int, observed_load: float, provisioned: int, ready: int) -> int: ...


class Policy(Protocol):
    # Read-only members: the policies are frozen dataclasses.
    @property
    def name(self) -> str: ...

    @property
    def admit_up_to(self) -> float: ...

    def start(self, ctx: SimContext) -> Controller: ...


class _Fixed:
    def __init__(self, replicas: np.ndarray) -> None:
        self.replicas = replicas

    def initial(self, load: float) -> int:
        return int(self.replicas[0])

    def decide(self, tick: int, observed_load: float, provisioned: int, ready: int) -> int:
        return int(self.replicas[tick])


@dataclass(frozen=True)
class StaticPeak:
    """A constant fleet: ``replicas``, or sized for ``peak_load`` — the peak of load seen
    *before* the replay (e.g. the previous week's) — at utilization_target. The replayed load
    is the future, so it is never read."""

    utilization_target: float = 0.75
    replicas: int | None = None
    peak_load: float | None = None
    name: str = "static-peak"
    admit_up_to: float = 1.0

    def __post_init__(self) -> None:
        require_fraction("utilization_target", self.utilization_target)
        if self.replicas is not None:
            require_int("replicas", self.replicas, minimum=1)
        if self.peak_load is not None:
            require_non_negative("peak_load", self.peak_load)
        if (self.replicas is None) == (self.peak_load is None):
            raise InvalidParameterError(
                "static-peak needs exactly one of replicas or peak_load (the peak of past "
                "load, e.g. the previous 7 days); the replayed load is the future"
            )

    def start(self, ctx: SimContext) -> Controller:
        count = self.replicas
        if count is None:
            assert self.peak_load is not None
            count = ctx.replicas_for(self.peak_load, self.utilization_target)
        return _Fixed(np.full(len(ctx.load), max(count, 1)))


@dataclass(frozen=True)
class ReactiveHPA:
    """Kubernetes HPA: desired = ceil(current x utilization / target) with behavior limits.

    Scale-up takes the lowest recommendation of the last scale_up_window_s, scale-down the
    highest of the last scale_down_window_s (stabilization windows). At most max_scale_up_step /
    max_scale_down_step replicas are added / removed per step_period_s (None: unlimited), and
    no scale-down happens within cooldown_s of the previous scale event.
    """

    target_utilization: float = 0.75
    tolerance: float = 0.1
    scale_up_window_s: float = 0.0
    scale_down_window_s: float = 300.0
    max_scale_up_step: int | None = None
    max_scale_down_step: int | None = None
    step_period_s: float = 60.0
    cooldown_s: float = 0.0
    min_replicas: int = 1
    max_replicas: int | None = None
    name: str = "reactive-hpa"
    admit_up_to: float = 1.0

    def __post_init__(self) -> None:
        require_fraction("target_utilization", self.target_utilization)
        require_fraction("tolerance", self.tolerance, allow_zero=True)
        for label in ("scale_up_window_s", "scale_down_window_s", "step_period_s", "cooldown_s"):
            require_non_negative(label, getattr(self, label))
        for label in ("max_scale_up_step", "max_scale_down_step", "max_replicas"):
            if getattr(self, label) is not None:
                require_int(label, getattr(self, label), minimum=1)
        require_int("min_replicas", self.min_replicas, minimum=0)

    def start(self, ctx: SimContext) -> Controller:
        return _HPAController(self, ctx)


class _HPAController:
    def __init__(self, policy: ReactiveHPA, ctx: SimContext) -> None:
        self.p, self.ctx = policy, ctx
        self.recs: deque[tuple[int, int]] = deque()
        self.events: deque[tuple[int, int]] = deque()
        self.last_event = -(10**9)
        self.up_w = ctx.ticks(policy.scale_up_window_s)
        self.down_w = ctx.ticks(policy.scale_down_window_s)
        self.period = max(ctx.ticks(policy.step_period_s), 1)
        self.cooldown = ctx.ticks(policy.cooldown_s)

    def initial(self, load: float) -> int:
        return max(self.ctx.replicas_for(load, self.p.target_utilization), self.p.min_replicas)

    def _limit(self, tick: int, change: int) -> int:
        while self.events and self.events[0][0] <= tick - self.period:
            self.events.popleft()
        if change > 0 and self.p.max_scale_up_step is not None:
            used = sum(d for _, d in self.events if d > 0)
            return min(change, max(self.p.max_scale_up_step - used, 0))
        if change < 0 and self.p.max_scale_down_step is not None:
            used = -sum(d for _, d in self.events if d < 0)
            return -min(-change, max(self.p.max_scale_down_step - used, 0))
        return change

    def decide(self, tick: int, observed_load: float, provisioned: int, ready: int) -> int:
        current = max(provisioned, 1)
        metric = observed_load / (current * self.ctx.capacity_per_replica)
        raw = hpa_desired_replicas(
            current,
            metric,
            target_utilization=self.p.target_utilization,
            tolerance=self.p.tolerance,
            min_replicas=self.p.min_replicas,
        )
        raw = max(raw, self.p.min_replicas)
        if self.p.max_replicas is not None:
            raw = min(raw, self.p.max_replicas)
        self.recs.append((tick, raw))
        horizon = max(self.up_w, self.down_w)
        while self.recs and self.recs[0][0] < tick - horizon:
            self.recs.popleft()
        up = min(r for t, r in self.recs if t >= tick - self.up_w)
        down = max(r for t, r in self.recs if t >= tick - self.down_w)
        desired = up if up > provisioned else down if down < provisioned else provisioned
        if desired < provisioned and tick - self.last_event < self.cooldown:
            desired = provisioned
        change = self._limit(tick, desired - provisioned)
        if change:
            self.events.append((tick, change))
            self.last_event = tick
        return provisioned + change


@dataclass(frozen=True)
class Tiered:
    """The seeds' tiered response on utilization of provisioned capacity.

    >= 75 % is the warning tier (no action; the simulator reports it as hours_above_75).
    >= scale_up_at for sustain_s: add 1 replica (2 at >= big_step_at),
    then wait sustain_s again. >= emergency_at: jump at once to the replicas that bring
    utilization to recover_to, and the gateway admits at most admit_up_to of ready capacity
    (rate limiting). Below scale_down_below for scale_down_sustain_s: remove one replica.
    """

    scale_up_at: float = 0.85
    big_step_at: float = 0.90
    sustain_s: float = 120.0
    emergency_at: float = 0.95
    recover_to: float = 0.75
    scale_down_below: float = 0.50
    scale_down_sustain_s: float = 600.0
    min_replicas: int = 1
    name: str = "tiered"
    admit_up_to: float = 0.95

    def __post_init__(self) -> None:
        for label in ("scale_up_at", "big_step_at", "emergency_at", "recover_to", "admit_up_to"):
            require_fraction(label, getattr(self, label))
        require_fraction("scale_down_below", self.scale_down_below, allow_zero=True)
        if not self.scale_down_below < self.scale_up_at <= self.big_step_at <= self.emergency_at:
            raise InvalidParameterError(
                "tiers must satisfy scale_down_below < scale_up_at <= big_step_at <= emergency_at"
            )
        require_non_negative("sustain_s", self.sustain_s)
        require_non_negative("scale_down_sustain_s", self.scale_down_sustain_s)
        require_int("min_replicas", self.min_replicas, minimum=0)

    def start(self, ctx: SimContext) -> Controller:
        return _TieredController(self, ctx)


class _TieredController:
    def __init__(self, policy: Tiered, ctx: SimContext) -> None:
        self.p, self.ctx = policy, ctx
        self.hot_ticks = self.cold_ticks = 0
        self.sustain = max(ctx.ticks(policy.sustain_s), 1)
        self.down_sustain = max(ctx.ticks(policy.scale_down_sustain_s), 1)

    def initial(self, load: float) -> int:
        return max(self.ctx.replicas_for(load, self.p.recover_to), self.p.min_replicas)

    def decide(self, tick: int, observed_load: float, provisioned: int, ready: int) -> int:
        p, current = self.p, max(provisioned, 1)
        util = observed_load / (current * self.ctx.capacity_per_replica)
        if util >= p.emergency_at:
            self.hot_ticks = self.cold_ticks = 0
            return max(current, self.ctx.replicas_for(observed_load, p.recover_to))
        self.hot_ticks = self.hot_ticks + 1 if util >= p.scale_up_at else 0
        self.cold_ticks = self.cold_ticks + 1 if util < p.scale_down_below else 0
        if self.hot_ticks >= self.sustain:
            self.hot_ticks = 0
            return current + (2 if util >= p.big_step_at else 1)
        if self.cold_ticks >= self.down_sustain:
            self.cold_ticks = 0
            return max(current - 1, p.min_replicas)
        return provisioned


@dataclass(frozen=True)
class Predictive:
    """Follow a replica plan (e.g. ``plan.frame.set_index("hour")["replicas"]``) ahead of time.

    At each tick the fleet is the plan's maximum over the next lead_s seconds, so capacity for
    an hour is ordered lead_s before it starts (None: lead by the cold-start time).
    """

    plan: pd.Series | np.ndarray
    lead_s: float | None = None
    name: str = "predictive"
    admit_up_to: float = 1.0

    def __post_init__(self) -> None:
        if self.lead_s is not None:
            require_non_negative("lead_s", self.lead_s)

    def start(self, ctx: SimContext) -> Controller:
        planned = ctx.expand(self.plan)
        if len(planned) < len(ctx.load) or np.isnan(planned).any() or (planned < 0).any():
            raise InvalidParameterError(
                "predictive plan must give replicas >= 0 for every load sample "
                f"({len(ctx.load) // ctx.ticks_per_sample} samples)"
            )
        lead = ctx.cold_start_ticks if self.lead_s is None else ctx.ticks(self.lead_s)
        ahead = pd.Series(planned[::-1]).rolling(lead + 1, min_periods=1).max().to_numpy()[::-1]
        return _Fixed(round_up_counts(ahead))


@dataclass(frozen=True)
class Hybrid:
    """The larger of a predictive plan and a reactive HPA at every tick."""

    predictive: Predictive
    reactive: ReactiveHPA = ReactiveHPA()
    name: str = "hybrid"
    admit_up_to: float = 1.0

    def start(self, ctx: SimContext) -> Controller:
        return _HybridController(self.predictive.start(ctx), self.reactive.start(ctx))


class _HybridController:
    def __init__(self, predictive: Controller, reactive: Controller) -> None:
        self.predictive, self.reactive = predictive, reactive

    def initial(self, load: float) -> int:
        return max(self.predictive.initial(load), self.reactive.initial(load))

    def decide(self, tick: int, observed_load: float, provisioned: int, ready: int) -> int:
        planned = self.predictive.decide(tick, observed_load, provisioned, ready)
        reacted = self.reactive.decide(tick, observed_load, provisioned, ready)
        return max(planned, reacted)
