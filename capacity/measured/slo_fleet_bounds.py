"""What the latency a production hour served says about the knee, beyond met or broke.

Latency grows with load, and faster the nearer the replica is to saturation: each p95, TTFT and
TPOT, ÷ its limit (> 1 broke it) is taken as convex in load, and a convex curve lies under every
chord between two of its points.

Below the lowest hour ``U`` that broke a limit, by ``s``, that latency therefore lies under the
chord from its value at no load, ``l``, to ``s``: it reaches the limit no earlier than that
chord does, at ``U × (1 − l) ÷ (s − l)``, nor before the highest load below ``U`` that met the
limit; the knee is the earlier of the two limits' (:func:`knee_at_least`). Each limit has its
own ``l``: an hour may break TTFT while serving TPOT well within its limit. ``l`` is the lab
model's latency at its lowest load at the mix (one request in flight): at or above the latency
at no load, and a higher ``l`` gives a lower bound, the safe side.

(Between an hour within the SLO and the next that broke it the chord is the linear reading of
the bracket in :mod:`capacity.measured.slo_fleet`: the knee is at or beyond it too.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from capacity.measured.production_hour import ProductionHour
    from capacity.measured.slo import SloTarget


class KneeFloor(NamedTuple):
    """The least the knee can be, the limit that sets it and the hour that broke that limit."""

    requests_per_s_per_replica: float
    binding: str
    broke: ProductionHour


def knee_at_least(
    hours: Sequence[ProductionHour],
    slo: SloTarget,
    model: Any,
    prompt_tokens: float,
    completion_tokens: float,
) -> KneeFloor | None:
    """The lowest load the knee can be at, given ``hours`` near the mix sorted by load (the
    lowest broke the SLO) and the lab ``model``'s latency at its lowest load at the mix; None
    when neither bounds it (that latency already breaks the limit no hour met)."""
    (curves,) = model.curves_at(np.array([prompt_tokens]), np.array([completion_tokens]))
    floors = []
    for binding, lab_idle, limit in (
        ("ttft", curves.ttft_p95_s[0], slo.ttft_p95_s),
        ("tpot", curves.tpot_p95_s[0], slo.tpot_p95_s),
    ):
        over = [getattr(hour, f"{binding}_p95_s") / limit for hour in hours]
        first = next((i for i, ratio in enumerate(over) if ratio > 1.0), None)
        if first is None:
            continue
        idle = lab_idle / limit
        load = hours[first].requests_per_s_per_replica
        met = max((h.requests_per_s_per_replica for h in hours[:first]), default=0.0)
        chord = load * (1.0 - idle) / (over[first] - idle) if idle < 1.0 else 0.0
        floors.append(KneeFloor(max(met, chord), binding, hours[first]))
    floor = min(floors, key=lambda each: each.requests_per_s_per_replica, default=None)
    return floor if floor is not None and floor.requests_per_s_per_replica > 0.0 else None
