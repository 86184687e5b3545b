"""Parallel ingests of the same new hours into one series store one refresh run per metric
and trained_until, not one per ingest."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import httpx
import pandas as pd
from sqlalchemy import select

from app import ingest
from app.db import Database
from app.db.models import ForecastRun
from app.jobs import run_forecasts
from app.settings import Settings
from tests.app.test_jobs import daily_load
from tests.app.test_plan_cache import FAST, SERIES
from tests.support.server import LiveServer

CLIENTS = 20


def test_parallel_ingests_of_new_hours_refresh_once(settings: Settings, database: Database) -> None:
    load = daily_load()
    with database.transaction() as session:
        ingest.store(session, load.assign(series=SERIES), create_series=True)
    run_forecasts(database, FAST)
    newest = load["hour"].max()
    hours = [
        {
            "timestamp": (newest + pd.Timedelta(hours=ahead)).isoformat(),
            "requests": 3000,
            "prompt_tokens": 1_500_000,
            "completion_tokens": 300_000,
        }
        for ahead in (1, 2)
    ]
    barrier = Barrier(CLIENTS)
    with LiveServer(settings) as base_url:

        def one(_: int) -> int:
            with httpx.Client(base_url=base_url, timeout=120) as client:
                client.get("/healthz")
                barrier.wait()
                return client.post(f"/v1/series/{SERIES}/observations", json=hours).status_code

        with ThreadPoolExecutor(CLIENTS) as pool:
            statuses = list(pool.map(one, range(CLIENTS)))
    assert statuses == [200] * CLIENTS
    with database.transaction() as session:
        runs = session.execute(
            select(ForecastRun.metric, ForecastRun.trained_until).where(
                ForecastRun.kind == "refresh"
            )
        ).all()
    per_key = Counter((metric, trained) for metric, trained in runs)
    assert per_key, "no refresh run was stored"
    assert max(per_key.values()) == 1, per_key
