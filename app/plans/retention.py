"""How long the plans reads compute are kept: the tables ``plan_replays`` (the backtest's
replays) and ``plan_calibrations`` (band auto's choices) are caches that reads fill, one row per
series x GPU profile x parameter set, so each is bounded where a row is stored:

- per series x profile, the newest :data:`REPLAYS_KEPT` replays and :data:`CALIBRATIONS_KEPT`
  calibrations (by insertion) are kept, older ones go;
- rows older than :data:`KEPT_DAYS` days go whatever their number.

So reads, anonymous or not, can add at most that many rows per series x profile (a few MB),
however many parameter sets they ask for; a row that went is computed again when asked for.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db import batches
from app.db.models import PlanCalibration, PlanReplay

__all__ = ["CALIBRATIONS_KEPT", "KEPT_DAYS", "REPLAYS_KEPT", "prune"]

#: Replays kept per series x GPU profile (each ~20 kB).
REPLAYS_KEPT = 32
#: Calibrations kept per series x GPU profile: several nights of the read budget
#: (:data:`app.plans.calibration_gate.READ_CALIBRATIONS_PER_NIGHT`) plus the defaults.
CALIBRATIONS_KEPT = 64
#: Age past which a kept replay or calibration goes (days).
KEPT_DAYS = 14

_KEPT = {PlanReplay: REPLAYS_KEPT, PlanCalibration: CALIBRATIONS_KEPT}


def prune(
    session: Session,
    model: type[PlanReplay] | type[PlanCalibration],
    *,
    series_id: int,
    profile: str,
) -> None:
    """Delete the rows of ``model`` for this series x profile beyond its count or age (in the
    caller's transaction; flushed, not committed)."""
    scope = (model.series_id == series_id, model.profile == profile)
    surplus = list(
        session.scalars(
            select(model.id).where(*scope).order_by(model.id.desc()).offset(_KEPT[model])
        )
    )
    for ids in batches(surplus):
        session.execute(delete(model).where(model.id.in_(ids)))
    cutoff = datetime.now(UTC) - timedelta(days=KEPT_DAYS)
    session.execute(delete(model).where(*scope, model.created_at < cutoff))
    session.flush()
