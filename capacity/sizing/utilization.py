"""Fleet utilization U = Q_avg x t_infer / N_gpu and its action tier."""

from __future__ import annotations

from enum import StrEnum

from capacity._checks import require_non_negative, require_positive

LOW_BELOW = 0.30
HIGH_ABOVE = 0.70


class UtilizationTier(StrEnum):
    """What to do about a fleet's utilization."""

    LOW = "low"
    HEALTHY = "healthy"
    HIGH = "high"

    @property
    def advice(self) -> str:
        return {
            "low": "below 30 %: shrink the fleet or share the GPUs with other models",
            "healthy": "30-70 %: healthy",
            "high": "above 70 %: check scaling headroom before the next peak",
        }[self.value]


def utilization(avg_qps: float, inference_time_s: float, *, gpus: float) -> float:
    """Busy share of the fleet: U = avg_qps x inference_time_s / gpus (GPU-seconds per second).

    inference_time_s is the GPU time one request occupies a whole GPU (batching divides it).
    """
    busy = require_non_negative("avg_qps", avg_qps) * require_positive(
        "inference_time_s", inference_time_s
    )
    return busy / require_positive("gpus", gpus)


def utilization_tier(value: float) -> UtilizationTier:
    """Tier of a utilization share: < 0.30 low, 0.30-0.70 healthy, > 0.70 high."""
    share = require_non_negative("utilization", value)
    if share < LOW_BELOW:
        return UtilizationTier.LOW
    if share > HIGH_ABOVE:
        return UtilizationTier.HIGH
    return UtilizationTier.HEALTHY
