"""Cost of a GPU plan: on-demand, reserved and spot mixes, monthly projection, saving vs static."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from capacity._checks import require_fraction, require_int, require_non_negative, require_positive
from capacity.conversion import GPUPlan
from capacity.errors import InvalidParameterError

HOURS_PER_MONTH = 720.0  # 30 days; the convention of cloud price sheets


@dataclass(frozen=True)
class Prices:
    """Price of one GPU for one hour under each purchase option (USD per GPU-hour)."""

    on_demand_usd_per_hour: float
    reserved_usd_per_hour: float | None = None
    spot_usd_per_hour: float | None = None


@dataclass(frozen=True)
class PlanCost:
    """Cost of a plan over its own hours, split by purchase option.

    Reserved GPUs are paid every hour whether busy or not; GPUs above the reserved baseline are
    bought on spot (spot_fraction of them) and on demand (the rest). monthly_usd scales the
    plan's average hourly cost to a 720-hour month. The static baseline is the plan's peak GPUs
    held for every hour at the on-demand price.
    """

    hours: float
    gpu_hours: float
    reserved_gpus: int
    reserved_gpu_hours: float
    on_demand_gpu_hours: float
    spot_gpu_hours: float
    reserved_usd: float
    on_demand_usd: float
    spot_usd: float
    total_usd: float
    monthly_usd: float
    static_peak_usd: float
    saving_vs_static_usd: float
    saving_vs_static_fraction: float


def monthly_cost_usd(
    gpus: float, usd_per_gpu_hour: float, *, hours_per_month: float = HOURS_PER_MONTH
) -> float:
    """Cost of holding `gpus` GPUs for a month: gpus x usd_per_gpu_hour x hours_per_month."""
    require_non_negative("gpus", gpus)
    require_non_negative("usd_per_gpu_hour", usd_per_gpu_hour)
    require_positive("hours_per_month", hours_per_month)
    return float(gpus) * float(usd_per_gpu_hour) * float(hours_per_month)


def _hourly_gpus(plan: GPUPlan | pd.DataFrame) -> np.ndarray:
    frame = plan.frame if isinstance(plan, GPUPlan) else plan
    if "gpus" not in frame.columns:
        raise InvalidParameterError("plan frame has no 'gpus' column")
    gpus = frame["gpus"].to_numpy(dtype=float)
    if len(gpus) == 0 or np.isnan(gpus).any() or (gpus < 0).any():
        raise InvalidParameterError("plan 'gpus' must be a non-empty column of counts >= 0")
    return gpus


def plan_cost(
    plan: GPUPlan | pd.DataFrame,
    prices: Prices,
    *,
    reserved_gpus: int | str | None = None,
    spot_fraction: float = 0.0,
    hours_per_month: float = HOURS_PER_MONTH,
) -> PlanCost:
    """Price an hourly plan (one row = one hour, column ``gpus``).

    reserved_gpus: None buys nothing reserved; "baseline" reserves the plan's minimum hourly
    GPUs (always busy, so reservation never wastes money); an int reserves that many.
    spot_fraction: share in [0, 1] of the GPU-hours above the reserved baseline bought on spot.
    """
    gpus = _hourly_gpus(plan)
    on_demand = require_positive("prices.on_demand_usd_per_hour", prices.on_demand_usd_per_hour)
    spot_share = require_fraction("spot_fraction", spot_fraction, allow_zero=True)
    if reserved_gpus == "baseline":
        reserved = int(gpus.min())
    elif reserved_gpus is None:
        reserved = 0
    elif isinstance(reserved_gpus, str):
        raise InvalidParameterError(
            f"reserved_gpus must be None, 'baseline' or a count, got {reserved_gpus!r}"
        )
    else:
        reserved = require_int("reserved_gpus", reserved_gpus, minimum=0)
    if reserved and prices.reserved_usd_per_hour is None:
        raise InvalidParameterError("reserved GPUs need prices.reserved_usd_per_hour")
    if spot_share and prices.spot_usd_per_hour is None:
        raise InvalidParameterError("spot_fraction > 0 needs prices.spot_usd_per_hour")
    hours = float(len(gpus))
    above = np.clip(gpus - reserved, 0.0, None).sum()
    spot_hours = above * spot_share
    on_demand_hours = above - spot_hours
    reserved_hours = reserved * hours
    reserved_usd = reserved_hours * (prices.reserved_usd_per_hour or 0.0)
    spot_usd = spot_hours * (prices.spot_usd_per_hour or 0.0)
    on_demand_usd = on_demand_hours * on_demand
    total = reserved_usd + spot_usd + on_demand_usd
    static = gpus.max() * hours * on_demand
    return PlanCost(
        hours=hours,
        gpu_hours=float(gpus.sum()),
        reserved_gpus=reserved,
        reserved_gpu_hours=float(reserved_hours),
        on_demand_gpu_hours=float(on_demand_hours),
        spot_gpu_hours=float(spot_hours),
        reserved_usd=float(reserved_usd),
        on_demand_usd=float(on_demand_usd),
        spot_usd=float(spot_usd),
        total_usd=float(total),
        monthly_usd=float(total / hours * require_positive("hours_per_month", hours_per_month)),
        static_peak_usd=float(static),
        saving_vs_static_usd=float(static - total),
        saving_vs_static_fraction=float((static - total) / static) if static else 0.0,
    )
