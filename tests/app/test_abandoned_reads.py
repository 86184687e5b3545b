"""Abandoned heavy reads stop, and never starve the server: expensive reads compute in a pool
of their own (at most HEAVY_READS_AT_ONCE at a time), so /healthz, /readyz and a keyed write
are answered while 45 of them wait; a computation stops at its next checkpoint once its client
hangs up or its deadline passes; concurrent identical reads share one computation, which
stops only when every one of them has gone."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.api.heavy import HEAVY_READS_AT_ONCE
from app.api.routes import capacity as capacity_routes
from app.common.cancel import checkpoint
from app.settings import Settings, get_settings
from tests.support.server import LiveServer

KEY = "k1"
READERS = 45


class Endless:
    """A backtest that never ends by itself: it runs until abandoned (checkpoint raises)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.started = 0
        self.stopped = 0

    def __call__(self, *_: Any) -> bytes:
        with self.lock:
            self.running += 1
            self.started += 1
            self.most = max(self.most, self.running)
        try:
            while True:
                checkpoint()
                time.sleep(0.01)
        finally:
            with self.lock:
                self.running -= 1
                self.stopped += 1

    def wait_idle(self, seconds: float = 30) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.lock:
                if self.running == 0:
                    return True
            time.sleep(0.05)
        return False


@pytest.fixture
def endless(monkeypatch: pytest.MonkeyPatch) -> Endless:
    fake = Endless()
    monkeypatch.setattr(capacity_routes, "_backtest_json", fake)
    return fake


def _server(database_url: str, **changes: Any) -> LiveServer:
    settings: Settings = get_settings(
        database_url=database_url, auto_migrate=False, api_keys=KEY, **changes
    )
    return LiveServer(settings)


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    with _server(database_url, read_deadline_s=60) as url:
        yield url


def _abandon(base_url: str, days: int) -> None:
    """An anonymous reader that hangs up after half a second."""
    with (
        httpx.Client(base_url=base_url, timeout=0.5) as client,
        contextlib.suppress(httpx.TimeoutException),
    ):
        client.get(f"/v1/series/svc/capacity/backtest?days={days}")


def test_45_abandoned_heavy_reads_leave_room_and_stop(server: str, endless: Endless) -> None:
    readers = [threading.Thread(target=_abandon, args=(server, d + 1)) for d in range(READERS)]
    for reader in readers:
        reader.start()
    with httpx.Client(base_url=server, timeout=30) as client:
        while endless.started < HEAVY_READS_AT_ONCE:  # the pool is full
            time.sleep(0.02)
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200
        created = client.post("/v1/series", json={"name": "keyed"}, headers={"X-API-Key": KEY})
        assert created.status_code == 201, created.text
        for reader in readers:
            reader.join(30)
        # every client has hung up: what they started stops, and nothing else is started
        assert endless.wait_idle()
        started = endless.started
        time.sleep(0.5)
        assert endless.started == started and endless.stopped == started
        assert endless.most <= HEAVY_READS_AT_ONCE
        assert client.get("/healthz").status_code == 200


def test_a_heavy_read_stops_at_its_deadline(database_url: str, endless: Endless) -> None:
    with (
        _server(database_url, read_deadline_s=1) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        response = client.get("/v1/series/svc/capacity/backtest?days=3")
        assert response.status_code == 503, response.text
        assert "deadline" in response.json()["detail"]
        assert endless.wait_idle() and endless.stopped == endless.started == 1


def test_a_shared_computation_runs_on_while_one_reader_waits(server: str, endless: Endless) -> None:
    outcome: list[int] = []

    def patient() -> None:
        with httpx.Client(base_url=server, timeout=3) as client:
            try:
                outcome.append(client.get("/v1/series/svc/capacity/backtest?days=2").status_code)
            except httpx.TimeoutException:
                outcome.append(0)

    waiting = threading.Thread(target=patient)
    waiting.start()
    while endless.started < 1:
        time.sleep(0.02)
    _abandon(server, 2)  # joins the same computation, then hangs up
    time.sleep(0.5)
    assert endless.running == 1 and endless.started == 1  # the patient reader still waits
    waiting.join(10)
    assert outcome == [0]
    assert endless.wait_idle() and endless.stopped == 1
