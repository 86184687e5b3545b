"""Cost of a GPU plan: on-demand, reserved and spot mixes, monthly projection, saving vs static."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from capacity._checks import require_fraction, require_int, require_non_negative, require_positive
from capacity._words import count
from capacity.errors import InvalidParameterError
from capacity.sizing.conversion import GPUPlan

HOURS_PER_MONTH = 720.0  # 30 days; the convention of cloud price sheets


@dataclass(frozen=True)
class Prices:
    """Price of one GPU for one hour under each purchase option (USD per GPU-hour)."""

    on_demand_usd_per_hour: float
    reserved_usd_per_hour: float | None = None
    spot_usd_per_hour: float | None = None


RESERVED_RULES = ("break-even", "baseline")


@dataclass(frozen=True)
class PlanCost:
    """Cost of a plan over its own hours, split by purchase option, and a static fleet priced
    the same way.

    Reserved GPUs are paid every hour whether busy or not; GPUs above the reserved count are
    bought on spot (spot_fraction of them) and on demand (the rest). The reserved count comes
    from ``reserved_rule``: "break-even" reserves a GPU when the executed schedule keeps it busy
    for at least the break-even share of hours (reserved price ÷ on-demand price), "baseline"
    the schedule's minimum, an int that many. GPU-hours are those of the executed timeline.
    The static comparison holds the plan's peak for every hour and is priced with the same
    rule (a constant fleet is busy 100 % of the time, so under "break-even" it is reserved
    whenever reserving is cheaper). ``compared_with`` says so in words; monthly_usd scales
    the plan's average hourly cost to a 720-hour month; hourly_usd splits total_usd by hour.
    """

    hours: float
    gpu_hours: float
    reserved_rule: str
    reserved_gpus: int
    reserved_gpu_hours: float
    on_demand_gpu_hours: float
    spot_gpu_hours: float
    reserved_usd: float
    on_demand_usd: float
    spot_usd: float
    total_usd: float
    monthly_usd: float
    static_peak_gpus: int
    static_reserved_gpus: int
    static_peak_usd: float
    saving_vs_static_usd: float
    saving_vs_static_fraction: float
    compared_with: str
    hourly_usd: tuple[float, ...] = ()


def monthly_cost_usd(
    gpus: float, usd_per_gpu_hour: float, *, hours_per_month: float = HOURS_PER_MONTH
) -> float:
    """Cost of holding `gpus` GPUs for a month: gpus x usd_per_gpu_hour x hours_per_month."""
    require_non_negative("gpus", gpus)
    require_non_negative("usd_per_gpu_hour", usd_per_gpu_hour)
    require_positive("hours_per_month", hours_per_month)
    return float(gpus) * float(usd_per_gpu_hour) * float(hours_per_month)


def _timeline(plan: GPUPlan | pd.DataFrame) -> tuple[np.ndarray, int]:
    """GPUs held on a regular grid and the grid step in seconds."""
    if isinstance(plan, GPUPlan):
        levels, step = plan.schedule().timeline()
        return np.asarray(levels, dtype=float), step
    if "gpus" not in plan.columns:
        raise InvalidParameterError("plan frame has no 'gpus' column")
    gpus = plan["gpus"].to_numpy(dtype=float)
    if len(gpus) == 0 or np.isnan(gpus).any() or (gpus < 0).any():
        raise InvalidParameterError("plan 'gpus' must be a non-empty column of counts >= 0")
    return gpus, 3600


def break_even_reserved_gpus(levels: np.ndarray, prices: Prices) -> int:
    """Reserve the k-th GPU when the fleet holds at least k GPUs for at least the break-even
    share of the time (reserved price ÷ on-demand price); 0 without a cheaper reserved price.
    ``levels``: GPUs held on a regular grid (a load-duration curve is their sorted values)."""
    reserved = prices.reserved_usd_per_hour
    if reserved is None or reserved >= prices.on_demand_usd_per_hour or len(levels) == 0:
        return 0
    share = reserved / prices.on_demand_usd_per_hour
    ordered = np.sort(np.asarray(levels, dtype=float))[::-1]  # the load-duration curve
    # ordered[i] is held for at least (i + 1) / n of the time
    index = max(int(np.ceil(share * len(ordered) - 1e-9)) - 1, 0)
    return int(np.floor(ordered[index] + 1e-9))


def _reserved_count(levels: np.ndarray, prices: Prices, rule: int | str | None) -> int:
    if rule == "break-even":
        return break_even_reserved_gpus(levels, prices)
    if rule == "baseline":
        return int(np.floor(levels.min() + 1e-9))
    if rule is None:
        return 0
    if isinstance(rule, str):
        raise InvalidParameterError(
            f"reserved_gpus must be None, 'break-even', 'baseline' or a count, got {rule!r}"
        )
    return require_int("reserved_gpus", rule, minimum=0)


def _mix_usd(
    levels: np.ndarray, step_s: int, reserved: int, prices: Prices, spot_share: float
) -> tuple[float, float, float, np.ndarray]:
    """(reserved hours above, spot hours, on-demand hours, usd per grid step) of a timeline."""
    step_h = step_s / 3600.0
    above = np.clip(levels - reserved, 0.0, None) * step_h
    per_step_usd = (
        reserved * step_h * (prices.reserved_usd_per_hour or 0.0)
        + above * spot_share * (prices.spot_usd_per_hour or 0.0)
        + above * (1 - spot_share) * prices.on_demand_usd_per_hour
    )
    return (
        float(above.sum()),
        float(above.sum() * spot_share),
        float(above.sum() * (1 - spot_share)),
        per_step_usd,
    )


def timeline_cost_usd(
    levels: np.ndarray,
    step_s: int,
    prices: Prices,
    *,
    reserved_gpus: int | str | None = "break-even",
    spot_fraction: float = 0.0,
) -> tuple[float, int]:
    """(total USD, reserved GPUs) of GPUs held on a regular grid of step_s seconds, with the
    same purchase rules as :func:`plan_cost` (default: reserved where busy beyond break-even)."""
    values = np.asarray(levels, dtype=float)
    if values.ndim != 1 or len(values) == 0 or not np.isfinite(values).all() or (values < 0).any():
        raise InvalidParameterError("levels must be a non-empty 1-D array of GPU counts >= 0")
    require_positive("step_s", step_s)
    require_positive("prices.on_demand_usd_per_hour", prices.on_demand_usd_per_hour)
    spot_share = require_fraction("spot_fraction", spot_fraction, allow_zero=True)
    if spot_share and prices.spot_usd_per_hour is None:
        raise InvalidParameterError("spot_fraction > 0 needs prices.spot_usd_per_hour")
    reserved = _reserved_count(values, prices, reserved_gpus)
    if reserved and prices.reserved_usd_per_hour is None:
        raise InvalidParameterError("reserved GPUs need prices.reserved_usd_per_hour")
    return float(_mix_usd(values, int(step_s), reserved, prices, spot_share)[3].sum()), reserved


def plan_cost(
    plan: GPUPlan | pd.DataFrame,
    prices: Prices,
    *,
    reserved_gpus: int | str | None = "break-even",
    spot_fraction: float = 0.0,
    hours_per_month: float = HOURS_PER_MONTH,
) -> PlanCost:
    """Price a plan: a GPUPlan (its executed timeline) or a frame with one row per hour and
    column ``gpus``.

    reserved_gpus: "break-even" (default; from the load-duration curve, nothing without a
    reserved price), "baseline" (the minimum), None (nothing reserved) or a count.
    spot_fraction: share in [0, 1] of the GPU-hours above the reserved count bought on spot.
    """
    levels, step_s = _timeline(plan)
    on_demand = require_positive("prices.on_demand_usd_per_hour", prices.on_demand_usd_per_hour)
    spot_share = require_fraction("spot_fraction", spot_fraction, allow_zero=True)
    reserved = _reserved_count(levels, prices, reserved_gpus)
    if reserved and prices.reserved_usd_per_hour is None:
        raise InvalidParameterError("reserved GPUs need prices.reserved_usd_per_hour")
    if spot_share and prices.spot_usd_per_hour is None:
        raise InvalidParameterError("spot_fraction > 0 needs prices.spot_usd_per_hour")
    hours = len(levels) * step_s / 3600.0
    _, spot_hours, on_demand_hours, per_step = _mix_usd(
        levels, step_s, reserved, prices, spot_share
    )
    reserved_hours = reserved * hours
    reserved_usd = reserved_hours * (prices.reserved_usd_per_hour or 0.0)
    spot_usd = spot_hours * (prices.spot_usd_per_hour or 0.0)
    on_demand_usd = on_demand_hours * on_demand
    total = reserved_usd + spot_usd + on_demand_usd
    peak = int(np.ceil(levels.max() - 1e-9))
    static_levels = np.full(len(levels), float(peak))
    static_reserved = _reserved_count(static_levels, prices, reserved_gpus)
    static = float(_mix_usd(static_levels, step_s, static_reserved, prices, spot_share)[3].sum())
    rule = (
        reserved_gpus
        if isinstance(reserved_gpus, str)
        else ("none" if reserved_gpus is None else f"{reserved} reserved")
    )
    per_hour = max(3600 // step_s, 1)
    hourly = (
        per_step.reshape(-1, per_hour).sum(axis=1) if len(per_step) % per_hour == 0 else (per_step)
    )
    return PlanCost(
        hours=float(hours),
        gpu_hours=float(levels.sum() * step_s / 3600.0),
        reserved_rule=str(rule),
        reserved_gpus=reserved,
        reserved_gpu_hours=float(reserved_hours),
        on_demand_gpu_hours=float(on_demand_hours),
        spot_gpu_hours=float(spot_hours),
        reserved_usd=float(reserved_usd),
        on_demand_usd=float(on_demand_usd),
        spot_usd=float(spot_usd),
        total_usd=float(total),
        monthly_usd=float(total / hours * require_positive("hours_per_month", hours_per_month)),
        static_peak_gpus=peak,
        static_reserved_gpus=static_reserved,
        static_peak_usd=static,
        saving_vs_static_usd=float(static - total),
        saving_vs_static_fraction=float((static - total) / static) if static else 0.0,
        compared_with=(
            f"a static fleet of {count(peak, 'GPU')} (the plan's peak) for all {hours:g} h, "
            f"priced the same way ({static_reserved} reserved, reserve rule {rule})"
        ),
        hourly_usd=tuple(float(v) for v in hourly),
    )


def _mix_inputs(
    levels: np.ndarray, stable: np.ndarray | None, prices: Prices
) -> tuple[np.ndarray, np.ndarray, float | None]:
    """(units held, units that may not run on spot, spot price or None when spot is not
    cheaper than on demand)."""
    held = np.asarray(levels, dtype=float)
    if held.ndim != 1 or not np.isfinite(held).all() or (held < 0).any():
        raise InvalidParameterError("levels must be a 1-D array of counts >= 0")
    spot_price = prices.spot_usd_per_hour
    if spot_price is None or spot_price >= prices.on_demand_usd_per_hour:
        return held, held, None
    if stable is None:
        return held, held, spot_price
    must = np.asarray(stable, dtype=float)
    if must.shape != held.shape or not np.isfinite(must).all() or (must < 0).any():
        raise InvalidParameterError("stable must hold one count >= 0 per hour of levels")
    return held, np.minimum(must, held), spot_price


def _mix(
    held: np.ndarray, must: np.ndarray, reserved: np.ndarray, prices: Prices, spot: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    on_demand = np.clip(must - reserved, 0, None)
    on_spot = np.clip(held - reserved, 0, None) - on_demand
    usd = (
        reserved * (prices.reserved_usd_per_hour or 0.0)
        + on_demand * prices.on_demand_usd_per_hour
        + on_spot * (spot or 0.0)
    )
    return on_demand, on_spot, usd


def purchase_mix(
    levels: np.ndarray, stable: np.ndarray | None, reserved: int, prices: Prices
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(on demand, spot, USD) per hour of ``levels`` units held (GPUs or nodes) with
    ``reserved`` of them reserved and paid every hour.

    ``stable``: the units per hour that may not run on spot (None: all of them). Reserved
    units hold the stable ones first; the stable rest is on demand; the elastic rest runs on
    spot at ``prices.spot_usd_per_hour`` when that is below the on-demand price (pass the
    effective spot price, interruptions included), on demand otherwise.
    """
    held, must, spot = _mix_inputs(levels, stable, prices)
    count = np.full(held.shape, float(require_int("reserved", reserved, minimum=0)))
    return _mix(held, must, count, prices, spot)


def lowest_cost_reserved(
    levels: np.ndarray, prices: Prices, *, stable: np.ndarray | None = None
) -> int:
    """The reserved count that makes the :func:`purchase_mix` of ``levels`` cheapest.

    The cost is piecewise linear in the reserved count, changing slope only at whole counts,
    so trying every count from 0 to the peak is exact. At equal cost the larger count wins
    (a unit busy exactly the break-even share is reserved, as in
    :func:`break_even_reserved_gpus`, which this equals when nothing runs on spot). Where
    the elastic units would run on spot, reserving is weighed against the spot price, not
    the on-demand one. 0 without a reserved price.
    """
    held, must, spot = _mix_inputs(levels, stable, prices)
    if prices.reserved_usd_per_hour is None or len(held) == 0:
        return 0
    counts = np.arange(float(np.ceil(held.max() - 1e-9)) + 1)[:, None]
    totals = _mix(held[None, :], must[None, :], counts, prices, spot)[2].sum(axis=1)
    best = totals.min()
    return int(counts[totals <= best + 1e-9 * max(1.0, abs(best)), 0].max())
