"""Database faults on a private PostgreSQL: an outage gives 503s (not hangs, not 500s) and the
same server recovers by itself; a connection killed mid-ingest (while its transaction is open:
parsing, COPY or upsert) stores nothing, and a retry works."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import uvicorn

from app.api import create_app
from app.db import open_database
from app.settings import get_settings
from tests.support.pg_cluster import PrivateCluster, free_port, pg_bin_dir

pytestmark = pytest.mark.skipif(pg_bin_dir() is None, reason="PostgreSQL server binaries missing")


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    # Not under pytest's tmp_path: as root the server runs as 'postgres', which cannot enter
    # pytest's private (0700, root-owned) temporary folders.
    root = Path(tempfile.mkdtemp(prefix="gpucast-pgfault-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    pg = PrivateCluster(root / "cluster")
    pg.init()
    pg.start()
    yield pg
    pg.stop("immediate")
    shutil.rmtree(root, ignore_errors=True)


class ServerThread:
    def __init__(self, database_url: str) -> None:
        settings = get_settings(database_url=database_url, auto_migrate=True)
        self.port = free_port()
        config = uvicorn.Config(
            create_app(settings),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> httpx.Client:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("gpucast server did not start")
            time.sleep(0.05)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)


def csv_body(hours: int, value: float = 1.0) -> bytes:
    lines = ["timestamp,requests"]
    start = 631_152_000  # 1990-01-01T00:00Z
    for h in range(hours):
        stamp = time.strftime("%Y-%m-%dT%H:00:00Z", time.gmtime(start + h * 3600))
        lines.append(f"{stamp},{value}")
    return ("\n".join(lines) + "\n").encode()


def test_outage_gives_503_and_the_server_recovers(cluster: PrivateCluster) -> None:
    url = cluster.create_database("outage")
    with ServerThread(url) as client:
        assert client.post("/v1/series", json={"name": "svc"}).status_code == 201
        assert client.get("/readyz").status_code == 200
        cluster.stop("immediate")
        try:
            started = time.monotonic()
            ready = client.get("/readyz")
            assert ready.status_code == 503 and "database unreachable" in ready.json()["detail"]
            data = client.get("/v1/series")
            assert data.status_code == 503
            assert data.json()["detail"] == "database unavailable; retry shortly"
            write = client.post(
                "/v1/series/svc/observations",
                content=csv_body(3),
                headers={"Content-Type": "text/csv"},
            )
            assert write.status_code == 503
            assert time.monotonic() - started < 25, "outage answers must not hang"
        finally:
            cluster.start()
        deadline = time.monotonic() + 30
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "server did not recover after the restart"
            time.sleep(0.5)
        assert [s["name"] for s in client.get("/v1/series").json()] == ["svc"]


def test_connection_killed_mid_ingest_stores_nothing(cluster: PrivateCluster) -> None:
    url = cluster.create_database("killconn")
    migrated = open_database(url.replace("postgresql://", "postgresql+psycopg://"))
    migrated.upgrade()
    migrated.dispose()
    body = csv_body(150_000)
    with ServerThread(url) as client:
        assert client.post("/v1/series", json={"name": "svc"}).status_code == 201
        killed: list[int] = []
        stop = threading.Event()

        def killer() -> None:
            with psycopg.connect(url, autocommit=True) as admin:
                while not stop.is_set() and not killed:
                    rows = admin.execute(
                        "SELECT pid FROM pg_stat_activity WHERE datname = 'killconn' "
                        "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL "
                        "AND state IN ('active', 'idle in transaction')"
                    ).fetchall()
                    for (pid,) in rows:
                        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                        killed.append(pid)
                    time.sleep(0.002)

        thread = threading.Thread(target=killer)
        thread.start()
        response = client.post(
            "/v1/series/svc/observations", content=body, headers={"Content-Type": "text/csv"}
        )
        stop.set()
        thread.join(timeout=30)
        assert killed, "the ingest finished before its connection could be killed"
        assert response.status_code == 503, response.text[:300]
        with psycopg.connect(url) as check:
            assert check.execute("SELECT count(*) FROM observations").fetchone() == (0,)
        retry = client.post(
            "/v1/series/svc/observations", content=body, headers={"Content-Type": "text/csv"}
        )
        assert retry.status_code == 200, retry.text[:300]
        with psycopg.connect(url) as check:
            assert check.execute("SELECT count(*) FROM observations").fetchone() == (150_000,)
