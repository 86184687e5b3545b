"""The plan cache: a repeated capacity read is one query and no refit; a new forecast run or a
changed GPU profile is seen at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app import ingest
from app.api import create_app
from app.db import Database
from app.jobs import ForecastOptions, run_forecasts
from app.settings import Settings
from tests.app.test_jobs import daily_load

SERIES = "prod/chat"
PROFILE = {
    "name": "h100",
    "gpu_type": "H100-80G",
    "model": "llama-3.1-70b",
    "tokens_per_s_per_gpu": 2400,
    "gpus_per_replica": 2,
    "usd_per_hour_on_demand": 2.5,
}
URL = f"/v1/series/{SERIES}/capacity"
FAST = ForecastOptions(models=("seasonal_naive", "seasonal_ma"), workers=1)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """These tests look beneath the short-lived response cache, so it is off here."""
    with TestClient(create_app(settings.model_copy(update={"read_cache_ttl_s": 0}))) as c:
        yield c


@pytest.fixture
def planned(client: TestClient, database: Database) -> TestClient:
    with database.transaction() as session:
        ingest.store(session, daily_load().assign(series=SERIES), create_series=True)
    run_forecasts(database, FAST)
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    return client


@pytest.fixture
def statements(planned: TestClient) -> Iterator[list[str]]:
    seen: list[str] = []
    engine = planned.app.state.database.engine  # type: ignore[attr-defined]

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    yield seen
    event.remove(engine, "before_cursor_execute", record)


def test_a_cached_read_is_one_query(planned: TestClient, statements: list[str]) -> None:
    first = planned.get(URL, params={"profile": "h100"})
    assert first.status_code == 200
    statements.clear()
    second = planned.get(URL, params={"profile": "h100"})
    assert second.content == first.content
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    writes = [s for s in statements if not s.lstrip().upper().startswith(("SELECT", "BEGIN"))]
    assert len(reads) == 1 and "max(forecast_runs.id)" in reads[0], statements
    assert writes == [], "a plan read must not write (no refit is stored)"


def test_a_new_run_and_a_changed_profile_are_seen(planned: TestClient, database: Database) -> None:
    before = planned.get(URL, params={"profile": "h100"}).json()
    run_forecasts(database, FAST)
    after_run = planned.get(URL, params={"profile": "h100"}).json()
    assert after_run["forecast_run_ids"][0] > before["forecast_run_ids"][0]
    slower = {k: v for k, v in PROFILE.items() if k != "name"} | {"tokens_per_s_per_gpu": 240}
    assert planned.put("/v1/gpu-profiles/h100", json=slower).status_code == 200
    after_profile = planned.get(URL, params={"profile": "h100"}).json()
    assert after_profile["per_gpu_tokens_per_s"] == 240
    assert after_profile["peak_gpus"] > after_run["peak_gpus"]


def test_a_series_created_again_is_not_served_the_old_plan(planned: TestClient) -> None:
    assert planned.get(URL, params={"profile": "h100"}).status_code == 200
    assert planned.delete(f"/v1/series/{SERIES}").status_code == 204
    assert planned.post("/v1/series", json={"name": SERIES}).status_code == 201
    again = planned.get(URL, params={"profile": "h100"})
    assert again.status_code == 404 and "no complete forecast" in again.json()["detail"]


def test_response_cache_serves_repeats_without_the_database(
    settings: Settings, database: Database
) -> None:
    import time

    with database.transaction() as session:
        ingest.store(session, daily_load().assign(series=SERIES), create_series=True)
    run_forecasts(database, FAST)
    cached = settings.model_copy(update={"read_cache_ttl_s": 0.5})
    with TestClient(create_app(cached)) as client:
        assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
        first = client.get(URL, params={"profile": "h100"})
        seen: list[str] = []
        engine = client.app.state.database.engine  # type: ignore[attr-defined]

        def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            seen.append(statement)

        event.listen(engine, "before_cursor_execute", record)
        try:
            again = client.get(URL, params={"profile": "h100"})
            assert again.content == first.content and seen == []
            # a run stored by another process shows up once the entry expires
            run_forecasts(database, FAST)
            time.sleep(0.6)
            later = client.get(URL, params={"profile": "h100"}).json()
            assert later["forecast_run_ids"][0] > first.json()["forecast_run_ids"][0]
            # a write through this server clears the cache at once
            slower = {k: v for k, v in PROFILE.items() if k != "name"} | {
                "tokens_per_s_per_gpu": 240
            }
            assert client.put("/v1/gpu-profiles/h100", json=slower).status_code == 200
            assert client.get(URL, params={"profile": "h100"}).json()["per_gpu_tokens_per_s"] == 240
        finally:
            event.remove(engine, "before_cursor_execute", record)
