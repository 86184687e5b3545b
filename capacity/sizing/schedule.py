"""The schedule a fleet can follow: hourly GPU counts under the operator's scaling rules.

From the unconstrained hourly counts (``raw_gpus``) to what a fleet executes, in one place:

- every hour has at least ``min_gpus`` (>= 1) and, when a quota is set, at most ``max_gpus``;
  hours the quota cuts are reported with the GPUs they are short;
- **scale down only after a hold, never for a dip**: a lower count takes effect at the first
  hour boundary at which the plan has asked for less for at least ``scale_down_hold_s``
  (rounded up to whole hours, k), and only if it then lasts at least k + 1 hours before the
  next rise — so with any hold a one-hour dip never drops capacity;
- **scale up one cold start ahead**: the GPUs of an hour are started ``cold_start_s`` before
  it, so they serve from its first second (and are paid for while they start).

GPU-hours and cost are those of the executed timeline (:func:`fleet_timeline`), which is also
what the generated KEDA object makes the Kubernetes HPA do: the desired-replicas endpoint
serves :func:`desired_gpus` (drops announced one hold early, because the HPA's scale-down
stabilization window — equal to the hold — delays them by exactly that), so the fleet the
HPA keeps equals the schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from capacity._checks import require_int
from capacity._words import count
from capacity.errors import InvalidParameterError
from capacity.sizing.rounding import round_up_to_multiple

SECONDS_PER_HOUR = 3600
MAX_COLD_START_S = 3600
# Kubernetes caps an HPA stabilization window at one hour.
MAX_SCALE_DOWN_HOLD_S = 3600


@dataclass(frozen=True)
class ScheduleRules:
    """The operator's scaling rules (seconds and GPU counts).

    cold_start_s: time from ordering a replica to it serving (default 300 s).
    scale_down_hold_s: sustained lower demand before capacity is released (default 1800 s,
    the 15-30 minutes operators run); also the HPA scale-down stabilization window.
    min_gpus: floor in every hour (>= 1). max_gpus: optional quota.
    """

    cold_start_s: int = 300
    scale_down_hold_s: int = 1800
    min_gpus: int = 1
    max_gpus: int | None = None

    def __post_init__(self) -> None:
        cold = require_int("cold_start_s", self.cold_start_s, minimum=0)
        hold = require_int("scale_down_hold_s", self.scale_down_hold_s, minimum=0)
        if cold > MAX_COLD_START_S:
            raise InvalidParameterError(
                f"cold_start_s must be <= {MAX_COLD_START_S}, got {self.cold_start_s!r}"
            )
        if hold > MAX_SCALE_DOWN_HOLD_S:
            raise InvalidParameterError(
                f"scale_down_hold_s must be <= {MAX_SCALE_DOWN_HOLD_S} (the longest HPA "
                f"stabilization window), got {self.scale_down_hold_s!r}"
            )
        floor = require_int("min_gpus", self.min_gpus, minimum=1)
        if self.max_gpus is not None:
            quota = require_int("max_gpus", self.max_gpus, minimum=1)
            if quota < floor:
                raise InvalidParameterError(
                    f"max_gpus={quota} is below min_gpus={floor}; raise the quota or the floor"
                )

    @property
    def hold_hours(self) -> int:
        """Whole plan hours a lower count must last before it is executed."""
        return math.ceil(self.scale_down_hold_s / SECONDS_PER_HOUR)

    def grid_s(self) -> int:
        """A time step on which every change of the executed timeline falls."""
        return math.gcd(SECONDS_PER_HOUR, self.cold_start_s, self.scale_down_hold_s)


@dataclass(frozen=True)
class Schedule:
    """Hourly counts before and after the rules, and the executed GPU-hours.

    raw_gpus: what the formula asks for each hour; gpus: what the fleet holds in the hour;
    short_gpus: raw_gpus above the quota (0 where the quota does not bind); gpu_hours: the
    integral of the executed timeline over the plan's hours, cold-start lead included.
    """

    raw_gpus: np.ndarray
    gpus: np.ndarray
    short_gpus: np.ndarray
    gpu_hours: float
    rules: ScheduleRules
    gpus_per_replica: int

    @property
    def short_hours(self) -> np.ndarray:
        """Indexes of the hours the quota leaves short."""
        return np.flatnonzero(self.short_gpus > 0)

    def timeline(self) -> tuple[np.ndarray, int]:
        """The executed fleet (GPUs) on a regular grid from the first hour, and the grid step."""
        step = self.rules.grid_s()
        return (
            fleet_timeline(
                self.gpus,
                cold_start_s=self.rules.cold_start_s,
                scale_down_hold_s=self.rules.scale_down_hold_s,
                step_s=step,
            ),
            step,
        )


def execute_schedule(
    raw_gpus: np.ndarray | list[int],
    *,
    gpus_per_replica: int = 1,
    rules: ScheduleRules = ScheduleRules(),
) -> Schedule:
    """Apply the rules to consecutive hourly counts (raw_gpus[0] is the first plan hour)."""
    per_replica = require_int("gpus_per_replica", gpus_per_replica, minimum=1)
    raw = np.asarray(raw_gpus)
    if raw.ndim != 1 or len(raw) == 0:
        raise InvalidParameterError("raw_gpus must be a non-empty 1-D sequence of counts")
    if not np.issubdtype(raw.dtype, np.number) or np.isnan(raw.astype(float)).any():
        raise InvalidParameterError("raw_gpus must be whole counts")
    if (raw < 0).any() or (raw != np.round(raw)).any():
        raise InvalidParameterError("raw_gpus must be whole counts >= 0")
    floor = int(round_up_to_multiple(np.array([rules.min_gpus]), per_replica)[0])
    need = round_up_to_multiple(np.maximum(raw.astype(np.int64), floor), per_replica)
    held = _hold(need, rules.hold_hours if rules.scale_down_hold_s else 0)
    gpus, short = held, np.zeros_like(need)
    if rules.max_gpus is not None:
        quota = (rules.max_gpus // per_replica) * per_replica
        if quota < floor:
            raise InvalidParameterError(
                f"max_gpus={rules.max_gpus} holds no whole replica of "
                f"{count(per_replica, 'GPU')} above min_gpus={rules.min_gpus}"
            )
        gpus = np.minimum(held, quota)
        short = np.clip(need - quota, 0, None)
    timeline = fleet_timeline(
        gpus,
        cold_start_s=rules.cold_start_s,
        scale_down_hold_s=rules.scale_down_hold_s,
        step_s=rules.grid_s(),
    )
    return Schedule(
        raw_gpus=need,
        gpus=gpus.astype(np.int64),
        short_gpus=short.astype(np.int64),
        gpu_hours=float(timeline.sum() * rules.grid_s() / SECONDS_PER_HOUR),
        rules=rules,
        gpus_per_replica=per_replica,
    )


def _hold(counts: np.ndarray, hours: int) -> np.ndarray:
    """Scale down only after ``hours`` hours of lower demand, and never for a dip.

    First each hour keeps the largest count of itself and the ``hours`` hours before it (the
    hold). Then every valley narrower than ``hours + 1`` hours is filled (a morphological
    closing): a lower count that would last so briefly before the next rise is not executed,
    since it would release GPUs only to order them again. Rises are never advanced.
    """
    if hours <= 0:
        return counts.copy()
    held = _trailing(counts, hours + 1, np.max)
    width = hours + 1
    # Neither end of the plan is a valley: both are padded with their own count.
    padded = np.concatenate([np.full(hours, held[0]), held, np.full(hours, held[-1])])
    dilated = _forward_max(padded, width)
    closed = _trailing(dilated, width, np.min)
    return np.maximum(closed[hours : hours + len(held)], held).astype(np.int64)


def _trailing(values: np.ndarray, width: int, reduce: Callable[..., np.ndarray]) -> np.ndarray:
    """out[i] = reduce(values[max(0, i - width + 1) : i + 1]) (numpy windows: the plans are
    short, and pandas' rolling costs more to set up than to run on them)."""
    values = np.asarray(values)
    if width <= 1 or len(values) == 0:
        return values.copy()
    padded = np.concatenate([np.full(width - 1, values[0]), values])
    return reduce(np.lib.stride_tricks.sliding_window_view(padded, width), axis=1)


def _forward_max(values: np.ndarray, width: int) -> np.ndarray:
    """out[i] = max(values[i : i + width]) (the window is cut at the end)."""
    return _trailing(np.asarray(values)[::-1], width, np.max)[::-1]


def _forward_min(values: np.ndarray, width: int) -> np.ndarray:
    return _trailing(np.asarray(values)[::-1], width, np.min)[::-1]


def planned_level(
    hourly_gpus: np.ndarray, *, cold_start_s: int, step_s: int, extra_s: int = 0
) -> np.ndarray:
    """The level the plan asks for on a grid of step_s, cold-start lead included: at time t
    the fleet holds every hour that starts before t + cold_start_s. The last hour's count is
    held beyond the plan; ``extra_s`` seconds past the end are returned too."""
    per_hour = SECONDS_PER_HOUR // step_s
    if SECONDS_PER_HOUR % step_s or cold_start_s % step_s or extra_s % step_s:
        raise InvalidParameterError(f"step_s={step_s} must divide 3600 s and the cold start")
    lead = cold_start_s // step_s
    grid = np.repeat(np.asarray(hourly_gpus, dtype=float), per_hour)
    tail = np.full(lead + extra_s // step_s, grid[-1])
    level = _forward_max(np.concatenate([grid, tail]), lead + 1)
    return level[: len(grid) + extra_s // step_s]


def desired_gpus(
    hourly_gpus: np.ndarray, *, cold_start_s: int, scale_down_hold_s: int, step_s: int
) -> np.ndarray:
    """What the desired-replicas endpoint serves (in GPUs) on a grid of step_s over the plan:
    the planned level with its drops announced up to one hold early (the minimum of the
    planned level over the next hold), so that an HPA whose scale-down stabilization window
    is the hold executes each drop on time — never before it. Rises are not advanced beyond
    the cold-start lead."""
    width = max(scale_down_hold_s // step_s, 1)
    level = planned_level(
        hourly_gpus, cold_start_s=cold_start_s, step_s=step_s, extra_s=scale_down_hold_s
    )
    served = _forward_min(level, width)
    return served[: len(level) - scale_down_hold_s // step_s]


def fleet_timeline(
    hourly_gpus: np.ndarray, *, cold_start_s: int, scale_down_hold_s: int, step_s: int
) -> np.ndarray:
    """GPUs the fleet holds on a grid of step_s over the plan's hours when an HPA (scale-up
    immediate, scale-down stabilization = the hold) follows :func:`desired_gpus`. Before the
    plan the fleet is taken to be at the first hour's count already."""
    if step_s < 1 or scale_down_hold_s % step_s:
        raise InvalidParameterError(f"step_s={step_s} must divide the hold of {scale_down_hold_s}")
    width = max(scale_down_hold_s // step_s, 1)
    served = desired_gpus(
        hourly_gpus, cold_start_s=cold_start_s, scale_down_hold_s=scale_down_hold_s, step_s=step_s
    )
    first = planned_level(hourly_gpus[:1], cold_start_s=0, step_s=step_s)[0]
    before = np.full(width - 1, max(first, served[0]))
    stabilized = _trailing(np.concatenate([before, served]), width, np.max)
    return stabilized[width - 1 :]
