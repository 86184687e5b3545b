"""The replicas a fleet that cannot follow its plan holds, read from a plan's JSON as
app.plans.fallback_replicas defines them: the expected fleet's P99 peak in replicas, never
below the floor's peak, capped by a quota; the floor's peak when the fleet is not measured."""

from __future__ import annotations

import math
from typing import Any


def fallback_of(plan: dict[str, Any], *, max_gpus: int | None = None) -> int:
    floor_peak = max(int(plan["peak_replicas"]), 1)
    expected = plan.get("expected_fleet") or {}
    if not expected.get("measured"):
        return floor_peak
    per_replica = int(plan["gpus_per_replica"])
    replicas = max(floor_peak, math.ceil(expected["peak_gpus_p99"] / per_replica - 1e-9))
    if max_gpus is not None:
        replicas = min(replicas, max(max_gpus // per_replica, 1))
    return replicas
