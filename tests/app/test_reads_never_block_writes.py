"""A slow read never stalls a writer: reads take no write lock (SQLite begins them deferred;
PostgreSQL never locks rows on reads), so an event posted while a plan read is computing is
stored at once."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from app.api.routes import capacity as capacity_routes
from tests.app.test_plan_cache import URL
from tests.app.test_stale_after_write import base_url  # noqa: F401 - the seeded live server

HOLD_S = 6.0
EVENT = {"name": "launch", "start": "2026-12-01T00:00:00Z", "end": "2026-12-01T06:00:00Z"}


def test_a_write_during_a_slow_read_is_not_delayed(
    base_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inside = threading.Event()
    original = capacity_routes._plan

    def slow_plan(*args: Any) -> Any:
        plan = original(*args)  # the read's transaction has begun: it has run its queries
        inside.set()
        time.sleep(HOLD_S)
        return plan

    monkeypatch.setattr(capacity_routes, "_plan", slow_plan)
    answers: list[int] = []
    with httpx.Client(base_url=base_url, timeout=60) as reader:
        # an explicit band: a band=auto read may store its calibration, a write
        params = {"profile": "h100", "band": "hi_80"}
        thread = threading.Thread(
            target=lambda: answers.append(reader.get(URL, params=params).status_code)
        )
        thread.start()
        assert inside.wait(30)
        with httpx.Client(base_url=base_url, timeout=60) as writer:
            started = time.perf_counter()
            assert writer.post("/v1/events", json=EVENT).status_code == 201
            waited = time.perf_counter() - started
        thread.join(60)
    assert answers == [200]
    assert waited < HOLD_S / 2, f"the write waited {waited:.1f} s for a read"
