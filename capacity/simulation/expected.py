"""The fleet a deployment is expected to run, from the plan KEDA polls.

The published plan is the floor under the deployment's other rules: the reactive trigger
adds replicas when load runs above the floor, the scale-down hold keeps them for a while,
the cold start bills them before they serve. What runs is therefore at least the floor and
usually more. The ratio of the two is measured where both are known — a replay of the
recent past, the very one band auto calibrates on — hour by hour: the GPUs the replayed
fleet held (mean over the hour, billed ones included) ÷ the load the plan sized that hour for
(``sized_load_gpus``: the forecast's busy-minute load in GPUs at 100 % of the line, before
the utilization target, whole replicas, the minimum and the hold). Its quantiles turn each
hour of a new plan into the expected fleet (P50, P90, P99, never below the floor), and its
pooled value (replayed GPU-hours ÷ sized GPU-hours) into the expected GPU-hours.

The base is the sized load, not the floor, because the floor loses the forecast's shape
where it sits on the minimum or is rounded to few replicas (a floor of one GPU all day says
nothing of tomorrow's peak); ratios measured on a replay without the sized load (and
ratios stored before it was kept) use the floor (``base`` "floor").

Pure: arrays and frames in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from capacity.errors import InvalidParameterError

#: Hours a ratio set needs before it is used (a day of hours).
MIN_RATIO_HOURS = 24
#: What a ratio divides the replayed fleet by: the load the plan sized for, or its floor.
BASES = ("load", "floor")
QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class FleetRatios:
    """Replayed fleet ÷ the plan's sized load (``base`` "load") or its floor ("floor"), per
    hour, over ``hours`` replayed hours: the quantiles ``p50``, ``p90``, ``p99`` of the hourly
    ratio and ``total`` (replayed GPU-hours ÷ base GPU-hours, what the expected GPU-hours
    use). On the floor every ratio is at least 1 (what runs is never below the floor KEDA
    holds); on the load the expected fleet is held at or above the floor instead."""

    p50: float
    p90: float
    p99: float
    total: float
    hours: int
    # the share of the replayed ticks in which the floor alone set the fleet (the plan
    # trigger bound); None when not measured
    plan_binds_share: float | None = None
    base: str = "floor"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> FleetRatios | None:
        if not data:
            return None
        try:
            values = {k: data[k] for k in ("p50", "p90", "p99", "total", "hours")}
            base = data.get("base", "floor")
            if base not in BASES:
                return None
            return cls(**values, plan_binds_share=data.get("plan_binds_share"), base=base)
        except (KeyError, TypeError):
            return None


def hourly_fleet(timeline: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    """Per whole hour of [start, end) of a replay timeline (columns ``plan_gpus`` and
    ``provisioned_gpus`` per tick, and ``sized_load_gpus`` when the plan carried it): the
    plan's floor, the GPUs the fleet held and the sized load, each the mean over the hour's
    ticks. Hours only partly inside the window are left out."""
    for column in ("plan_gpus", "provisioned_gpus"):
        if column not in timeline.columns:
            raise InvalidParameterError(f"the timeline has no {column} column")
    window = timeline[(timeline.index >= start) & (timeline.index < end)]
    if window.empty:
        return pd.DataFrame(columns=["plan_gpus", "executed_gpus"], dtype=float)
    hours = window.index.floor("h")
    grouped = window.groupby(hours)
    frame = pd.DataFrame(
        {
            "plan_gpus": grouped["plan_gpus"].mean(),
            "executed_gpus": grouped["provisioned_gpus"].mean(),
            "plan_binds": (window["plan_gpus"] >= window["provisioned_gpus"]).groupby(hours).mean(),
            "ticks": grouped.size(),
        }
    )
    columns = ["plan_gpus", "executed_gpus", "plan_binds"]
    if "sized_load_gpus" in window.columns:
        frame["sized_load_gpus"] = grouped["sized_load_gpus"].mean()
        columns.append("sized_load_gpus")
    full = frame["ticks"] == frame["ticks"].max()
    first_whole = hours[0] == window.index[0]
    if not first_whole and len(frame):
        full.iloc[0] = False
    return frame.loc[full, columns].astype(float)


def fleet_ratios(hourly: pd.DataFrame) -> FleetRatios | None:
    """The ratios of :func:`hourly_fleet`'s hours to the sized load when every hour has one
    (else to the floor), over the hours whose base is above 0; None with fewer than
    MIN_RATIO_HOURS of them."""
    on_load = "sized_load_gpus" in hourly and bool(hourly["sized_load_gpus"].notna().all())
    base = hourly["sized_load_gpus" if on_load else "plan_gpus"].to_numpy(dtype=float)
    executed = hourly["executed_gpus"].to_numpy(dtype=float)
    usable = base > 0
    if usable.sum() < MIN_RATIO_HOURS:
        return None
    ratio = executed[usable] / base[usable]
    total = float(executed[usable].sum() / base[usable].sum())
    if not on_load:
        ratio, total = np.maximum(ratio, 1.0), max(total, 1.0)
    p50, p90, p99 = (float(np.quantile(ratio, q)) for q in QUANTILES)
    binds = float(hourly["plan_binds"].mean()) if "plan_binds" in hourly else None
    return FleetRatios(
        p50=p50,
        p90=p90,
        p99=p99,
        total=total,
        hours=int(usable.sum()),
        plan_binds_share=binds,
        base="load" if on_load else "floor",
    )


def recent_and_window_ratios(hourly: pd.DataFrame, recent_hours: int) -> FleetRatios | None:
    """The ratios over all of ``hourly``, with their upper quantiles (P90, P99) the larger of
    the whole window's and its last ``recent_hours`` hours' (the regime the next day most
    resembles); the median and the pooled total stay the whole window's."""
    whole = fleet_ratios(hourly)
    recent = fleet_ratios(hourly.iloc[-recent_hours:])
    if whole is None or recent is None:
        return whole
    return FleetRatios(
        p50=whole.p50,
        p90=max(whole.p90, recent.p90),
        p99=max(whole.p99, recent.p99),
        total=whole.total,
        hours=whole.hours,
        plan_binds_share=whole.plan_binds_share,
        base=whole.base,
    )


