"""A simulate request's work is bounded: replayed hours x policies at most MAX_POLICY_HOURS,
checked before anything is read or replayed (422 naming both numbers)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.api.routes.calculators import MAX_POLICY_HOURS

KINDS = ("static_peak", "reactive_hpa", "tiered", "predictive", "hybrid")


def _policies(count: int) -> list[dict]:
    return [{"kind": KINDS[i % 5], "target_utilization": 0.5 + 0.01 * i} for i in range(count)]


def test_a_year_of_every_policy_is_refused_before_any_work(client: TestClient) -> None:
    hours = 24 + MAX_POLICY_HOURS // 5 + 1  # one replayed hour more than five policies may take
    body = {"load_qps": [10.0] * hours, "replica_qps": 2.0, "policies": _policies(5)}
    response = client.post("/v1/capacity/simulate", json=body)
    assert response.status_code == 422, response.text
    detail = str(response.json()["detail"])
    assert f"{hours - 24:,} replayed hours x 5 policies" in detail
    assert f"{MAX_POLICY_HOURS:,} policy-hours" in detail


def test_a_stored_series_is_bounded_by_its_last_hours(client: TestClient) -> None:
    # the series does not exist: the budget answers first, so nothing was looked up
    body = {
        "series": "nowhere",
        "replica_qps": 2.0,
        "last_hours": 24 * 40,
        "policies": _policies(10),
    }
    response = client.post("/v1/capacity/simulate", json=body)
    assert response.status_code == 422, response.text
    assert "960 replayed hours x 10 policies" in str(response.json()["detail"])
    within = {**body, "last_hours": MAX_POLICY_HOURS // 10}
    assert client.post("/v1/capacity/simulate", json=within).status_code == 404


@pytest.mark.parametrize("policies", [1, 5])
def test_the_budget_itself_is_served(client: TestClient, policies: int) -> None:
    hours = 24 + min(MAX_POLICY_HOURS // policies, 24 * 366 - 24)
    body = {
        "load_qps": [5.0 + (i % 24) for i in range(hours)],
        "replica_qps": 2.0,
        "policies": _policies(policies),
    }
    if policies == 5:  # a shorter load keeps the test quick; the edge is checked by arithmetic
        body["load_qps"] = body["load_qps"][: 24 + 24 * 3]
    response = client.post("/v1/capacity/simulate", json=body)
    assert response.status_code == 200, response.text
    assert len(response.json()["policies"]) == policies
