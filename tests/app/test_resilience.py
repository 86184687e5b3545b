"""Killed jobs and concurrent writers: nothing half-written, nothing lost, no 500s."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app import ingest
from app.db import Database, repository
from app.db.models import ForecastPoint, ForecastRun, JobLock

SLOW_MODELS = "seasonal_naive,seasonal_ma,arima"


def series_frame(name: str, days: int = 21, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    hours = pd.date_range("2026-10-01T00:00Z", periods=days * 24, freq="h")
    shape = 1 + 0.5 * np.sin(2 * np.pi * hours.hour.to_numpy() / 24)
    requests = 3600 * shape * rng.lognormal(0, 0.1, len(hours))
    return pd.DataFrame(
        {
            "series": name,
            "hour": hours,
            "requests": requests,
            "prompt_tokens": requests * 300,
            "completion_tokens": requests * 100,
            "total_tokens": requests * 400,
            "peak_rps": np.nan,
        }
    )


def load_series(database: Database, names: list[str], *, first_seed: int) -> None:
    with database.transaction() as session:
        for offset, name in enumerate(names):
            ingest.store(session, series_frame(name, seed=first_seed + offset), create_series=True)


def forecast_command(database_url: str, models: str) -> list[str]:
    """``gpucast forecast --all`` for requests, one worker, in a child process."""
    return [
        sys.executable,
        "-m",
        "app.cli",
        "--database-url",
        database_url,
        "forecast",
        "--all",
        "--workers",
        "1",
        "--metric",
        "requests",
        "--models",
        models,
    ]


def count_runs(database: Database) -> tuple[int, list[int]]:
    """Complete runs, and the point counts of every stored run."""
    with database.transaction() as session:
        complete = session.scalar(
            select(func.count()).select_from(ForecastRun).where(ForecastRun.status == "complete")
        )
        counts = [
            session.scalar(
                select(func.count())
                .select_from(ForecastPoint)
                .where(ForecastPoint.run_id == run_id)
            )
            for run_id in session.scalars(
                select(ForecastRun.id).where(ForecastRun.status == "complete")
            )
        ]
    return int(complete or 0), [int(c or 0) for c in counts]


def test_kill_9_mid_run_leaves_only_complete_runs(database: Database, database_url: str) -> None:
    names = [f"svc-{i:02d}" for i in range(8)]
    load_series(database, names, first_seed=0)
    command = forecast_command(database_url, SLOW_MODELS)
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and count_runs(database)[0] < 2:
        assert process.poll() is None, "the job ended before it could be killed"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    complete, points = count_runs(database)
    assert 2 <= complete < len(names), "the kill must land in the middle of the run"
    assert points == [24] * complete  # every visible run is whole
    # the lock is released (PostgreSQL) or detected as stale (SQLite row of a dead pid)
    fast = forecast_command(database_url, "seasonal_naive,seasonal_ma")
    rerun = subprocess.run(fast, capture_output=True, text=True, timeout=300, check=False)
    assert rerun.returncode == 0, rerun.stderr
    with database.transaction() as session:
        latest = {repository.get_series(session, name=n).id: n for n in names}
        done = (
            session.execute(select(ForecastRun.series_id).where(ForecastRun.status == "complete"))
            .scalars()
            .all()
        )
        assert set(done) == set(latest)
        assert session.scalar(select(func.count()).select_from(JobLock)) == 0


def test_eight_concurrent_ingests_of_overlapping_hours(
    client: TestClient, database: Database
) -> None:
    assert client.post("/v1/series", json={"name": "shared"}).status_code == 201
    hours = pd.date_range("2026-11-01T00:00Z", periods=48, freq="h")
    bodies = []
    for writer in range(8):
        chosen = hours[writer * 4 : writer * 4 + 24]  # overlapping windows
        bodies.append(
            [
                {"timestamp": h.isoformat(), "requests": float(writer * 1000 + k)}
                for k, h in enumerate(chosen)
            ]
        )
    barrier = threading.Barrier(8)

    def post(body: list[dict[str, object]]) -> int:
        barrier.wait(timeout=30)
        return client.post("/v1/series/shared/observations", json=body).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(post, bodies))
    assert statuses == [200] * 8
    with database.transaction() as session:
        series = repository.get_series(session, name="shared")
        stored = repository.observations_frame(session, series_id=series.id)
    assert stored["hour"].is_unique
    assert len(stored) == len({h for body in bodies for h in (r["timestamp"] for r in body)})
    versions: dict[str, set[float]] = {}
    for body in bodies:
        for record in body:
            versions.setdefault(pd.Timestamp(record["timestamp"]).isoformat(), set()).add(
                record["requests"]
            )
    for row in stored.itertuples(index=False):
        assert row.requests in versions[row.hour.isoformat()]


def test_reads_during_a_run_always_see_complete_runs(
    database: Database, database_url: str, client: TestClient
) -> None:
    names = [f"svc-{i}" for i in range(4)]
    load_series(database, names, first_seed=10)
    command = forecast_command(database_url, SLOW_MODELS)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: list[int] = []
    errors: list[str] = []
    while process.poll() is None:
        for name in names:
            response = client.get(f"/v1/series/{name}/forecast")
            if response.status_code == 200:
                seen.append(len(response.json()["points"]))
            elif response.status_code != 404:
                errors.append(f"{response.status_code} {response.text[:200]}")
        time.sleep(0.02)
    assert process.returncode == 0
    assert not errors
    assert seen and set(seen) == {24}
