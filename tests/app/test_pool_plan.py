"""GET /v1/pools/{name}/plan and `gpucast pool plan`: members' own plans placed on the pool's
nodes, on SQLite and PostgreSQL — the grants under a quota, unplanned members named, and
bad parameters answered with 4xx."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

import capacity
from app.cli import main as cli_main
from tests.app.test_api_forecasts import FAST, hourly_body

PROFILES = [
    {
        "name": "h100-tp2",
        "gpu_type": "H100-80G",
        "model": "llama-3.1-70b",
        "tokens_per_s_per_gpu": 2000,
        "gpus_per_replica": 2,
        "usd_per_hour_on_demand": 2.5,
    },
    {
        "name": "h100-tp4",
        "gpu_type": "H100-80G",
        "model": "llama-3.1-405b",
        "tokens_per_s_per_gpu": 1500,
        "gpus_per_replica": 4,
        "usd_per_hour_on_demand": 2.5,
    },
]
MEMBERS = [
    ("team/chat", "h100-tp2", "critical", 36_000.0),
    ("team/code", "h100-tp4", "standard", 24_000.0),
    ("team/batch", "h100-tp2", "batch", 30_000.0),
]


def _pool_body(quota: int | None = None, members=MEMBERS) -> dict:
    return {
        "name": "shared",
        "gpu_type": "H100-80G",
        "gpus_per_node": 8,
        "node_prices": {
            "on_demand_usd_per_hour": 20.0,
            "reserved_usd_per_hour": 12.0,
            "spot_usd_per_hour": 8.0,
        },
        "quota_nodes": quota,
        "spot_interruption": 0.05,
        "members": [
            {
                "series": series,
                "profile": profile,
                "priority": priority,
                "spot_ok": priority == "batch",
            }
            for series, profile, priority, _ in members
        ],
    }


@pytest.fixture
def pooled(client: TestClient) -> TestClient:
    for profile in PROFILES:
        assert client.post("/v1/gpu-profiles", json=profile).status_code == 201
    for series, _, _, level in MEMBERS:
        assert client.post("/v1/series", json={"name": series}).status_code == 201
        response = client.post(f"/v1/series/{series}/observations", json=hourly_body(level=level))
        assert response.status_code == 200, response.text
    return client


def _forecast(client: TestClient, series: str) -> None:
    response = client.post(f"/v1/series/{series}/forecast", params={"models": FAST})
    assert response.status_code == 200, response.text


def _member_plan(client: TestClient, series: str, profile: str) -> dict:
    response = client.get(
        f"/v1/series/{series}/capacity", params={"profile": profile, "band": "yhat"}
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_pool_plan_places_every_members_own_plan(pooled: TestClient) -> None:
    for series, *_ in MEMBERS:
        _forecast(pooled, series)
    assert pooled.post("/v1/pools", json=_pool_body()).status_code == 201
    response = pooled.get("/v1/pools/shared/plan", params={"band": "yhat"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["pool"] == "shared" and body["unplanned"] == [] and body["hours_asked"] == 24
    assert len(body["hours"]) == 24
    member_plans = {
        series: _member_plan(pooled, series, profile) for series, profile, _, _ in MEMBERS
    }
    for index, hour in enumerate(body["hours"]):
        wanted = {series: plan["hours"][index]["gpus"] for series, plan in member_plans.items()}
        granted = {item["member"]: item["granted_gpus"] for item in hour["members"]}
        assert granted == wanted  # no quota: every member gets its own plan
        assert hour["gpus_used"] == sum(wanted.values())
        assert hour["lower_bound"] == -(-hour["gpus_used"] // 8)
        assert hour["nodes"] >= hour["lower_bound"]
        assert hour["fragmentation_gpus"] == hour["nodes"] * 8 - hour["gpus_used"]
        placed = sum(sum(node["replicas"].values()) for node in hour["placement"])
        assert placed == sum(g // (2 if s != "team/code" else 4) for s, g in wanted.items())
        assert not hour["throttled"]
    reservations = body["reservations"]
    # The pool never costs more than the members on nodes of their own. Reserved counts are
    # not comparable: the batch member's replicas fill stable nodes' free GPUs in the pool,
    # while alone its nodes run on spot (cheaper than reserving them).
    assert reservations["pooled_cost_usd"] <= reservations["per_service_cost_usd"]
    assert reservations["pooled_peak_nodes"] <= reservations["per_service_peak_nodes"]
    # the reserved count is the one that makes the pool's timeline cheapest
    prices = capacity.Prices(20.0, 12.0, 0.95 * 8.0 + 0.05 * 20.0)
    nodes = np.array([h["nodes"] for h in body["hours"]], dtype=float)
    stable = np.array([h["stable_nodes"] for h in body["hours"]], dtype=float)
    assert reservations["pooled_reserved_nodes"] == capacity.lowest_cost_reserved(
        nodes, prices, stable=stable
    )
    assert body["total_cost_usd"] == pytest.approx(sum(h["cost_usd"] for h in body["hours"]))
    profiles = {m["member"]: m for m in body["members"]}
    # the load one planned GPU carries: per-GPU tokens/s x utilization target / safety factor
    assert profiles["team/code"]["tokens_per_s_per_gpu"] == pytest.approx(1500 * 0.75 / 1.2)
    assert profiles["team/chat"]["priority"] == "critical"


def test_a_quota_throttles_by_priority_with_rate_limits(pooled: TestClient) -> None:
    for series, *_ in MEMBERS:
        _forecast(pooled, series)
    assert pooled.post("/v1/pools", json=_pool_body()).status_code == 201
    free = pooled.get("/v1/pools/shared/plan", params={"band": "yhat"}).json()
    quota = max(h["nodes"] for h in free["hours"]) - 2
    body = _pool_body(quota=quota)
    body.pop("name")
    assert pooled.put("/v1/pools/shared", json=body).status_code == 200
    tight = pooled.get("/v1/pools/shared/plan", params={"band": "yhat"}).json()
    assert all(h["nodes"] <= quota for h in tight["hours"])
    throttled = [h for h in tight["hours"] if h["throttled"]]
    assert throttled and tight["throttled_hours"] == len(throttled)
    for hour in throttled:
        rows = {item["member"]: item for item in hour["members"]}
        assert rows["team/chat"]["shortfall_gpus"] == 0  # critical is fully served
        assert "batch" in hour["queued_classes"]
        for item in hour["members"]:
            carried = item["granted_gpus"] * next(
                m["tokens_per_s_per_gpu"] for m in tight["members"] if m["member"] == item["member"]
            )
            assert item["granted_tokens_per_s"] == pytest.approx(carried)
            assert item["rate_limit_tokens_per_s"] == pytest.approx(carried)
            # every request of the hand-made history carries 1,000 tokens; both forecasts
            # (tokens and requests) give the hour's figure
            assert item["tokens_per_request"] == pytest.approx(1000.0, rel=1e-6)
            assert item["rate_limit_rps"] == pytest.approx(carried / item["tokens_per_request"])
    sources = {m["member"]: m["tokens_per_request_source"] for m in tight["members"]}
    assert sources == dict.fromkeys(sources, "tokens forecast ÷ requests forecast")


def test_members_without_a_forecast_are_named(pooled: TestClient) -> None:
    _forecast(pooled, "team/chat")
    assert pooled.post("/v1/pools", json=_pool_body()).status_code == 201
    body = pooled.get("/v1/pools/shared/plan").json()
    assert [m["member"] for m in body["members"]] == ["team/chat"]
    assert {item["member"] for item in body["unplanned"]} == {"team/code", "team/batch"}
    assert all("no complete forecast" in item["reason"] for item in body["unplanned"])


def test_no_member_with_a_plan_is_409_and_unknown_pool_404(pooled: TestClient) -> None:
    assert pooled.post("/v1/pools", json=_pool_body()).status_code == 201
    response = pooled.get("/v1/pools/shared/plan")
    assert response.status_code == 409
    assert "no member has a plan" in response.json()["detail"]
    assert pooled.get("/v1/pools/nope/plan").status_code == 404


@pytest.mark.parametrize(
    "params",
    [
        {"hours": 0},
        {"hours": 169},
        {"hours": "x"},
        {"band": "q42"},
        {"utilization_target": 2},
        {"safety_factor": -1},
    ],
)
def test_bad_plan_parameters_are_422(pooled: TestClient, params: dict) -> None:
    _forecast(pooled, "team/chat")
    assert pooled.post("/v1/pools", json=_pool_body()).status_code == 201
    response = pooled.get("/v1/pools/shared/plan", params=params)
    assert response.status_code == 422, response.text
    assert "detail" in response.json()


def test_hours_cuts_the_plan(pooled: TestClient) -> None:
    _forecast(pooled, "team/chat")
    assert pooled.post("/v1/pools", json=_pool_body()).status_code == 201
    body = pooled.get("/v1/pools/shared/plan", params={"hours": 6}).json()
    assert len(body["hours"]) == 6 and body["hours_asked"] == 6


def test_cli_pool_plan(pooled: TestClient, settings, capsys: pytest.CaptureFixture[str]) -> None:
    for series, *_ in MEMBERS:
        _forecast(pooled, series)
    assert pooled.post("/v1/pools", json=_pool_body()).status_code == 201
    url = ["--database-url", settings.database_url]
    assert cli_main([*url, "pool", "plan", "shared", "--band", "yhat", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    api = pooled.get("/v1/pools/shared/plan", params={"band": "yhat"}).json()
    assert [h["nodes"] for h in data["hours"]] == [h["nodes"] for h in api["hours"]]
    assert cli_main([*url, "pool", "plan", "shared", "--band", "yhat"]) == 0
    text = capsys.readouterr().out
    assert "nodes" in text and "team/chat" in text
    assert cli_main([*url, "pool", "plan", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert cli_main([*url, "pool", "plan", "shared", "--hours", "0"]) == 2
