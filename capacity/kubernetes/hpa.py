"""The Kubernetes HorizontalPodAutoscaler replica rule."""

from __future__ import annotations

import numpy as np

from capacity._checks import require_fraction, require_int, require_non_negative, require_positive
from capacity.errors import InvalidParameterError
from capacity.sizing.rounding import round_up_count


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


# kube-controller-manager's --horizontal-pod-autoscaler-tolerance default, used in both
# directions unless the HPA's behavior sets its own (HPAScalingRules.tolerance).
KUBERNETES_TOLERANCE = 0.1
INT32_MAX = 2**31 - 1


def hpa_average_value_replicas(
    current_replicas: int,
    metric_total: float,
    *,
    target_per_replica: float,
    scale_up_tolerance: float = KUBERNETES_TOLERANCE,
    scale_down_tolerance: float = KUBERNETES_TOLERANCE,
) -> int:
    """The replicas the HPA proposes for one AverageValue metric — the metric type of every
    KEDA trigger gpucast writes (Kubernetes ``GetExternalPerPodMetricReplicas``).

    Both values are read in thousandths, as the HPA receives them (KEDA sends milli-unit
    quantities): ratio = total / (target × current). While
    ``1 - scale_down_tolerance <= ratio <= 1 + scale_up_tolerance`` the HPA keeps the current
    count; otherwise it proposes ceil(total / target). With the default 10 % a fleet of 10 or
    more replicas never moves by one: gpucast answering 23 keeps 22 running. min/max replicas,
    scaling policies and stabilization windows apply after this (and across metrics, the
    largest proposal wins).
    """
    current = require_int("current_replicas", current_replicas, minimum=0)
    total_milli = round(require_non_negative("metric_total", metric_total) * 1000)
    target_milli = round(require_positive("target_per_replica", target_per_replica) * 1000)
    up = require_non_negative("scale_up_tolerance", scale_up_tolerance)
    down = require_non_negative("scale_down_tolerance", scale_down_tolerance)
    if target_milli == 0:
        raise InvalidParameterError("target_per_replica is below a thousandth")
    if current > 0:
        ratio = total_milli / (target_milli * current)
        if 1.0 - down <= ratio <= 1.0 + up:
            return current
    return min(-(-total_milli // target_milli), INT32_MAX)  # Kubernetes' own ceiling


def hpa_follow(
    desired_replicas: np.ndarray,
    *,
    start_replicas: int,
    step_s: int = 15,
    scale_down_window_s: int = 300,
    scale_up_tolerance: float = KUBERNETES_TOLERANCE,
    scale_down_tolerance: float = KUBERNETES_TOLERANCE,
) -> np.ndarray:
    """Replicas an HPA holds at each sync (every ``step_s`` seconds, 15 s by default) when
    one AverageValue metric with target 1 reports ``desired_replicas`` — gpucast's plan
    trigger — in the order the controller applies its steps: the replica calculator's proposal
    under the tolerance (:func:`hpa_average_value_replicas`), scale-up at once (no up
    stabilization, at most doubling or +4 per sync: the generated policies), scale-down to the
    highest proposal of the last ``scale_down_window_s`` (the stabilization window).

    Returns one count per entry of ``desired_replicas``. With tolerance 0 the fleet holds
    exactly the desired count (after the window on the way down); with the default 10 % it
    may stay up to 10 % below or above it.
    """
    desired = np.asarray(desired_replicas, dtype=float)
    step = require_int("step_s", step_s, minimum=1)
    window = require_int("scale_down_window_s", scale_down_window_s, minimum=0) // step
    current = require_int("start_replicas", start_replicas, minimum=1)
    proposals: list[int] = []
    held = np.empty(len(desired), dtype=np.int64)
    for index, wanted in enumerate(desired):
        proposal = hpa_average_value_replicas(
            current,
            float(wanted),
            target_per_replica=1,
            scale_up_tolerance=scale_up_tolerance,
            scale_down_tolerance=scale_down_tolerance,
        )
        proposals.append(proposal)
        if proposal > current:
            current = min(proposal, max(2 * current, current + 4))
        else:
            # proposals strictly newer than the window's start (Kubernetes: After(cutoff))
            current = max(proposals[max(0, index - window + 1) :] + [proposal])
            current = min(current, held[index - 1] if index else current)
        held[index] = current
    return held
