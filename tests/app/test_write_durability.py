"""Acknowledged means stored: a write route commits before its status line is sent.

A sequential client against a real server reads its own writes on both databases, and a
commit that fails (the PostgreSQL backend terminated at COMMIT) is never answered 2xx.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, event, select, text
from sqlalchemy.exc import OperationalError

from app.db import open_database
from app.db.models import Event, GpuProfile, Series
from app.settings import Settings
from tests.support.server import LiveServer

PROFILE = {
    "name": "a100",
    "gpu_type": "A100",
    "model": "llama",
    "tokens_per_s_per_gpu": 2000.0,
    "gpus_per_replica": 1,
    "usd_per_hour_on_demand": 2.0,
}
HOURS = [
    {"timestamp": f"2026-11-30T{hour:02d}:00:00Z", "requests": 100, "prompt_tokens": 1000}
    for hour in range(3)
]


@pytest.fixture
def live(settings: Settings) -> Iterator[tuple[str, Any]]:
    server = LiveServer(settings)
    with server as base_url:
        yield base_url, server.server.config.app


def test_a_sequential_client_reads_its_own_writes(live: tuple[str, Any]) -> None:
    base_url, _ = live
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for round_ in range(25):
            name = f"svc-{round_}"
            assert client.post("/v1/series", json={"name": name}).status_code == 201
            ingested = client.post(f"/v1/series/{name}/observations", json=HOURS)
            assert ingested.status_code == 200, (round_, ingested.text)
            assert client.delete(f"/v1/series/{name}").status_code == 204
            assert client.get(f"/v1/series/{name}").status_code == 404, round_
            profile = {**PROFILE, "name": f"gpu-{round_}"}
            assert client.post("/v1/gpu-profiles", json=profile).status_code == 201
            assert client.get(f"/v1/gpu-profiles/gpu-{round_}").status_code == 200, round_


def _fail_commits(engine: Engine, every: int) -> Any:
    """Make every ``every``-th COMMIT fail as a lost connection does: on PostgreSQL the
    backend is really terminated just before its COMMIT; on SQLite the driver error is raised."""
    counter = {"commits": 0, "failed": 0}

    def before_commit(connection: Any) -> None:
        counter["commits"] += 1
        if counter["commits"] % every:
            return
        counter["failed"] += 1
        if engine.dialect.name == "postgresql":
            pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            killer = open_database(str(engine.url.render_as_string(hide_password=False)))
            try:
                with killer.engine.begin() as other:
                    other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            finally:
                killer.dispose()
        else:
            raise OperationalError("COMMIT", {}, Exception("disk I/O error at commit"))

    event.listen(engine, "commit", before_commit)
    return counter


def test_a_failed_commit_is_never_acknowledged(live: tuple[str, Any], settings: Settings) -> None:
    base_url, app = live
    counter = _fail_commits(app.state.database.engine, every=3)
    acknowledged: dict[str, list[str]] = {"series": [], "profiles": [], "events": []}
    statuses: list[int] = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for round_ in range(12):
            for kind, path, body in (
                ("series", "/v1/series", {"name": f"svc-{round_}"}),
                ("profiles", "/v1/gpu-profiles", {**PROFILE, "name": f"gpu-{round_}"}),
                (
                    "events",
                    "/v1/events",
                    {
                        "name": f"launch-{round_}",
                        "start": "2026-12-01T00:00:00Z",
                        "end": "2026-12-01T06:00:00Z",
                    },
                ),
            ):
                response = client.post(path, json=body)
                statuses.append(response.status_code)
                if response.is_success:
                    acknowledged[kind].append(body["name"])
                else:
                    assert response.status_code == 503, response.text
                    assert "detail" in response.json()
    assert counter["failed"] >= 5 and 503 in statuses
    check = open_database(settings.database_url)
    try:
        with check.transaction() as session:
            stored = {
                "series": set(session.scalars(select(Series.name))),
                "profiles": set(session.scalars(select(GpuProfile.name))),
                "events": set(session.scalars(select(Event.name))),
            }
    finally:
        check.dispose()
    for kind, names in acknowledged.items():
        missing = set(names) - stored[kind]
        assert not missing, f"{kind} answered 2xx but never stored: {sorted(missing)}"
