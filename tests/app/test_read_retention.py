"""Reads never grow storage without bound: the replays and calibrations they store are kept
per series x profile up to a count (the newest) and an age, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from app.db import Database, repository
from app.db.models import PlanCalibration, PlanReplay
from app.plans import PlanParams, auto_band
from app.plans.backtest import save_replay
from app.plans.replay import ReplayOptions
from app.plans.retention import CALIBRATIONS_KEPT, KEPT_DAYS, REPLAYS_KEPT


def _count(database: Database, model: type[PlanReplay] | type[PlanCalibration]) -> int:
    with database.read_transaction() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def _series(database: Database, name: str = "svc") -> int:
    with database.transaction() as session:
        return repository.create_series(session, name=name).id


def _replay(utilization: float, profile: str = "h100") -> dict[str, object]:
    return {
        "params": PlanParams(utilization_target=utilization).as_dict(),
        "end": datetime(2026, 12, 1, tzinfo=UTC),
        "load_source": "stored hours",
        "profile": profile,
    }


def test_replays_are_kept_up_to_their_count_per_series_and_profile(database: Database) -> None:
    _series(database)
    _series(database, "other")
    for i in range(REPLAYS_KEPT + 9):
        with database.transaction() as session:
            save_replay(
                session, series_name="svc", result=_replay(0.3 + i / 100), options=ReplayOptions()
            )
    with database.transaction() as session:
        save_replay(session, series_name="other", result=_replay(0.5), options=ReplayOptions())
    assert _count(database, PlanReplay) == REPLAYS_KEPT + 1
    with database.read_transaction() as session:
        kept = [
            r.result["params"]["utilization_target"]
            for r in session.scalars(select(PlanReplay).order_by(PlanReplay.id))
        ]
    # the newest stay: the first nine parameter sets went
    assert kept[0] == 0.3 + 9 / 100 and kept[-2] == 0.3 + (REPLAYS_KEPT + 8) / 100


def test_replays_past_their_age_go(database: Database) -> None:
    _series(database)
    with database.transaction() as session:
        save_replay(session, series_name="svc", result=_replay(0.4), options=ReplayOptions())
        old = session.scalar(select(PlanReplay))
        assert old is not None
        old.created_at = datetime.now(UTC) - timedelta(days=KEPT_DAYS + 1)
    with database.transaction() as session:
        save_replay(session, series_name="svc", result=_replay(0.5), options=ReplayOptions())
    with database.read_transaction() as session:
        left = [
            r.result["params"]["utilization_target"] for r in session.scalars(select(PlanReplay))
        ]
    assert left == [0.5]


def _calibration(series_id: int, i: int, *, profile: str = "h100") -> PlanCalibration:
    return PlanCalibration(
        series_id=series_id, profile=profile, params_key=f"k{i}", run_id=1, result={"i": i}
    )


def test_calibrations_are_kept_up_to_their_count_and_age(database: Database) -> None:
    series_id = _series(database)
    for i in range(CALIBRATIONS_KEPT + 5):
        with database.read_transaction() as session:  # as reads store them
            auto_band._store(session, _calibration(series_id, i), "svc")
    with database.transaction() as session:  # as the nightly job stores them
        auto_band._store(session, _calibration(series_id, 999, profile="a100"), "svc")
    assert _count(database, PlanCalibration) == CALIBRATIONS_KEPT + 1
    with database.transaction() as session:
        rows = list(
            session.scalars(select(PlanCalibration).where(PlanCalibration.profile == "h100"))
        )
        assert min(r.result["i"] for r in rows) == 5
        for row in rows:
            row.created_at = datetime.now(UTC) - timedelta(days=KEPT_DAYS + 1)
    with database.read_transaction() as session:
        auto_band._store(session, _calibration(series_id, 1000), "svc")
    with database.read_transaction() as session:
        left = {(r.profile, r.result["i"]) for r in session.scalars(select(PlanCalibration))}
    assert left == {("h100", 1000), ("a100", 999)}
