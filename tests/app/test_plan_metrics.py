"""Per-series plan gauges in /metrics (current plan hour, from stored forecasts, no refit) and a
route label for every served route, the API docs included."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from app import plans
from app.db import Database
from app.db.models import PlanCalibration
from tests.app.test_plan_surfaces import SERIES, _load, history_rows
from tests.support.clock import settled_hour


def samples(client: TestClient) -> dict[str, dict[tuple[str, ...], float]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    found: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            key = tuple(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found.setdefault(sample.name, {})[key] = sample.value
    return found


@pytest.fixture
def planned(client: TestClient) -> TestClient:
    return _load(client, history_rows(settled_hour()))


def test_the_current_plan_hour_per_series_and_profile(
    planned: TestClient, database: Database
) -> None:
    # a plan read stores band auto's choice; the scrape then sizes as the REST plan does
    plan = planned.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"}).json()
    desired = planned.get(
        f"/v1/series/{SERIES}/desired-replicas", params={"profile": "l4-small"}
    ).json()
    found = samples(planned)
    labels = ("profile=l4-small", f"series={SERIES}")
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    at = next(i for i, h in enumerate(plan["hours"]) if datetime.fromisoformat(h["hour"]) == now)
    assert found["gpucast_plan_gpus"][labels] == plan["hours"][at]["gpus"]
    assert found["gpucast_plan_desired_replicas"][labels] == desired["desired_replicas"]
    with database.transaction() as session:
        stored = plans.series_plan(
            session, series_name=SERIES, profile_name="l4-small", params=plans.PlanParams()
        )
    assert stored.cost is not None
    assert found["gpucast_plan_cost_usd"][labels] == pytest.approx(stored.cost.hourly_usd[at])
    assert found["gpucast_plan_cost_usd"][labels] > 0


def test_a_scrape_never_calibrates(planned: TestClient, database: Database) -> None:
    found = samples(planned)
    assert found["gpucast_plan_desired_replicas"][("profile=l4-small", f"series={SERIES}")] >= 1
    with database.transaction() as session:
        assert session.scalar(select(func.count()).select_from(PlanCalibration)) == 0


def test_a_series_without_a_forecast_has_no_plan_gauges(client: TestClient) -> None:
    assert client.post("/v1/series", json={"name": "bare"}).status_code == 201
    found = samples(client)
    assert not found.get("gpucast_plan_desired_replicas")


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/docs", "/docs"),
        ("/openapi.json", "/openapi.json"),
        ("/static/docs/swagger-ui.css", "/static/docs/{path}"),
    ],
)
def test_every_served_route_has_its_label(client: TestClient, path: str, route: str) -> None:
    assert client.get(path).status_code == 200
    requests = samples(client)["gpucast_http_requests_total"]
    assert ("method=GET", f"route={route}", "status=200") in requests
