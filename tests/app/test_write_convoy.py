"""Many concurrent writers behave like one queue, on SQLite as on PostgreSQL: 45 clients
replacing deployments at once (more than the server's worker threads) are all answered 200,
none waits out SQLite's busy timeout, and every write is stored."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select

from app.db import Database
from app.db.models import GpuProfile, Series, SeriesDeployment
from app.settings import Settings
from tests.support.server import LiveServer

WRITERS = 45
PROFILES = [
    {
        "name": f"p{i}",
        "gpu_type": "L4",
        "model": "llama-3.1-8b",
        "tokens_per_s_per_gpu": 1000.0 + i,
        "gpus_per_replica": 1,
        "usd_per_hour_on_demand": 0.8,
    }
    for i in range(2)
]


@pytest.fixture
def base_url(settings: Settings) -> Iterator[str]:
    with LiveServer(settings) as url:
        yield url


def test_45_concurrent_deployment_writers_all_succeed(base_url: str, database: Database) -> None:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for profile in PROFILES:
            assert client.post("/v1/gpu-profiles", json=profile).status_code == 201
        for i in range(WRITERS):
            assert client.post("/v1/series", json={"name": f"svc-{i}"}).status_code == 201
    statuses: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(WRITERS)

    def write(i: int) -> None:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            start.wait()
            for round_ in range(3):
                body = {"profile": PROFILES[(i + round_) % 2]["name"]}
                status = client.put(f"/v1/series/svc-{i}/deployment", json=body).status_code
                with lock:
                    statuses.append(status)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert statuses == [200] * (3 * WRITERS)
    with database.read_transaction() as session:
        deployed = dict(
            session.execute(
                select(Series.name, GpuProfile.name)
                .join(SeriesDeployment, SeriesDeployment.series_id == Series.id)
                .join(GpuProfile, GpuProfile.id == SeriesDeployment.gpu_profile_id)
            ).all()
        )
    assert deployed == {f"svc-{i}": PROFILES[(i + 2) % 2]["name"] for i in range(WRITERS)}
