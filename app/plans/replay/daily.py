"""The published expected fleet against what ran, day by day.

Each night the replay makes the plan gpucast would have published then: its 24 hourly floors
and, under band auto, the expected fleet those floors imply (that night's calibration
ratios, :mod:`app.plans.expected`). Here each such day is put beside what the replayed
deployment ran in the same 24 hours: ``daily`` rows and their summary.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

import capacity
from app.plans.replay.inputs import DAY


def daily_rows(
    nights: list[dict[str, Any]],
    timeline: pd.DataFrame,
    *,
    start: pd.Timestamp,
    end: pd.Timestamp,
    gpus_per_replica: int,
    max_gpus: int | None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """One row per night whose 24 hours lie inside [start, end) of the replay: the date, the
    floor's and the expected fleet's GPU-hours as published that night, and the GPU-hours the
    deployment ran (``timeline``: the gpucast policy's per-tick frame). Returns the rows and
    the summary (None when no night published an expected fleet)."""
    rows, errors, covered, covered_nightly, hours = [], [], 0, 0, 0
    for night in nights:
        day_start = pd.Timestamp(night["start"])
        day_end = day_start + DAY
        if day_start < start or day_end > end:
            continue
        floor = np.asarray(night["gpus"], dtype=float)[:24]
        hourly = capacity.hourly_fleet(timeline, day_start, day_end)
        executed = float(hourly["executed_gpus"].sum())
        row: dict[str, Any] = {
            "date": day_start.to_pydatetime(),
            "floor_gpu_hours": float(floor.sum()),
            "expected_gpu_hours": None,
            "expected_gpu_hours_p90": None,
            "executed_gpu_hours": executed,
        }
        fleet = _published_fleet(night, gpus_per_replica=gpus_per_replica, max_gpus=max_gpus)
        if fleet is not None and len(hourly) == len(floor):
            ratios = fleet.ratios
            row["expected_gpu_hours"] = fleet.gpu_hours
            row["expected_gpu_hours_p90"] = fleet.gpu_hours_p90
            if executed > 0:
                errors.append(abs(fleet.gpu_hours - executed) / executed)
            ran = hourly["executed_gpus"].to_numpy()
            covered_nightly += int((fleet.p90 >= ran - 1e-9).sum())
            # the P90 of the plan as served each hour (the hourly refresh's floor, what the
            # ratios were measured against): what a dashboard shows for the hour at hand
            served = capacity.expected_fleet(
                hourly["plan_gpus"].to_numpy(),
                ratios,
                gpus_per_replica=gpus_per_replica,
                max_gpus=max_gpus,
                sized_load_gpus=(
                    hourly["sized_load_gpus"].to_numpy() if "sized_load_gpus" in hourly else None
                ),
            )
            covered += int((served.p90 >= ran - 1e-9).sum())
            hours += len(ran)
        rows.append(row)
    if not errors:
        return rows, None
    return rows, {
        "days": len(errors),
        "median_abs_error_share": float(np.median(errors)),
        "worst_abs_error_share": float(np.max(errors)),
        "p90_covers_hours_share": covered / hours if hours else None,
        "p90_covers_hours_share_nightly": covered_nightly / hours if hours else None,
        "hours": hours,
        "what": (
            "each night's published expected fleet (the load it sized for x that night's "
            "calibrated ratios, never below its floor) against the GPU-hours the replayed "
            "deployment ran in the same 24 h; the "
            "hourly P90 of the plan as served each hour (nightly: as published that night) "
            "against the GPUs the fleet held in the hour"
        ),
    }


def _published_fleet(
    night: dict[str, Any], *, gpus_per_replica: int, max_gpus: int | None
) -> capacity.ExpectedFleet | None:
    """The expected fleet a night published for its first 24 hours (None: it published none)."""
    ratios = capacity.FleetRatios.from_dict((night.get("calibration") or {}).get("fleet_ratios"))
    load = night.get("sized_load_gpus")
    if ratios is None or (ratios.base == "load" and load is None):
        return None  # not measured, or measured on a sized load this night did not keep
    return capacity.expected_fleet(
        np.asarray(night["gpus"], dtype=float)[:24],
        ratios,
        gpus_per_replica=gpus_per_replica,
        max_gpus=max_gpus,
        sized_load_gpus=None if load is None else np.asarray(load, dtype=float)[:24],
    )


def nightly_fallbacks(
    nights: list[dict[str, Any]], *, gpus_per_replica: int, max_gpus: int | None
) -> tuple[tuple[pd.Timestamp, int], ...] | None:
    """Each night's ``fallback.replicas`` from its plan, in force from the night on: as
    :func:`app.plans.fallback_replicas` answers for a live plan — the expected fleet's P99
    peak in replicas, never below the floor's peak, capped by the quota; the floor's peak when
    the night published no expected fleet."""
    pairs = []
    for night in nights:
        floor = np.asarray(night["gpus"], dtype=float)[:24]
        replicas = max(math.ceil(floor.max() / gpus_per_replica - 1e-9), 1)
        fleet = _published_fleet(night, gpus_per_replica=gpus_per_replica, max_gpus=max_gpus)
        if fleet is not None:
            replicas = max(replicas, math.ceil(fleet.p99.max() / gpus_per_replica - 1e-9))
        if max_gpus is not None:
            replicas = min(replicas, max(max_gpus // gpus_per_replica, 1))
        pairs.append((pd.Timestamp(night["at"]), int(replicas)))
    return tuple(pairs) or None


__all__ = ["daily_rows", "nightly_fallbacks"]
