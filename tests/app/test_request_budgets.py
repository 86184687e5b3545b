"""Bounded work per request: a Grafana query beyond its budgets (ad-hoc filters, series per
target, series x hours) is a clear 4xx at once, repeated filters count once, and a dashboard
refresh that asks the same query again is answered from the response cache until a write."""

from __future__ import annotations

import json
import time

import pandas as pd
from fastapi.testclient import TestClient
from sqlalchemy import insert

from app.db import Database
from app.db.models import Series
from app.grafana.protocol import MAX_FILTERS, MAX_REPLAYS_PER_QUERY, MAX_SERIES_PER_TARGET

RANGE = {"from": "2026-11-29T00:00:00Z", "to": "2026-11-30T00:00:00Z"}


def _query(client: TestClient, **body: object) -> tuple[int, object, float]:
    started = time.perf_counter()
    response = client.post("/grafana/query", json={"range": RANGE, **body})
    return response.status_code, response.json(), time.perf_counter() - started


def test_thousands_of_repeated_filters_are_refused_at_once(client: TestClient) -> None:
    assert client.post("/v1/series", json={"name": "svc"}).status_code == 201
    filters = [{"key": "series", "operator": "=", "value": "svc"}] * 6000
    targets = [{"refId": str(i), "target": "history"} for i in range(10)]
    status, body, seconds = _query(client, targets=targets, adhocFilters=filters)
    assert status == 422, body
    assert seconds < 5
    # within the budget, the repeated filter counts once
    status, body, _ = _query(client, targets=targets[:1], adhocFilters=filters[:MAX_FILTERS])
    assert status == 200, body


def test_a_target_over_too_many_series_is_a_400(client: TestClient, database: Database) -> None:
    count = MAX_SERIES_PER_TARGET + 1
    with database.transaction() as session:
        session.execute(
            insert(Series), [{"name": f"svc-{i:04d}", "labels": {}} for i in range(count)]
        )
    status, body, seconds = _query(client, targets=[{"target": "history"}])
    assert status == 400, body
    assert "series" in body["detail"] and str(MAX_SERIES_PER_TARGET) in body["detail"]
    picked = {"target": "history", "payload": {"series": ["svc-0001", "svc-0002"]}}
    status, body, _ = _query(client, targets=[picked])
    assert status == 200, body
    long_range = {"from": "2020-01-01T00:00:00Z", "to": "2026-11-30T00:00:00Z"}
    response = client.post(
        "/grafana/query", json={"range": long_range, "targets": [{"target": "history"}]}
    )
    assert response.status_code == 400, response.text


def test_a_repeated_query_is_served_from_the_cache_until_a_write(client: TestClient) -> None:
    assert client.post("/v1/series", json={"name": "svc"}).status_code == 201
    hour = pd.Timestamp("2026-11-29T05:00:00Z")
    rows = [{"timestamp": hour.isoformat(), "requests": 10}]
    assert client.post("/v1/series/svc/observations", json=rows).status_code == 200
    target = {"target": "history", "payload": {"series": "svc"}}
    _, first, _ = _query(client, targets=[target])
    engine = client.app.state.database.engine  # type: ignore[attr-defined]
    checkouts: list[int] = []
    from sqlalchemy import event

    def count(*_: object) -> None:
        checkouts.append(1)

    event.listen(engine, "checkout", count)
    try:
        _, again, _ = _query(client, targets=[target])
        assert again == first and checkouts == []
        rows = [{"timestamp": hour.isoformat(), "requests": 20}]
        assert client.post("/v1/series/svc/observations", json=rows).status_code == 200
        _, after, _ = _query(client, targets=[target])
        assert after != first and checkouts
    finally:
        event.remove(engine, "checkout", count)


def test_a_query_asking_for_too_many_plan_replays_is_a_422(client: TestClient) -> None:
    assert client.post("/v1/series", json={"name": "svc"}).status_code == 201
    replays = [
        {"refId": str(i), "target": "plan_backtest", "payload": {"series": "svc", "days": i + 1}}
        for i in range(MAX_REPLAYS_PER_QUERY + 1)
    ]
    status, body, seconds = _query(client, targets=replays)
    assert status == 422, body
    assert f"at most {MAX_REPLAYS_PER_QUERY}" in json.dumps(body)
    assert seconds < 5
    # the same payload asked twice counts once, and hidden targets not at all
    same = [{**replays[0], "refId": str(i)} for i in range(MAX_REPLAYS_PER_QUERY + 1)]
    hidden = [{**t, "hide": True} for t in replays]
    for targets in (same, hidden):
        status, body, _ = _query(client, targets=targets)
        assert status != 422 and "plan replays" not in json.dumps(body), body
