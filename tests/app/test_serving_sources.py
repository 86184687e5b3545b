"""A deployment's serving source: the engine presets, the PromQL built from the names, the
checks (bad names, selectors, URLs are 422 and store nothing), and credentials never shown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db import Database
from app.errors import InputError
from app.sources import import_serving_sources
from app.sources.serving_spec import PRESETS, ServingSpec
from tests.support.prometheus import START, PrometheusServer

SERIES = "prod/chat"
URL = f"/v1/series/{SERIES}/serving-source"


@pytest.fixture
def deployed(client: TestClient) -> TestClient:
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    profile = {"name": "h100", "gpu_type": "H100", "model": "m", "tokens_per_s_per_gpu": 2400.0}
    assert client.post("/v1/gpu-profiles", json=profile).status_code == 201
    put = client.put(f"/v1/series/{SERIES}/deployment", json={"profile": "h100"})
    assert put.status_code == 200, put.text
    return client


def test_vllm_is_the_default_and_every_query_is_built_from_the_names() -> None:
    spec = ServingSpec(url="http://prom:9090", selector='model_name="llama"').validate()
    assert spec.ttft_histogram == "vllm:time_to_first_token_seconds"
    assert dict(spec.queries()) == {
        "requests": 'sum(increase(vllm:request_success_total{model_name="llama"}[1h]))',
        "prompt_tokens": 'sum(increase(vllm:prompt_tokens_total{model_name="llama"}[1h]))',
        "completion_tokens": 'sum(increase(vllm:generation_tokens_total{model_name="llama"}[1h]))',
        "ttft_p95_s": "histogram_quantile(0.95, sum by (le) "
        '(increase(vllm:time_to_first_token_seconds_bucket{model_name="llama"}[1h])))',
        "tpot_p95_s": "histogram_quantile(0.95, sum by (le) "
        '(increase(vllm:time_per_output_token_seconds_bucket{model_name="llama"}[1h])))',
        "replicas": 'avg_over_time(count(vllm:num_requests_running{model_name="llama"})[1h:1m])',
    }


def test_a_name_given_replaces_the_presets_and_kube_state_metrics_counts_replicas() -> None:
    spec = ServingSpec(
        url="http://prom:9090",
        engine="sglang",
        tpot_histogram="sglang:inter_token_latency_seconds",
        kube_deployment="llama-70b",
    ).validate()
    queries = dict(spec.queries())
    assert "sglang:inter_token_latency_seconds_bucket[1h]" in queries["tpot_p95_s"]
    assert "sglang:time_to_first_token_seconds_bucket[1h]" in queries["ttft_p95_s"]
    assert queries["replicas"] == (
        "avg_over_time(sum(kube_deployment_status_replicas_available"
        '{deployment="llama-70b"})[1h:1m])'
    )
    assert set(PRESETS) == {"vllm", "sglang", "nim", "tgi"}


def test_tgi_needs_a_ttft_histogram_given() -> None:
    with pytest.raises(InputError, match="tgi engine exports no ttft histogram"):
        ServingSpec(url="http://prom:9090", engine="tgi").validate()
    spec = ServingSpec(url="http://prom:9090", engine="tgi", ttft_histogram="my_ttft").validate()
    assert spec.requests_counter == "tgi_request_success"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ttft_histogram": "vllm:ttft{x}"}, "not a Prometheus metric name"),
        ({"requests_counter": "1abc"}, "not a Prometheus metric name"),
        ({"selector": 'model_name="a"} or vector(1'}, "label matchers"),
        ({"selector": "model_name=llama"}, "label matchers"),
        ({"kube_deployment": "Llama_70B"}, "Kubernetes object name"),
        ({"kube_deployment": "a", "replicas_query": "vector(1)"}, "not both"),
        ({"engine": "triton"}, "unknown engine"),
        ({"url": "ftp://prom"}, "invalid source URL"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        ServingSpec(**({"url": "http://prom:9090"} | change)).validate()


def test_set_show_and_delete_with_credentials_never_shown(deployed: TestClient) -> None:
    body = {"url": "http://gpucast:s3cret@prom:9090", "bearer_token": "tok-123", "engine": "nim"}
    put = deployed.put(URL, json=body)
    assert put.status_code == 200, put.text
    shown = deployed.get(URL)
    assert shown.status_code == 200
    assert "s3cret" not in shown.text and "tok-123" not in shown.text
    assert shown.json()["url"] == "http://gpucast:***@prom:9090"
    assert shown.json()["bearer_token"] == "set"
    assert shown.json()["requests_counter"] == "e2e_request_latency_seconds_count"
    assert deployed.delete(URL).status_code == 204
    assert deployed.get(URL).status_code == 404


def test_bad_input_is_a_422_and_nothing_is_stored(deployed: TestClient) -> None:
    for body in (
        {"url": "http://prom:9090", "selector": "oops"},
        {"url": "http://prom:9090", "engine": "tgi"},
        {"url": "http://prom:9090", "running_gauge": "a b"},
        {"url": "http://prom:9090", "lookback_hours": 0},
        {"url": "http://prom:9090", "unknown": 1},
    ):
        response = deployed.put(URL, json=body)
        assert response.status_code == 422, body
        assert "detail" in response.json()
    assert deployed.get(URL).status_code == 404


def test_a_series_without_a_deployment_cannot_have_one(client: TestClient) -> None:
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    response = client.put(URL, json={"url": "http://prom:9090"})
    assert response.status_code == 404
    assert "has no deployment" in response.json()["detail"]
    assert (
        client.put("/v1/series/nope/serving-source", json={"url": "http://p:1"}).status_code == 404
    )


def test_the_cli_sets_shows_and_clears_it(
    deployed: TestClient,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.cli import main

    db = ["--database-url", database_url]
    monkeypatch.setenv("PROM_TOKEN", "tok-456")
    command = [*db, "series", "serving-source", SERIES]
    given = ["--url", "http://u:pw@prom:9090", "--engine", "sglang", "--bearer-token-env"]
    assert main([*command, *given, "PROM_TOKEN", "--kube-deployment", "llama"]) == 0
    assert main(command) == 0
    out = capsys.readouterr().out
    assert "tok-456" not in out and ":pw@" not in out and "http://u:***@prom:9090" in out
    assert "sglang:time_to_first_token_seconds" in out
    assert 'kube_deployment_status_replicas_available{deployment="llama"}' in out
    assert deployed.get(URL).json()["bearer_token"] == "set"
    assert main([*command, "--url", "http://prom:9090", "--selector", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "label matchers" in err
    assert deployed.get(URL).json()["engine"] == "sglang"  # the bad one stored nothing
    assert main([*command, "--clear"]) == 0
    assert deployed.get(URL).status_code == 404
    assert main(command) == 2  # nothing to show: one line, exit 2


def test_clearing_the_deployment_removes_its_serving_source(deployed: TestClient) -> None:
    assert deployed.put(URL, json={"url": "http://prom:9090"}).status_code == 200
    assert deployed.delete(f"/v1/series/{SERIES}/deployment").status_code == 204
    assert deployed.get(URL).status_code == 404
    assert deployed.get(f"/v1/series/{SERIES}").status_code == 200  # the series stays


def test_a_query_giving_several_series_fails_that_source_and_stores_nothing(
    deployed: TestClient, database: Database, prometheus_server: PrometheusServer
) -> None:
    # the test server's gpucast_test_pod has a series per pod (a and b) in its first 3 hours
    body = {"url": prometheus_server.url, "replicas_query": "gpucast_test_pod", "lookback_hours": 3}
    assert deployed.put(URL, json=body).status_code == 200
    now = datetime.fromtimestamp(START, tz=UTC) + timedelta(hours=3, minutes=5)
    (outcome,) = import_serving_sources(database, now=now)
    assert outcome.failed and outcome.rows == 0
    assert "replicas query returned 2 series" in (outcome.error or "")
    shown = deployed.get(URL).json()
    assert shown["consecutive_failures"] == 1 and shown["last_error"] == outcome.error
    assert deployed.get("/v1/gpu-profiles/h100/observations").json() == []
