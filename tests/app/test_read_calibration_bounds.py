"""Band auto calibrations computed by reads are bounded, on SQLite and PostgreSQL: reads
calibrate the default parameters and at most READ_CALIBRATIONS_PER_NIGHT other sets per
series x profile x nightly run (beyond, a quick 429 before any replay), identical concurrent
calibrations join one computation, and a calibration in flight never stalls a writer (the
replay runs without SQLite's write lock; the choice is stored in a short write)."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.db import Database
from app.db.models import PlanCalibration
from app.plans import auto_band
from app.plans.calibration import BandChoice
from app.plans.calibration_gate import READ_CALIBRATIONS_PER_NIGHT
from tests.app.test_plan_cache import SERIES, URL
from tests.app.test_stale_after_write import base_url  # noqa: F401 - the seeded live server

EVENT = {"name": "launch", "start": "2026-12-01T00:00:00Z", "end": "2026-12-01T06:00:00Z"}
HOLD_S = 6.0


class FakeCalibration:
    """Stands in for the week's replay: records each call, takes ``seconds``, and (when
    ``gate`` is given) waits for it from the ``block_from``-th call on."""

    def __init__(self, seconds: float = 0.0, block_from: int | None = None) -> None:
        self.seconds = seconds
        self.block_from = block_from
        self.calls: list[float] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, _session: Any, *, params: Any, **_: Any) -> BandChoice:
        with self._lock:
            self.calls.append(params.utilization_target)
            count = len(self.calls)
        if self.block_from is not None and count >= self.block_from:
            self.entered.set()
            self.gate.wait(60)
        time.sleep(self.seconds)
        return BandChoice(
            band="yhat",
            met=True,
            max_over_capacity=params.max_over_capacity,
            risk=0.0,
            gpu_hours=1.0,
            window_start=None,
            window_end=None,
            table=[{"headroom": 1.1, "time_over_capacity_share": 0.0}],
            note="fake calibration",
            headroom=1.1,
        )


def stored_rows(database: Database) -> int:
    with database.read_transaction() as session:
        return int(session.scalar(select(func.count()).select_from(PlanCalibration)) or 0)


def test_distinct_parameters_from_reads_store_at_most_the_bound(
    base_url: str,  # noqa: F811
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeCalibration(seconds=0.2)
    monkeypatch.setattr(auto_band, "calibrate", fake)
    answers: list[tuple[int, float, dict[str, Any]]] = []
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for step in range(50):
            params = {"profile": "h100", "utilization_target": 0.5 + step * 0.005}
            started = time.perf_counter()
            response = client.get(URL, params=params)
            answers.append((response.status_code, time.perf_counter() - started, response.json()))
        bound = READ_CALIBRATIONS_PER_NIGHT
        assert [status for status, _, _ in answers] == [200] * bound + [429] * (50 - bound)
        assert len(fake.calls) == bound
        assert stored_rows(database) == bound
        refused = answers[bound:]
        # a refused read neither calibrates (the calls above) nor plans: side by side in one
        # run, its median time is below the quickest read that calibrated (0.2 s of which are
        # the fake's own), whatever the machine's load
        calibrated = min(seconds for _, seconds, _ in answers[:bound])
        assert statistics.median(seconds for _, seconds, _ in refused) < calibrated, (
            "a refused read did work"
        )
        assert "gpucast plan" in refused[0][2]["detail"]
        # the default parameters and the sets already calibrated are still served
        assert client.get(URL, params={"profile": "h100"}).status_code == 200
        again = client.get(URL, params={"profile": "h100", "utilization_target": 0.5})
        assert again.status_code == 200
        assert again.json()["band_choice"]["headroom"] == 1.1
    assert len(fake.calls) == bound + 1  # the defaults, once
    assert stored_rows(database) == bound + 1


def test_identical_concurrent_calibrations_join_one(
    base_url: str,  # noqa: F811
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three surfaces (so no response cache joins them), two readers each, one calibration."""
    fake = FakeCalibration(seconds=1.5)
    monkeypatch.setattr(auto_band, "calibrate", fake)
    statuses: list[int] = []
    params = {"profile": "h100", "utilization_target": 0.61}
    paths = [
        URL,
        URL.replace("/capacity", "/desired-replicas"),
        URL.replace("/capacity", "/kubernetes"),
    ]

    def read(path: str) -> None:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            statuses.append(client.get(path, params=params).status_code)

    threads = [threading.Thread(target=read, args=(path,)) for path in paths * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert statuses == [200] * 6
    assert fake.calls == [0.61]
    assert stored_rows(database) == 1


def test_a_write_is_not_stalled_by_a_calibration_in_flight(
    base_url: str,  # noqa: F811
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One Grafana query with two plan targets: the first calibration is stored, the second
    is still replaying while an event is posted."""
    fake = FakeCalibration(block_from=2)
    monkeypatch.setattr(auto_band, "calibrate", fake)
    targets = [
        {
            "refId": ref,
            "target": "gpus",
            "payload": {"series": SERIES, "profile": "h100", "utilization_target": target},
        }
        for ref, target in (("A", 0.55), ("B", 0.65))
    ]
    body = {
        "range": {"from": "2026-10-20T00:00:00.000Z", "to": "2026-10-23T00:00:00.000Z"},
        "interval": "1h",
        "targets": targets,
    }
    answers: list[int] = []
    with httpx.Client(base_url=base_url, timeout=60) as reader:
        thread = threading.Thread(
            target=lambda: answers.append(reader.post("/grafana/query", json=body).status_code)
        )
        thread.start()
        try:
            assert fake.entered.wait(30), "the second calibration never started"
            with httpx.Client(base_url=base_url, timeout=60) as writer:
                started = time.perf_counter()
                status = writer.post("/v1/events", json=EVENT).status_code
                waited = time.perf_counter() - started
        finally:
            threading.Timer(HOLD_S, fake.gate.set).start()
            thread.join(60)
    assert status == 201
    assert waited < HOLD_S / 2, f"the write waited {waited:.1f} s for a calibration"
    assert answers == [200]
    assert stored_rows(database) == 2


def test_the_nightly_recalibration_does_not_stall_writes(
    base_url: str,  # noqa: F811
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The nightly job replays each parameter set in use again for the new run; a write
    meanwhile is stored at once. Its own choices are not carried on the next night."""
    fake = FakeCalibration()
    monkeypatch.setattr(auto_band, "calibrate", fake)
    with httpx.Client(base_url=base_url, timeout=60) as client:
        assert client.get(URL, params={"profile": "h100"}).status_code == 200
    with database.transaction() as session:  # as if a new nightly run came since
        session.execute(PlanCalibration.__table__.update().values(run_id=-1))
    fake.block_from = 2
    done: list[int] = []
    thread = threading.Thread(target=lambda: done.append(auto_band.recalibrate(database)))
    thread.start()
    try:
        assert fake.entered.wait(30), "the recalibration never started"
        with httpx.Client(base_url=base_url, timeout=60) as writer:
            started = time.perf_counter()
            status = writer.post("/v1/events", json=EVENT).status_code
            waited = time.perf_counter() - started
    finally:
        threading.Timer(HOLD_S, fake.gate.set).start()
        thread.join(60)
    assert status == 201
    assert waited < HOLD_S / 2, f"the write waited {waited:.1f} s for the nightly replay"
    assert done == [1]
    with database.transaction() as session:  # another night: only reads' sets are kept
        session.execute(
            PlanCalibration.__table__.update().where(PlanCalibration.run_id != -1).values(run_id=-2)
        )
        session.execute(PlanCalibration.__table__.delete().where(PlanCalibration.run_id == -1))
    fake.block_from = None
    assert auto_band.recalibrate(database) == 0