@dataclass(frozen=True)
class ExpectedFleet:
    """The fleet expected in each hour of a plan: whole GPUs (replica multiples) at P50, P90
    and P99, and the expected GPU-hours (``gpus`` × the pooled ratio: an unbiased total, as
    the sum of P50 hours is not)."""

    p50: np.ndarray
    p90: np.ndarray
    p99: np.ndarray
    mean: np.ndarray  # fractional GPUs per hour, summing to gpu_hours
    ratios: FleetRatios

    @property
    def gpu_hours(self) -> float:
        return float(self.mean.sum())

    @property
    def gpu_hours_p90(self) -> float:
        return float(self.p90.sum())


def expected_fleet(
    plan_gpus: np.ndarray | pd.Series,
    ratios: FleetRatios,
    *,
    gpus_per_replica: int = 1,
    max_gpus: int | None = None,
    sized_load_gpus: np.ndarray | pd.Series | None = None,
) -> ExpectedFleet:
    """Each hour of a plan times the ratios — its sized load (``sized_load_gpus``, needed
    when ``ratios.base`` is "load") or its floor (``plan_gpus``) — in whole replicas (P50 to
    the nearest, P90 and P99 up), never below the floor nor above ``max_gpus``."""
    floor = np.asarray(plan_gpus, dtype=float)
    if (floor < 0).any() or not np.isfinite(floor).all():
        raise InvalidParameterError("plan_gpus must be finite and >= 0")
    base = floor
    if ratios.base == "load":
        if sized_load_gpus is None:
            raise InvalidParameterError("ratios on the sized load need sized_load_gpus")
        base = np.asarray(sized_load_gpus, dtype=float)
        if base.shape != floor.shape or (base < 0).any() or not np.isfinite(base).all():
            raise InvalidParameterError("sized_load_gpus needs one finite figure >= 0 per hour")
    if gpus_per_replica < 1:
        raise InvalidParameterError("gpus_per_replica must be >= 1")
    size = float(gpus_per_replica)

    def whole(values: np.ndarray, *, up: bool) -> np.ndarray:
        replicas = np.ceil(values / size - 1e-9) if up else np.round(values / size)
        gpus = np.maximum(replicas * size, floor)
        if max_gpus is not None:
            gpus = np.minimum(gpus, max(float(max_gpus), 0.0))
            gpus = np.maximum(gpus, np.minimum(floor, float(max_gpus)))
        return gpus.astype(np.int64)

    mean = np.maximum(base * ratios.total, floor)
    if max_gpus is not None:
        mean = np.minimum(mean, np.maximum(float(max_gpus), floor))
    return ExpectedFleet(
        p50=whole(base * ratios.p50, up=False),
        p90=whole(base * ratios.p90, up=True),
        p99=whole(base * ratios.p99, up=True),
        mean=mean,
        ratios=ratios,
    )


#: Below this share of replayed time with the floor binding, the plan says the reactive
#: trigger carries the service.
CARRIED_BELOW = 0.25


def ratio_note(ratios: FleetRatios, forecast_adds: str | None = None) -> str:
    """One line on what the ratios say (how much the fleet runs above the floor, and whether
    the floor or the reactive trigger sets it). ``forecast_adds``: what the plan's floor adds
    to the reactive trigger alone, said where the reactive trigger carries the service."""
    above = ratios.total - 1.0
    if ratios.base == "floor" and math.isclose(above, 0.0, abs_tol=0.005):
        return "the replayed fleet ran at the plan's floor: the plan is the fleet"
    what = (
        "the load the plan sized for (in GPUs at full load)"
        if ratios.base == "load"
        else ("the plan's floor")
    )
    note = (
        f"the replayed fleet ran {ratios.total:.2f}x {what} over "
        f"{ratios.hours} hours (P90 hour {ratios.p90:.2f}x): the reactive trigger and the "
        "scale-down hold add what the floor leaves out"
    )
    binds = ratios.plan_binds_share
    if binds is not None and binds < CARRIED_BELOW:
        note += (
            f"; carried by the reactive trigger at this cold start: the floor set the fleet "
            f"in only {binds:.0%} of the replayed time, "
            + (
                f"the forecast adds {forecast_adds}"
                if forecast_adds
                else "the forecast adds the floor under it"
            )
        )
    return note


__all__ = [
    "MIN_RATIO_HOURS",
    "ExpectedFleet",
    "FleetRatios",
    "expected_fleet",
    "fleet_ratios",
    "hourly_fleet",
    "ratio_note",
    "recent_and_window_ratios",
]
