"""What the HPA's tolerance does to gpucast's plan on the demo fleet.

    python bench/hpa_tolerance.py [--band auto] [--step-s 15]

Builds the demo exactly as ``gpucast demo`` does (the bundled ServeGen m-small sample, every
candidate model, profile demo-small-h100) in a temporary SQLite database, takes tomorrow's
plan (all plan parameters at their defaults unless given) and the desired-replicas series the
KEDA plan trigger polls (``capacity.desired_gpus``, one value per HPA sync of ``--step-s``
seconds), then runs the HPA's algorithm on it (``capacity.hpa_follow``: the replica
calculator's proposal under the tolerance, scale-up at once, scale-down stabilization = the
hold) with Kubernetes' default tolerance 0.1 and with tolerance 0, against the fleet gpucast
models (``capacity.fleet_timeline``). Reported: minutes the fleet runs below / above the
modelled one, the largest gap, and the replica-hours of each.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
from pathlib import Path

import numpy as np

import capacity
from app import plans
from app.cli.demo import DEMO_PROFILE, DEMO_SERIES, run_demo
from app.settings import get_settings


def demo_plan(band: str) -> capacity.GPUPlan:
    with tempfile.TemporaryDirectory() as folder:
        settings = get_settings(database_url=f"sqlite:///{Path(folder) / 'demo.db'}")
        with contextlib.redirect_stdout(io.StringIO()):
            run_demo(settings)
        from app.db import open_database

        database = open_database(settings.database_url)
        with database.transaction() as session:
            plan = plans.series_plan(
                session,
                series_name=DEMO_SERIES,
                profile_name=str(DEMO_PROFILE["name"]),
                params=plans.PlanParams(band=band),
            )
        database.dispose()
    return plan.plan


def gaps(fleet: np.ndarray, modelled: np.ndarray, step_s: int) -> dict[str, float]:
    below, above = modelled - fleet, fleet - modelled
    return {
        "minutes_below": float((below > 0).sum() * step_s / 60),
        "largest_below": float(max(below.max(), 0)),
        "replica_hours_below": float(below.clip(min=0).sum() * step_s / 3600),
        "minutes_above": float((above > 0).sum() * step_s / 60),
        "replica_hours_above": float(above.clip(min=0).sum() * step_s / 3600),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--band", default="auto")
    parser.add_argument("--step-s", type=int, default=15)
    args = parser.parse_args()
    plan = demo_plan(args.band)
    rules, step = plan.rules, args.step_s
    gpus = plan.frame["gpus"].to_numpy(dtype=float)
    kwargs = {"cold_start_s": rules.cold_start_s, "scale_down_hold_s": rules.scale_down_hold_s}
    served = capacity.desired_gpus(gpus, step_s=step, **kwargs) / plan.gpus_per_replica
    modelled = capacity.fleet_timeline(gpus, step_s=step, **kwargs) / plan.gpus_per_replica
    print(
        f"demo plan ({plan.band}): {len(gpus)} h, replicas {int(modelled.min())}.."
        f"{int(modelled.max())}, hold {rules.scale_down_hold_s} s, cold start "
        f"{rules.cold_start_s} s, HPA sync every {step} s"
    )
    columns = ("min below", "largest gap", "replica-h below", "min above", "replica-h above")
    print("| tolerance | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for tolerance in (capacity.KUBERNETES_TOLERANCE, 0.0):
        fleet = capacity.hpa_follow(
            np.ceil(served - 1e-9),
            start_replicas=int(modelled[0]),
            step_s=step,
            scale_down_window_s=rules.scale_down_hold_s,
            scale_up_tolerance=tolerance,
            scale_down_tolerance=tolerance,
        )
        g = gaps(fleet, modelled, step)
        print(
            f"| {tolerance:g} | {g['minutes_below']:.0f} | {g['largest_below']:.0f} | "
            f"{g['replica_hours_below']:.2f} | {g['minutes_above']:.0f} | "
            f"{g['replica_hours_above']:.2f} |"
        )


if __name__ == "__main__":
    main()
