"""The expected fleet of a plan: what the deployment will run, beside the floor KEDA polls.

The plan's hours (``gpus``) are the floor the plan trigger holds. What runs is that floor
plus what the reactive trigger, the scale-down hold and the cold start add: band auto's
calibration replays the deployment over the last days and measures, hour by hour, the fleet
that ran against the load the plan sized each hour for (:class:`capacity.FleetRatios`); an
explicit band's replay measures them the same way, at its own sizing (app.plans.band_fleet).
Applied to the plan ahead, those ratios give the expected fleet per hour at P50, P90 and
P99, its GPU-hours and its cost — the answer to "how many GPUs tomorrow, and what will it cost".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

import capacity
from app.plans.calibration import BandChoice
from app.plans.params import PlanParams

#: What the plan's own ``gpus`` are, in every response that shows both.
FLOOR_WORDS = "the floor KEDA's plan trigger holds (what /desired-replicas answers)"
EXPECTED_WORDS = (
    "the fleet the deployment is expected to run: the floor plus what the reactive trigger, "
    "the scale-down hold and the cold start added over the plan's band replayed on the last days"
)


def sized_load_gpus(plan: capacity.GPUPlan) -> Any:
    """The load each hour of ``plan`` was sized for, in GPUs at 100 % of its capacity line
    (sized tokens/s ÷ the hour's per-GPU tokens/s = peak utilization × GPUs): the base band
    auto's ratios are measured on (:func:`capacity.fleet_ratios`)."""
    frame = plan.frame
    return (frame["peak_utilization"] * frame["gpus"]).to_numpy(dtype=float)


@dataclass(frozen=True)
class Expected:
    """The expected fleet of one plan (None fleet: not measured, ``note`` says why)."""

    fleet: capacity.ExpectedFleet | None
    cost: capacity.PlanCost | None
    note: str

    @classmethod
    def of(
        cls,
        plan: capacity.GPUPlan,
        choice: BandChoice | None,
        params: PlanParams,
        prices: capacity.Prices | None,
    ) -> Expected:
        if choice is None:
            return cls(
                None,
                None,
                f"not measured yet (band {params.band} is replayed by the first plan read "
                "or the nightly run); the GPUs shown are the floor",
            )
        ratios = choice.fleet_ratios
        if ratios is None:
            what = "band auto is not calibrated" if params.band == "auto" else "not replayed"
            why = what if not choice.calibrated else "too few hours"
            return cls(None, None, f"not measured ({why}); the GPUs shown are the floor")
        fleet = capacity.expected_fleet(
            plan.frame["gpus"].to_numpy(),
            ratios,
            gpus_per_replica=plan.gpus_per_replica,
            max_gpus=params.max_gpus,
            sized_load_gpus=sized_load_gpus(plan),
        )
        cost = None
        if prices is not None:
            cost = capacity.plan_cost(pd.DataFrame({"gpus": fleet.mean}), prices)
        return cls(fleet, cost, capacity.ratio_note(ratios, choice.forecast_adds()))

    def peak(self, level: str = "p90") -> int | None:
        if self.fleet is None:
            return None
        return int(getattr(self.fleet, level).max()) if len(self.fleet.mean) else 0

    def hour(self, row: int) -> dict[str, int | None]:
        if self.fleet is None:
            return {"expected_gpus_p50": None, "expected_gpus_p90": None}
        return {
            "expected_gpus_p50": int(self.fleet.p50[row]),
            "expected_gpus_p90": int(self.fleet.p90[row]),
        }

    def as_dict(self, cost_dict: Any) -> dict[str, Any]:
        """The response's ``expected_fleet`` object."""
        fleet = self.fleet
        if fleet is None:
            return {"measured": False, "note": self.note, "what": EXPECTED_WORDS}
        return {
            "measured": True,
            "what": EXPECTED_WORDS,
            "note": self.note,
            "gpu_hours": fleet.gpu_hours,
            "gpu_hours_p90": fleet.gpu_hours_p90,
            "peak_gpus_p50": self.peak("p50"),
            "peak_gpus_p90": self.peak("p90"),
            "peak_gpus_p99": self.peak("p99"),
            "ratios": fleet.ratios.as_dict(),
            "cost": cost_dict(self.cost),
        }


__all__ = ["EXPECTED_WORDS", "FLOOR_WORDS", "Expected"]
