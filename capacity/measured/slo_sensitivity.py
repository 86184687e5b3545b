"""How far an SLO capacity moves with its binding latency limit.

Where the knee lies on a flat stretch of the latency curve (p95 TPOT barely growing with load,
typical of decode-heavy mixes at a TPOT limit close to the idle TPOT), a few percent of latency
error — in the model or in the measurement — moves the capacity far. The leave-one-mix-out
errors of the SLO model are largest exactly there (bench/RESULTS.md), so answers say so.
"""

from __future__ import annotations

from dataclasses import dataclass

from capacity.errors import SloUnreachableError
from capacity.measured.slo import SloCapacity, SloModel, SloTarget

SENSITIVITY_STEP = 0.05  # the binding limit 5 % tighter and 5 % looser
FLAT_RATIO = 1.3  # ... moving the capacity by more than 30 % between them is "flat"


@dataclass(frozen=True)
class SloSensitivity:
    """The capacity (requests/s per replica) with the binding limit 5 % tighter and looser."""

    limit: str
    tighter_requests_per_s: float
    looser_requests_per_s: float

    @property
    def flat(self) -> bool:
        """The knee lies where latency barely grows with load (±5 % moves it by > 30 %)."""
        return self.looser_requests_per_s > FLAT_RATIO * self.tighter_requests_per_s


def limit_sensitivity(
    model: SloModel, answer: SloCapacity, slo: SloTarget
) -> SloSensitivity | None:
    """The sensitivity of ``answer`` (from ``model`` at ``slo``); None when no limit binds
    (``binding == "measured range"``). A tighter limit the mix cannot meet counts as 0."""
    if answer.binding not in ("ttft", "tpot"):
        return None
    rates = []
    for factor in (1.0 - SENSITIVITY_STEP, 1.0 + SENSITIVITY_STEP):
        limits = {"ttft_p95_s": slo.ttft_p95_s, "tpot_p95_s": slo.tpot_p95_s}
        limits[f"{answer.binding}_p95_s"] *= factor
        try:
            rates.append(
                model.capacity(
                    prompt_tokens=answer.prompt_tokens,
                    completion_tokens=answer.completion_tokens,
                    slo=SloTarget(**limits),
                    allow_extrapolation=True,
                    with_range=False,
                ).requests_per_s_per_replica
            )
        except SloUnreachableError:
            rates.append(0.0)
    return SloSensitivity(answer.binding, rates[0], rates[1])
