"""What the latency a production hour served says about the knee, beyond met or broke.

Latency grows with load, and faster the nearer the replica is to saturation: how far an hour
is over the SLO (``over``: the larger of its p95 TTFT and TPOT each ÷ its limit, > 1 broke it)
is convex in load, and a convex curve lies under every chord between two of its points.

Below the lowest hour that broke the SLO, ``U``, the curve therefore lies under the chord from
the latency at no load, ``l``, to ``U``'s, ``s``: it reaches the limit no earlier than that
chord does, at ``U × (1 − l) ÷ (s − l)`` (:func:`knee_at_least`). ``l`` is the lab model's
latency at its lowest load at the mix (one request in flight): at or above the latency at no
load, and a higher ``l`` gives a lower bound, the safe side.

(Between an hour within the SLO and the next that broke it the chord is the linear reading of
the bracket in :mod:`capacity.measured.slo_fleet`: the knee is at or beyond it too.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from capacity.measured.production_hour import ProductionHour
    from capacity.measured.slo import SloTarget


def knee_at_least(
    broke: ProductionHour,
    slo: SloTarget,
    model: Any,
    prompt_tokens: float,
    completion_tokens: float,
) -> float | None:
    """The lowest load the knee can be at below ``broke`` (the lowest hour that broke the SLO)
    at the mix, with the lab ``model``'s latency at its lowest load there as the latency at no
    load; None when that already breaks the SLO."""
    (curves,) = model._curves(np.array([prompt_tokens]), np.array([completion_tokens]))
    idle = max(curves.ttft_p95_s[0] / slo.ttft_p95_s, curves.tpot_p95_s[0] / slo.tpot_p95_s)
    if idle >= 1.0:
        return None
    return broke.requests_per_s_per_replica * (1.0 - idle) / (broke.over(slo) - idle)
