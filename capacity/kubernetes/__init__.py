"""Kubernetes output: the KEDA ScaledObject that carries a plan out (``keda``:
:func:`keda_scaled_object`, with its triggers in ``keda_triggers`` and a small YAML writer in
``kube_yaml``) and the HPA's replica rule it relies on (``hpa``: ``ceil(current x metric /
target)`` within a tolerance, and the HPA followed over time).

Imports only the sizing family (the plan and its schedule rules).
"""

from capacity.kubernetes.hpa import (
    KUBERNETES_TOLERANCE,
    hpa_average_value_replicas,
    hpa_desired_replicas,
    hpa_follow,
)
from capacity.kubernetes.keda import (
    FALLBACK_BEHAVIORS,
    KEDA_HPA_PREFIX,
    KEDA_MODES,
    ReactiveTrigger,
    ScalingBehavior,
    keda_hpa_name,
    keda_scaled_object,
)

__all__ = [
    "FALLBACK_BEHAVIORS",
    "KEDA_HPA_PREFIX",
    "KEDA_MODES",
    "KUBERNETES_TOLERANCE",
    "ReactiveTrigger",
    "ScalingBehavior",
    "hpa_average_value_replicas",
    "hpa_desired_replicas",
    "hpa_follow",
    "keda_hpa_name",
    "keda_scaled_object",
]
