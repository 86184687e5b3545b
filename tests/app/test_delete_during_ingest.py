"""Deleting a series while an ingest into it is in progress leaves no row behind, in any table."""

from __future__ import annotations

import threading
import time

import pandas as pd
from fastapi.testclient import TestClient
from sqlalchemy import inspect, text

from app import ingest
from app.db import Database
from app.db.models import Base

SERIES = "svc/delete-race"


def orphan_rows(database: Database) -> dict[str, int]:
    """Rows, per table and column, that point at a series (``series_id``) or at any row a
    foreign key names, which no longer exists."""
    checks: list[tuple[str, str, str, str]] = []
    for table in Base.metadata.sorted_tables:
        for column in table.columns:
            for key in column.foreign_keys:
                checks.append((table.name, column.name, key.column.table.name, key.column.name))
            if column.name == "series_id" and not column.foreign_keys:
                checks.append((table.name, column.name, "series", "id"))
    live = set(inspect(database.engine).get_table_names())
    found: dict[str, int] = {}
    with database.engine.connect() as connection:
        for child, column, parent, key in checks:
            if child not in live:
                continue
            count = connection.execute(
                text(
                    f"SELECT count(*) FROM {child} c WHERE c.{column} IS NOT NULL AND NOT EXISTS "
                    f"(SELECT 1 FROM {parent} p WHERE p.{key} = c.{column})"
                )
            ).scalar_one()
            if count:
                found[f"{child}.{column}"] = count
    return found


def _hours(count: int) -> pd.DataFrame:
    hours = pd.date_range("2025-01-01", periods=count, freq="h", tz="UTC")
    return pd.DataFrame(
        {
            "series": SERIES,
            "hour": hours,
            "requests": 100.0,
            "prompt_tokens": 1000.0,
            "completion_tokens": 200.0,
            "total_tokens": 1200.0,
            "peak_rps": float("nan"),
        }
    )


def test_a_delete_during_an_ingest_leaves_no_orphan_rows(
    client: TestClient, database: Database
) -> None:
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    answers: list[int] = []
    with database.transaction() as session:
        # The ingest has written its rows and not committed when the delete arrives.
        ingest.store(session, _hours(20_000), create_series=False)
        deleter = threading.Thread(
            target=lambda: answers.append(client.delete(f"/v1/series/{SERIES}").status_code)
        )
        deleter.start()
        time.sleep(1.0)  # the delete is now waiting for the ingest (or already went ahead)
    deleter.join(timeout=60)
    assert answers == [204]
    assert client.get(f"/v1/series/{SERIES}").status_code == 404
    assert orphan_rows(database) == {}


def test_an_ingest_after_a_delete_finds_no_series(client: TestClient, database: Database) -> None:
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    body = [{"timestamp": "2026-11-30T00:00:00Z", "requests": 5}]
    assert client.delete(f"/v1/series/{SERIES}").status_code == 204
    assert client.post(f"/v1/series/{SERIES}/observations", json=body).status_code == 404
    assert orphan_rows(database) == {}
