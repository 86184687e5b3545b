"""Forecast, capacity, Kubernetes and calculator endpoints on SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from fastapi.testclient import TestClient

SERIES = "prod-us/llama-3.1-70b"
FAST = "seasonal_naive,seasonal_ma"
PROFILE = {
    "name": "h100-70b",
    "gpu_type": "H100-80G",
    "model": "llama-3.1-70b",
    "tokens_per_s_per_gpu": 2000,
    "gpus_per_replica": 2,
    "usd_per_hour_on_demand": 2.5,
    "usd_per_hour_reserved": 1.6,
}


def hourly_body(days: int = 14, level: float = 36_000.0) -> list[dict[str, object]]:
    rng = np.random.default_rng(0)
    hours = pd.date_range("2026-11-01T00:00Z", periods=days * 24, freq="h")
    shape = 1 + 0.5 * np.sin(2 * np.pi * (hours.hour.to_numpy() - 8) / 24)
    requests = level * shape * rng.lognormal(0, 0.03, len(hours))
    return [
        {
            "timestamp": h.isoformat(),
            "requests": float(r),
            "prompt_tokens": float(r * 800),
            "completion_tokens": float(r * 200),
        }
        for h, r in zip(hours, requests, strict=True)
    ]


@pytest.fixture
def loaded(client: TestClient) -> TestClient:
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    response = client.post(f"/v1/series/{SERIES}/observations", json=hourly_body())
    assert response.status_code == 200, response.text
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    return client


def forecast_now(client: TestClient, **params: str) -> dict:
    response = client.post(f"/v1/series/{SERIES}/forecast", params={"models": FAST, **params})
    assert response.status_code == 200, response.text
    return response.json()


def test_forecast_now_then_read_latest(loaded: TestClient) -> None:
    body = forecast_now(loaded)
    assert [r["metric"] for r in body["runs"]] == ["requests", "tokens"]
    assert all(r["status"] == "complete" and len(r["points"]) == 24 for r in body["runs"])
    latest = loaded.get(f"/v1/series/{SERIES}/forecast", params={"metric": "tokens"}).json()
    assert latest["id"] == body["runs"][1]["id"]
    assert latest["model"] in FAST.split(",")
    assert {s["model"] for s in latest["scores"]} >= set(FAST.split(","))
    assert latest["points"][0]["ds"] == "2026-11-15T00:00:00Z"
    for point in latest["points"]:
        assert point["lo_95"] <= point["lo_80"] <= point["yhat"] <= point["hi_80"] <= point["hi_95"]


def test_runs_history_keeps_older_runs(loaded: TestClient) -> None:
    forecast_now(loaded, metric="requests")
    forecast_now(loaded, metric="requests")
    runs = loaded.get(f"/v1/series/{SERIES}/forecast/runs").json()
    assert len(runs) == 2 and runs[0]["id"] > runs[1]["id"]
    assert all(r["metric"] == "requests" and "points" not in r for r in runs)


def test_no_forecast_yet_is_404(loaded: TestClient) -> None:
    response = loaded.get(f"/v1/series/{SERIES}/forecast")
    assert response.status_code == 404
    assert "no complete requests forecast yet" in response.json()["detail"]


def test_unknown_model_is_422(loaded: TestClient) -> None:
    response = loaded.post(f"/v1/series/{SERIES}/forecast", params={"models": "magic"})
    assert response.status_code == 422
    assert "unknown model 'magic'" in response.json()["detail"]


def test_capacity_plan_matches_the_formula(loaded: TestClient) -> None:
    forecast_now(loaded)
    tokens = loaded.get(f"/v1/series/{SERIES}/forecast", params={"metric": "tokens"}).json()
    response = loaded.get(
        f"/v1/series/{SERIES}/capacity", params={"profile": "h100-70b", "band": "hi_80"}
    )
    assert response.status_code == 200, response.text
    plan = response.json()
    assert plan["source"] == "tokens forecast" and len(plan["hours"]) == 24
    raw = []
    for hour, point in zip(plan["hours"], tokens["points"], strict=True):
        tokens_per_s = point["hi_80"] / 3600 * hour["peak_factor"]
        expected = max(1, int(np.ceil(round(tokens_per_s / (2000 * 0.75) * 1.2, 9))))
        expected += expected % 2  # whole replicas of 2 GPUs
        assert hour["raw_gpus"] == expected
        assert hour["replicas"] == hour["gpus"] // 2
        raw.append(expected)
    # the executed schedule: a lower count only after the 1800 s hold (at the next hour)
    held = [max(raw[max(i - 1, 0) : i + 1]) for i in range(len(raw))]
    assert [h["gpus"] for h in plan["hours"]] == held
    assert plan["peak_gpus"] == max(h["gpus"] for h in plan["hours"])
    rises = sum(max(b - a, 0) for a, b in zip(held, held[1:], strict=False))
    assert plan["gpu_hours"] == pytest.approx(sum(held) + rises * 300 / 3600)
    assert (plan["cold_start_s"], plan["scale_down_hold_s"], plan["min_gpus"]) == (300, 1800, 1)
    assert plan["max_gpus"] is None
    assert plan["stale"] is True  # this history ended in November: trained more than 36 h ago
    assert plan["peak_factor"]["source"] == "none"  # no peak_rps stored: factor 1, and it says so
    assert plan["cost"]["total_usd"] > 0
    stricter = loaded.get(
        f"/v1/series/{SERIES}/capacity",
        params={"profile": "h100-70b", "band": "hi_95", "utilization_target": 0.5},
    ).json()
    assert stricter["peak_gpus"] >= plan["peak_gpus"]


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"profile": "h100-70b", "utilization_target": 0}, 422),
        ({"profile": "h100-70b", "utilization_target": 1.5}, 422),
        ({"profile": "h100-70b", "band": "median"}, 422),
        ({"profile": "h100-70b", "safety_factor": "abc"}, 422),
        ({"profile": "nope"}, 404),
        ({}, 422),
    ],
)
def test_capacity_rejects_bad_parameters(loaded: TestClient, params: dict, status: int) -> None:
    forecast_now(loaded, metric="tokens")
    response = loaded.get(f"/v1/series/{SERIES}/capacity", params=params)
    assert response.status_code == status
    assert "detail" in response.json()


def test_kubernetes_scaled_object(loaded: TestClient) -> None:
    forecast_now(loaded, metric="tokens")
    response = loaded.get(
        f"/v1/series/{SERIES}/kubernetes", params={"profile": "h100-70b", "namespace": "inference"}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/yaml")
    document = yaml.safe_load(response.text)
    assert document["kind"] == "ScaledObject"
    # readable, and unique to the series (Prod-US/Llama-3.1-70B would read the same)
    assert document["metadata"]["name"] == "prod-us-llama-3-1-70b-9a03494f6d"
    assert document["spec"]["scaleTargetRef"]["name"] == document["metadata"]["name"]
    assert document["metadata"]["namespace"] == "inference"


def test_accuracy_after_actuals_arrive(loaded: TestClient) -> None:
    forecast_now(loaded, metric="requests")
    later = hourly_body(days=15)[-24:]
    assert loaded.post(f"/v1/series/{SERIES}/observations", json=later).status_code == 200
    report = loaded.get(
        f"/v1/series/{SERIES}/forecast/accuracy", params={"profile": "h100-70b"}
    ).json()
    (run,) = report["runs"]
    assert run["hours_with_actuals"] == 24
    assert 0 <= run["wape"] < 0.2 and run["mase"] > 0
    assert run["hours_above_capacity"] is not None
    assert report["trend"]["runs_scored"] == 1


def test_accuracy_judges_a_requests_plan_on_the_tokens_the_hours_really_carried(
    loaded: TestClient,
) -> None:
    """The requests forecast stays right, but the day after the run each request carries three
    times the tokens: the plan (sized with the mix up to the run) falls short, and the hours
    above capacity say so. With the same mix, the same run's plan holds every hour."""
    forecast_now(loaded, metric="requests")
    day = hourly_body(days=15)[-24:]
    assert loaded.post(f"/v1/series/{SERIES}/observations", json=day).status_code == 200
    params = {"profile": "h100-70b", "metric": "requests"}
    same = loaded.get(f"/v1/series/{SERIES}/forecast/accuracy", params=params).json()
    (run,) = same["runs"]
    assert run["hours_with_actuals"] == 24 and run["hours_above_capacity"] == 0
    heavier = [
        {**row, **{key: row[key] * 3 for key in ("prompt_tokens", "completion_tokens")}}
        for row in day
    ]
    assert loaded.post(f"/v1/series/{SERIES}/observations", json=heavier).status_code == 200
    report = loaded.get(f"/v1/series/{SERIES}/forecast/accuracy", params=params).json()
    (run,) = report["runs"]
    assert 0 <= run["wape"] < 0.2  # the requests forecast itself was still right
    assert run["hours_above_capacity"] == 24


