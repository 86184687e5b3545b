"""One hour the running fleet served (:class:`ProductionHour`): the evidence the SLO model
learns from (:mod:`capacity.measured.slo_fleet`) and bounds its answers with
(:mod:`capacity.measured.slo_fleet_bounds`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from capacity.measured.slo import SloTarget


@dataclass(frozen=True)
class ProductionHour:
    """One hour the fleet served: load per replica, its mix per request, p95s as served, and
    how many hours ago it was (``age_hours``, for ageing out)."""

    requests_per_s_per_replica: float
    prompt_tokens: float
    completion_tokens: float
    ttft_p95_s: float
    tpot_p95_s: float
    age_hours: float = 0.0

    @classmethod
    def from_totals(
        cls,
        *,
        replicas: int,
        requests: float,
        prompt_tokens: float,
        completion_tokens: float,
        ttft_p95_s: float,
        tpot_p95_s: float,
        age_hours: float = 0.0,
    ) -> ProductionHour | None:
        """The hour from its totals across ``replicas`` (None for an hour without requests:
        it carries no evidence)."""
        if requests <= 0 or replicas < 1:
            return None
        return cls(
            requests_per_s_per_replica=requests / 3600.0 / replicas,
            prompt_tokens=prompt_tokens / requests,
            completion_tokens=completion_tokens / requests,
            ttft_p95_s=ttft_p95_s,
            tpot_p95_s=tpot_p95_s,
            age_hours=age_hours,
        )

    def over(self, slo: SloTarget) -> float:
        """How far the binding p95 was over its limit: > 1 broke the SLO, ≤ 1 met it."""
        return max(self.ttft_p95_s / slo.ttft_p95_s, self.tpot_p95_s / slo.tpot_p95_s)


__all__ = ["ProductionHour"]
