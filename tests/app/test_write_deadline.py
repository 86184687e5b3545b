"""A write has a wall-clock deadline (GPUCAST_WRITE_DEADLINE_S), on both databases: past it,
before its commit began, the client gets a 503 JSON at once and the write is rolled back
(never stored); a write that began to commit in time is answered as usual."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.api.routes import series as series_routes
from app.db import repository
from app.settings import Settings


@pytest.fixture
def short(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"write_deadline_s": 1.0}))
    with TestClient(app) as client:
        yield client


def test_a_write_past_its_deadline_is_a_503_and_not_stored(
    short: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    create = repository.create_series

    def slow(*args: Any, **kwargs: Any) -> Any:
        series = create(*args, **kwargs)  # added and flushed; the commit comes after
        time.sleep(2.5)
        return series

    monkeypatch.setattr(series_routes.repository, "create_series", slow)
    with _diagnosed() as diagnosis:
        started = time.perf_counter()
        response = short.post("/v1/series", json={"name": "late"})
        elapsed = time.perf_counter() - started
    assert response.status_code == 503, response.text
    assert "nothing was stored" in response.json()["detail"]
    assert response.headers["retry-after"] == "5"
    assert elapsed < 2.0, diagnosis()
    time.sleep(3.0)  # the route's thread reaches its commit, which is refused
    assert short.get("/v1/series/late").status_code == 404
    monkeypatch.setattr(series_routes.repository, "create_series", create)
    assert short.post("/v1/series", json={"name": "late"}).status_code == 201
    assert short.get("/v1/series/late").status_code == 200


def test_a_write_committing_at_its_deadline_is_answered_as_stored(
    short: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.api import deadline

    commit = deadline.WriteGate.commit

    def slow_commit(self: deadline.WriteGate) -> None:
        commit(self)  # the commit has begun: the deadline can no longer answer 503
        time.sleep(2.0)

    monkeypatch.setattr(deadline.WriteGate, "commit", slow_commit)
    response = short.post("/v1/series", json={"name": "slow-commit"})
    assert response.status_code == 201, response.text
    assert short.get("/v1/series/slow-commit").status_code == 200


@contextmanager
def _diagnosed() -> Iterator[Callable[[], str]]:
    """What else ran while a timed request waited (for the message of a failed timing): the
    garbage collector's pauses in that time and the threads alive in this process."""
    pauses: list[tuple[int, float]] = []
    began = [0.0]

    def timer(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            pauses.append((info["generation"], time.perf_counter() - began[0]))

    gc.callbacks.append(timer)
    try:
        yield (
            lambda: (
                f"garbage collections meanwhile (generation, s): {pauses}; "
                f"threads alive: {sorted(t.name for t in threading.enumerate())}"
            )
        )
    finally:
        gc.callbacks.remove(timer)