def test_accuracy_of_a_series_without_token_counts_has_no_capacity_figure(
    client: TestClient,
) -> None:
    rows = [{"timestamp": r["timestamp"], "requests": r["requests"]} for r in hourly_body(days=15)]
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    response = client.post(f"/v1/series/{SERIES}/observations", json=rows[:-24])
    assert response.status_code == 200, response.text
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    forecast_now(client, metric="requests")
    assert client.post(f"/v1/series/{SERIES}/observations", json=rows[-24:]).status_code == 200
    report = client.get(
        f"/v1/series/{SERIES}/forecast/accuracy", params={"profile": "h100-70b"}
    ).json()
    (run,) = report["runs"]
    assert run["hours_with_actuals"] == 24 and 0 <= run["wape"] < 0.2
    assert run["hours_above_capacity"] is None


def test_estimate_endpoint(client: TestClient) -> None:
    response = client.post(
        "/v1/capacity/estimate",
        json={"model": "llama-3.1-70b", "gpu": "h100-80g", "qps": 10, "slo_latency_s": 2.0},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (
        body["tensor_parallel"] >= 2 and body["gpus"] == body["replicas"] * body["tensor_parallel"]
    )
    bad = client.post(
        "/v1/capacity/estimate",
        json={"model": "gpt-99", "gpu": "h100-80g", "qps": 10, "slo_latency_s": 2.0},
    )
    assert bad.status_code == 422 and "gpt-99" in bad.json()["detail"]


def test_simulate_posted_load(client: TestClient) -> None:
    load = [100 + 80 * np.sin(2 * np.pi * h / 24) for h in range(24 * 4)]
    response = client.post(
        "/v1/capacity/simulate", json={"load_qps": load, "replica_qps": 20, "usd_per_gpu_hour": 2.0}
    )
    assert response.status_code == 200, response.text
    rows = {row["policy"]: row for row in response.json()["policies"]}
    assert set(rows) == {"static_peak", "reactive_hpa", "tiered", "predictive", "hybrid"}
    assert rows["static_peak"]["gpu_hours"] >= rows["reactive_hpa"]["gpu_hours"]
    assert rows["static_peak"]["hours_above_100"] == 0


def test_simulate_stored_series(loaded: TestClient) -> None:
    response = loaded.post("/v1/capacity/simulate", json={"series": SERIES, "replica_qps": 5})
    assert response.status_code == 200, response.text
    assert response.json()["hours"] == 24 * 7


@pytest.mark.parametrize(
    "body",
    [
        {"replica_qps": 5},
        {"series": "x", "load_qps": [1.0] * 48, "replica_qps": 5},
        {"load_qps": [1.0] * 10, "replica_qps": 5},
        {"load_qps": [1.0] * 48, "replica_qps": 0},
        {"load_qps": [-1.0] * 48, "replica_qps": 5},
    ],
)
def test_simulate_rejects_bad_bodies(client: TestClient, body: dict) -> None:
    assert client.post("/v1/capacity/simulate", json=body).status_code == 422


def test_kubernetes_scaled_object_writes_the_fallback_behavior_asked(loaded: TestClient) -> None:
    forecast_now(loaded, metric="tokens")
    url = f"/v1/series/{SERIES}/kubernetes"
    base = {"profile": "h100-70b", "namespace": "inference"}
    default = yaml.safe_load(loaded.get(url, params=base).text)
    # auto without a reactive trigger: static, KEDA's default, so not written
    assert "behavior" not in default["spec"]["fallback"]
    held = loaded.get(url, params={**base, "fallback_behavior": "currentReplicas"})
    assert held.status_code == 200, held.text
    fallback = yaml.safe_load(held.text)["spec"]["fallback"]
    assert fallback["behavior"] == "currentReplicas"
    assert fallback["replicas"] == default["spec"]["fallback"]["replicas"]
    reactive = {
        "reactive_query": "sum(vllm:num_requests_running)",
        "reactive_target": 24,
        "prometheus_url": "http://prometheus:9090",
    }
    beside = yaml.safe_load(loaded.get(url, params={**base, **reactive}).text)
    assert beside["spec"]["fallback"]["behavior"] == "currentReplicas"  # auto, beside it
    pinned = loaded.get(url, params={**base, **reactive, "fallback_behavior": "static"})
    assert "behavior" not in yaml.safe_load(pinned.text)["spec"]["fallback"]
    wrong = loaded.get(url, params={**base, "fallback_behavior": "currentReplicasIfLower"})
    assert wrong.status_code == 422 and "fallback_behavior" in wrong.text


def test_backtest_refuses_an_unknown_fallback_behavior(loaded: TestClient) -> None:
    response = loaded.get(
        f"/v1/series/{SERIES}/capacity/backtest",
        params={"profile": "h100-70b", "fallback_behavior": "never"},
    )
    assert response.status_code == 422 and "fallback_behavior" in response.text
