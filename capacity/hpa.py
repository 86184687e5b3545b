"""The Kubernetes HorizontalPodAutoscaler replica rule."""

from __future__ import annotations

from capacity._checks import require_fraction, require_int, require_non_negative, require_positive
from capacity.rounding import round_up_count


def hpa_desired_replicas(
    current_replicas: int,
    current_utilization: float,
    *,
    target_utilization: float,
    tolerance: float = 0.1,
    min_replicas: int = 1,
) -> int:
    """desired = ceil(current x metric / target); unchanged while |metric/target - 1| <= tolerance.

    current_utilization and target_utilization are shares of capacity (e.g. 0.95 and 0.8).
    Kubernetes' default tolerance is 0.1. The answer is never below min_replicas (default 1,
    like the HPA's own minReplicas): a zero metric does not scale a serving fleet to zero.
    """
    current = require_int("current_replicas", current_replicas, minimum=0)
    metric = require_non_negative("current_utilization", current_utilization)
    target = require_positive("target_utilization", target_utilization)
    require_fraction("tolerance", tolerance, allow_zero=True)
    floor = require_int("min_replicas", min_replicas, minimum=0)
    ratio = metric / target
    if abs(ratio - 1.0) <= tolerance:
        return max(current, floor)
    return max(round_up_count(current * ratio), floor)
