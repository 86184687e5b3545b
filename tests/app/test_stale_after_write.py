"""After a write returns, no reader receives an answer computed from the state before it: a
plan read that was computing during a profile PUT neither stores its answer in the response
cache nor hands it to readers that arrive after the PUT."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app import ingest
from app.api import plan_query
from app.api.routes import capacity as capacity_routes
from app.db import Database
from app.jobs import run_forecasts
from app.settings import Settings
from tests.app.test_jobs import daily_load
from tests.app.test_plan_cache import FAST, PROFILE, SERIES, URL
from tests.support.server import LiveServer

SLOWER = {k: v for k, v in PROFILE.items() if k != "name"} | {"tokens_per_s_per_gpu": 240}


@pytest.fixture
def base_url(settings: Settings, database: Database) -> Iterator[str]:
    with database.transaction() as session:
        ingest.store(session, daily_load().assign(series=SERIES), create_series=True)
    run_forecasts(database, FAST)
    with LiveServer(settings.model_copy(update={"read_cache_ttl_s": 30})) as url:
        with httpx.Client(base_url=url) as client:
            assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
        yield url


class SlowFirstRead:
    """Wraps the plan computation: the first call computes, then waits until released."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.computed = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, *args: Any) -> bytes:
        self.calls += 1
        body: bytes = self.original(*args)
        if self.calls == 1:
            self.computed.set()
            self.release.wait(30)
        return body


class Arrivals:
    """Wraps the response cache's read: ``decided[n]`` is set once the n-th read (from 0) has
    found its answer, joined a computation in flight or started its own — the loop runs the
    callback queued on entry only after the read's first suspension, which follows that
    choice."""

    def __init__(self, original: Any, reads: int) -> None:
        self.original = original
        self.decided = [threading.Event() for _ in range(reads)]
        self.count = 0

    async def __call__(self, *args: Any) -> Any:
        if self.count < len(self.decided):
            asyncio.get_running_loop().call_soon(self.decided[self.count].set)
        self.count += 1
        return await self.original(*args)


@pytest.mark.parametrize("reader_finishes_first", [True, False])
def test_a_read_computing_during_a_write_is_not_served_after_it(
    base_url: str, monkeypatch: pytest.MonkeyPatch, reader_finishes_first: bool
) -> None:
    slow = SlowFirstRead(capacity_routes._plan_json)
    monkeypatch.setattr(capacity_routes, "_plan_json", slow)
    arrivals = Arrivals(plan_query.cached_read, reads=2)
    monkeypatch.setattr(plan_query, "cached_read", arrivals)
    params = {"profile": "h100"}
    early: list[httpx.Response] = []
    with httpx.Client(base_url=base_url, timeout=60) as client:
        reader = threading.Thread(target=lambda: early.append(client.get(URL, params=params)))
        reader.start()
        assert slow.computed.wait(30), "the first read never computed"
        with httpx.Client(base_url=base_url, timeout=60) as writer:
            assert writer.put("/v1/gpu-profiles/h100", json=SLOWER).status_code == 200
        if reader_finishes_first:
            slow.release.set()
            reader.join(30)
            time.sleep(0.1)
        later: list[dict[str, Any]] = []
        with httpx.Client(base_url=base_url, timeout=60) as after:
            getter = threading.Thread(
                target=lambda: later.append(after.get(URL, params=params).json())
            )
            getter.start()
            # the getter has chosen: joined the old computation (if readers may) or its own
            assert arrivals.decided[1].wait(30), "the read after the write never arrived"
            slow.release.set()
            getter.join(30)
            later.append(after.get(URL, params=params).json())
        reader.join(30)
    assert early and early[0].json()["per_gpu_tokens_per_s"] == 2400
    assert [plan["per_gpu_tokens_per_s"] for plan in later] == [240, 240]
