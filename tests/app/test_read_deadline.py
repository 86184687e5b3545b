"""A read has a wall-clock deadline (GPUCAST_READ_DEADLINE_S): past it the client gets a 503
JSON at once, on both databases, however many statements the read is made of."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.api.routes import capacity as capacity_routes
from app.settings import Settings


@pytest.fixture
def short(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings.model_copy(update={"read_deadline_s": 1.0}))) as client:
        yield client


def test_a_read_past_its_deadline_is_a_503(
    short: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def slow(*_args: Any) -> bytes:
        time.sleep(3.0)  # many short statements, each within its own bound
        return b"{}"

    monkeypatch.setattr(capacity_routes, "_plan_json", slow)
    started = time.perf_counter()
    response = short.get("/v1/series/svc/capacity", params={"band": "hi_80"})
    elapsed = time.perf_counter() - started
    assert response.status_code == 503, response.text
    assert "deadline" in response.json()["detail"]
    assert response.headers["retry-after"] == "5"
    assert elapsed < 2.5
    # writes are not cut short, and a quick read is unaffected
    assert short.post("/v1/series", json={"name": "svc"}).status_code == 201
    assert short.get("/v1/series/svc").status_code == 200
