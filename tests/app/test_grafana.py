"""The Grafana JSON datasource: the plugin's real request shapes, response shapes and values."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app import ingest, plans
from app.api import create_app
from app.db import Database, repository
from app.forecasts import store as forecast_store
from app.grafana import TARGETS
from app.grafana.plan_targets import STALE_SUFFIX
from app.jobs import ForecastOptions, run_forecasts
from app.settings import Settings
from tests.app.test_jobs import daily_load

SERIES = "prod-us/llama-3.1-70b"
OTHER = "prod-eu/llama-3.1-8b"
PROFILE = "h100-70b"
SPIKE = pd.Timestamp("2026-10-18T12:00Z")
RANGE = {
    "from": "2026-10-20T00:00:00.000Z",
    "to": "2026-10-23T00:00:00.000Z",
    "raw": {"from": "now-1d", "to": "now+1d"},
}


def query_body(*targets: dict, **extra: object) -> dict:
    """The /query body exactly as the plugin posts it (shared/grafana-json-datasource.md)."""
    body = {
        "panelId": 2,
        "range": RANGE,
        "interval": "1h",
        "intervalMs": 3600000,
        "maxDataPoints": 1200,
        "targets": list(targets),
        "filters": [],
        "scopedVars": {},
    }
    body.update(extra)
    return body


@pytest.fixture
def loaded(client: TestClient, database: Database) -> TestClient:
    frame = daily_load()
    frame.loc[frame["hour"] == SPIKE, ["requests", "total_tokens"]] *= 8
    for name, data in ((SERIES, frame), (OTHER, daily_load(seed=3, level=600.0))):
        with database.transaction() as session:
            ingest.store(session, data.assign(series=name), create_series=True)
    report = run_forecasts(
        database, ForecastOptions(models=("seasonal_naive", "seasonal_ma"), workers=1)
    )
    assert not report.failed
    profile = {
        "name": PROFILE,
        "gpu_type": "H100-80G",
        "model": "llama-3.1-70b",
        "tokens_per_s_per_gpu": 100,  # small, so the daily cycle changes the GPU count
        "gpus_per_replica": 2,
        "usd_per_hour_on_demand": 4.0,
        "usd_per_hour_reserved": 2.5,
    }
    assert client.post("/v1/gpu-profiles", json=profile).status_code == 201
    event = {
        "name": "launch",
        "start": "2026-10-22T08:00:00Z",
        "end": "2026-10-22T12:00:00Z",
        "series": SERIES,
        "multiplier": 1.5,
    }
    assert client.post("/v1/events", json=event).status_code == 201
    return client


def post_query(client: TestClient, *targets: dict, **extra: object) -> list[dict]:
    response = client.post("/grafana/query", json=query_body(*targets, **extra))
    assert response.status_code == 200, response.text
    return response.json()


def test_health_and_tag_endpoints(loaded: TestClient) -> None:
    assert loaded.get("/grafana/").status_code == 200
    assert loaded.get("/grafana", follow_redirects=False).status_code == 200
    assert loaded.post("/grafana/tag-keys", json={}).json() == [
        {"type": "string", "text": "series"}
    ]
    values = loaded.post("/grafana/tag-values", json={"key": "series"}).json()
    assert values == [{"text": OTHER}, {"text": SERIES}]
    bad = loaded.post("/grafana/tag-values", json={"key": "region"})
    assert bad.status_code == 400 and "series" in bad.json()["detail"]


def test_metrics_lists_every_target_with_existing_options(loaded: TestClient) -> None:
    body = loaded.post("/grafana/metrics", json={"metric": "forecast", "payload": {}}).json()
    assert [m["value"] for m in body] == list(TARGETS)
    by_name = {m["value"]: {p["name"]: p for p in m["payloads"]} for m in body}
    assert [o["value"] for o in by_name["history"]["series"]["options"]] == [OTHER, SERIES]
    assert by_name["history"]["series"]["reloadMetric"] is True
    assert [o["value"] for o in by_name["gpus"]["profile"]["options"]] == [PROFILE]
    bands = [o["value"] for o in by_name["forecast"]["band"]["options"]]
    assert bands == ["yhat", "lo_80", "hi_80", "lo_95", "hi_95", "all"]
    assert by_name["gpus"]["utilization_target"]["type"] == "input"
    for metric in body:
        for payload in metric["payloads"]:
            assert payload["type"] in {"select", "multi-select", "input", "textarea"}
    # An empty body (first load of the editor) works too.
    assert loaded.post("/grafana/metrics").status_code == 200


def test_metric_payload_options(loaded: TestClient) -> None:
    request = {"metric": "history", "payload": {"series": SERIES}, "name": "metric"}
    options = loaded.post("/grafana/metric-payload-options", json=request).json()
    assert [o["value"] for o in options] == [
        "requests",
        "qps",
        "tokens",
        "prompt_tokens",
        "completion_tokens",
        "peak_rps",
    ]
    request = {"metric": "forecast", "payload": {"series": SERIES}, "name": "metric"}
    options = loaded.post("/grafana/metric-payload-options", json=request).json()
    assert {o["value"] for o in options} == {"requests", "qps", "tokens"}
    bad = loaded.post(
        "/grafana/metric-payload-options",
        json={"metric": "history", "payload": {}, "name": "colour"},
    )
    assert bad.status_code == 400 and "series, metric" in bad.json()["detail"]


def test_variable_queries(loaded: TestClient) -> None:
    def variable(query: str) -> list[dict]:
        body = {"payload": {"target": query}, "range": RANGE}
        return loaded.post("/grafana/variable", json=body).json()

    assert variable("series") == [
        {"__text": OTHER, "__value": OTHER},
        {"__text": SERIES, "__value": SERIES},
    ]
    assert variable("profiles") == [{"__text": PROFILE, "__value": PROFILE}]
    assert {v["__value"] for v in variable("metrics")} >= {"requests", "qps", "tokens"}
    bad = loaded.post("/grafana/variable", json={"payload": {"target": "colours"}})
    assert bad.status_code == 400 and "series, profiles, metrics" in bad.json()["detail"]


def test_history_datapoints_equal_the_stored_values(loaded: TestClient, database: Database) -> None:
    target = {"refId": "A", "target": "history", "payload": {"series": SERIES, "metric": "qps"}}
    [series] = post_query(loaded, target)
    assert series["target"] == f"{SERIES} qps"
    with database.transaction() as session:
        stored = repository.observations_frame(
            session,
            series_id=repository.get_series(session, name=SERIES).id,
            start=pd.Timestamp(RANGE["from"]).to_pydatetime(),
        )
    assert len(series["datapoints"]) == 48  # 2026-10-20 and 21; the history ends there
    values = [v for v, _ in series["datapoints"]]
    times = [t for _, t in series["datapoints"]]
    assert values == pytest.approx((stored["requests"] / 3600).tolist())
    assert times == [int(h.value // 10**6) for h in stored["hour"]]
    assert times == sorted(times)


def test_history_honours_max_data_points(loaded: TestClient) -> None:
    target = {"refId": "A", "target": "history", "payload": {"series": SERIES}}
    [full] = post_query(loaded, target)
    [thin] = post_query(loaded, target, maxDataPoints=10)
    assert len(thin["datapoints"]) <= 10
    full_mean = sum(v for v, _ in full["datapoints"]) / len(full["datapoints"])
    thin_mean = sum(v for v, _ in thin["datapoints"]) / len(thin["datapoints"])
    assert thin_mean == pytest.approx(full_mean, rel=0.05)
    assert thin["datapoints"][0][1] == full["datapoints"][0][1]


def test_forecast_bands_are_ordered(loaded: TestClient) -> None:
    payload = {"series": SERIES, "metric": "tokens", "band": "all"}
    result = post_query(loaded, {"refId": "A", "target": "forecast", "payload": payload})
    names = [s["target"] for s in result]
    assert names == [f"{SERIES} tokens {b}" for b in ("yhat", "lo_80", "hi_80", "lo_95", "hi_95")]
    bands = {s["target"].rsplit(" ", 1)[1]: [v for v, _ in s["datapoints"]] for s in result}
    assert len(bands["yhat"]) == 24
    for i in range(24):
        assert bands["lo_95"][i] <= bands["lo_80"][i] <= bands["yhat"][i]
        assert bands["yhat"][i] <= bands["hi_80"][i] <= bands["hi_95"][i]
    first = result[0]["datapoints"][0][1]
    assert first == int(pd.Timestamp("2026-10-22T00:00Z").value // 10**6)


def test_forecast_single_band_and_qps(loaded: TestClient) -> None:
    payload = {"series": SERIES, "metric": "requests", "band": "hi_80"}
    [requests] = post_query(loaded, {"refId": "A", "target": "forecast", "payload": payload})
    [qps] = post_query(
        loaded, {"refId": "A", "target": "forecast", "payload": {**payload, "metric": "qps"}}
    )
    assert [v / 3600 for v, _ in requests["datapoints"]] == pytest.approx(
        [v for v, _ in qps["datapoints"]]
    )


def test_gpus_and_cost_equal_the_plan(loaded: TestClient, database: Database) -> None:
    payload = {
        "series": SERIES,
        "profile": PROFILE,
        "band": "hi_95",
        "utilization_target": "0.6",
        "safety_factor": 1.5,
        "replicas": "true",
    }
    gpus, replicas = post_query(loaded, {"refId": "B", "target": "gpus", "payload": payload})
    [cost] = post_query(loaded, {"refId": "C", "target": "cost", "payload": payload})
    params = plans.PlanParams(band="hi_95", utilization_target=0.6, safety_factor=1.5)
    with database.transaction() as session:
        plan = plans.series_plan(session, series_name=SERIES, profile_name=PROFILE, params=params)
    frame = plan.plan.frame
    stale = STALE_SUFFIX if plan.is_stale() else ""  # the October forecast is old by now
    assert gpus["target"] == f"{SERIES} gpus ({PROFILE}){stale}"
    assert cost["target"] == f"{SERIES} cost usd/h ({PROFILE}){stale}"
    assert [v for v, _ in gpus["datapoints"]] == frame["gpus"].tolist()
    assert [v for v, _ in replicas["datapoints"]] == frame["replicas"].tolist()
    assert [t for _, t in gpus["datapoints"]] == [int(h.value // 10**6) for h in frame["hour"]]
    assert plan.cost is not None
    assert sum(v for v, _ in cost["datapoints"]) == pytest.approx(plan.cost.total_usd)
    assert all(v >= 2.5 * plan.cost.reserved_gpus for v, _ in cost["datapoints"])


def test_backtest_table_lists_every_candidate(loaded: TestClient) -> None:
    payload = {"series": SERIES, "metric": "tokens"}
    [table] = post_query(loaded, {"refId": "A", "target": "backtest", "payload": payload})
    assert table["type"] == "table"
    columns = [c["text"] for c in table["columns"]]
    assert columns[:5] == ["Time", "series", "metric", "model", "chosen"]
    assert "mase" in columns
    rows = [dict(zip(columns, row, strict=True)) for row in table["rows"]]
    assert {r["model"] for r in rows} == {"seasonal_naive", "seasonal_ma"}
    assert sum(r["chosen"] == "yes" for r in rows) == 1
    assert all(r["series"] == SERIES and r["metric"] == "tokens" for r in rows)


def test_accuracy_target(loaded: TestClient) -> None:
    payload = {"series": SERIES, "metric": "requests", "measure": "wape"}
    [series] = post_query(
        loaded,
        {"refId": "A", "target": "accuracy", "payload": payload},
        range={"from": "2026-10-01T00:00:00Z", "to": "2026-10-30T00:00:00Z"},
    )
    # The only run has no actuals after it yet: one point at trained-until, value null.
    assert series["datapoints"] == [[None, int(pd.Timestamp("2026-10-21T23:00Z").value // 10**6)]]


ANNOTATION_COLUMNS = ["Time", "TimeEnd", "Title", "Text", "Tags"]


def annotation_rows(client: TestClient, target: str, payload: dict, **extra: object) -> list:
    [table] = post_query(client, {"refId": "Anno", "target": target, "payload": payload}, **extra)
    assert table["type"] == "table"
    assert [c["text"] for c in table["columns"]] == ANNOTATION_COLUMNS
    assert [c["type"] for c in table["columns"]][:2] == ["time", "time"]
    return table["rows"]


def test_event_annotations(loaded: TestClient) -> None:
    [row] = annotation_rows(loaded, "events", {"series": SERIES})
    assert row[:3] == [
        int(pd.Timestamp("2026-10-22T08:00Z").value // 10**6),
        int(pd.Timestamp("2026-10-22T12:00Z").value // 10**6),
        "launch",
    ]
    assert "x1.5" in row[3] and SERIES in row[4]
    assert annotation_rows(loaded, "events", {"series": OTHER}) == []


def test_anomaly_annotations(loaded: TestClient) -> None:
    wide = {"from": "2026-10-01T00:00:00Z", "to": "2026-10-23T00:00:00Z"}
    rows = annotation_rows(loaded, "anomalies", {"series": SERIES}, range=wide)
    spike = int(SPIKE.value // 10**6)
    assert spike in [r[0] for r in rows]
    assert annotation_rows(loaded, "anomalies", {"series": SERIES}) == []  # outside the range


def test_scale_event_annotations_match_plan_changes(loaded: TestClient, database: Database) -> None:
    payload = {"series": SERIES, "profile": PROFILE, "band": "hi_80"}
    rows = annotation_rows(loaded, "scale_events", payload)
    with database.transaction() as session:  # the plan on the same band as the annotations
        plan = plans.series_plan(
            session,
            series_name=SERIES,
            profile_name=PROFILE,
            params=plans.PlanParams(band="hi_80"),
        )
    gpus = plan.plan.frame["gpus"].tolist()
    hours = plan.plan.frame["hour"].tolist()
    changes = [int(hours[i].value // 10**6) for i in range(1, 24) if gpus[i] != gpus[i - 1]]
    assert changes, "the daily cycle must change the GPU count"
    # TimeEnd is the hour the executed count changes; a rise starts a cold start earlier.
    assert [r[1] for r in rows] == changes
    assert all(r[1] - r[0] in (0, 300_000) for r in rows)
    assert all(r[2].startswith("scale ") and "GPUs" in r[2] for r in rows)


def test_adhoc_filter_applies_to_targets_without_a_series(loaded: TestClient) -> None:
    filters = [{"key": "series", "operator": "=", "value": OTHER}]
    target = {"refId": "A", "target": "history", "payload": {"metric": "tokens"}}
    assert [s["target"] for s in post_query(loaded, target, filters=filters)] == [f"{OTHER} tokens"]
    everything = post_query(loaded, target)
    assert [s["target"] for s in everything] == [f"{OTHER} tokens", f"{SERIES} tokens"]
    excluded = [{"key": "series", "operator": "!=", "value": OTHER}]
    assert [s["target"] for s in post_query(loaded, target, filters=excluded)] == [
        f"{SERIES} tokens"
    ]


def test_the_documented_example_request(loaded: TestClient, database: Database) -> None:
    body = {
        "panelId": 2,
        "range": {
            "from": "2026-10-21T00:00:00.000Z",
            "to": "2026-10-23T00:00:00.000Z",
            "raw": {"from": "now-1d", "to": "now+1d"},
        },
        "interval": "1h",
        "intervalMs": 3600000,
        "maxDataPoints": 1200,
        "targets": [
            {
                "refId": "A",
                "target": "forecast",
                "payload": {"series": SERIES, "metric": "tokens", "band": "hi_80"},
            },
            {"refId": "B", "target": "gpus", "payload": {"series": SERIES, "profile": PROFILE}},
        ],
        "filters": [{"key": "series", "operator": "=", "value": SERIES}],
        "scopedVars": {},
    }
    response = loaded.post("/grafana/query", json=body)
    assert response.status_code == 200
    forecast, gpus = response.json()
    assert forecast["target"] == f"{SERIES} tokens hi_80" and len(forecast["datapoints"]) == 24
    with database.transaction() as session:
        plan = plans.series_plan(
            session, series_name=SERIES, profile_name=PROFILE, params=plans.PlanParams()
        )
    # band auto (the default) names the quantile sized on; the October forecast is stale
    choice = plan.band_choice or {}
    sized = choice["label"] if choice.get("headroom") else plan.plan.band
    assert gpus["target"] == f"{SERIES} gpus ({PROFILE}, auto → {sized}){STALE_SUFFIX}"
    assert len(gpus["datapoints"]) == 24


def test_series_without_a_forecast_gives_an_empty_result(
    loaded: TestClient, database: Database
) -> None:
    with database.transaction() as session:
        repository.create_series(session, name="staging/new")
        assert (
            forecast_store.latest_run(
                session,
                series_id=repository.get_series(session, name="staging/new").id,
                metric="tokens",
            )
            is None
        )
    payload = {"series": "staging/new", "profile": PROFILE}
    assert post_query(loaded, {"refId": "A", "target": "gpus", "payload": payload}) == []
    assert post_query(loaded, {"refId": "A", "target": "forecast", "payload": payload}) == []
    [history] = post_query(loaded, {"refId": "A", "target": "history", "payload": payload})
    assert history == {"target": "staging/new requests", "datapoints": []}


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"targets": [{"refId": "A", "target": "nope", "payload": {}}]}, 400, "history, forecast"),
        (
            {"targets": [{"refId": "A", "target": "history", "payload": {"series": "no/such"}}]},
            404,
            "no/such",
        ),
        (
            {"targets": [{"refId": "A", "target": "history", "payload": {"metric": "watts"}}]},
            400,
            "requests, qps, tokens",
        ),
        (
            {"targets": [{"refId": "A", "target": "forecast", "payload": {"band": "hi_99"}}]},
            400,
            "yhat, lo_80",
        ),
        (
            {"targets": [{"refId": "A", "target": "gpus", "payload": {"profile": "a100"}}]},
            400,
            PROFILE,
        ),
        (
            {
                "targets": [
                    {
                        "refId": "A",
                        "target": "gpus",
                        "payload": {"profile": PROFILE, "utilization_target": "lots"},
                    }
                ]
            },
            400,
            "utilization_target",
        ),
        (
            {
                "range": {"from": "2026-10-23T00:00:00Z", "to": "2026-10-20T00:00:00Z"},
                "targets": [{"refId": "A", "target": "history", "payload": {}}],
            },
            400,
            "must be after",
        ),
        (
            {
                "range": {"from": "yesterday", "to": "2026-10-20T00:00:00Z"},
                "targets": [{"refId": "A", "target": "history", "payload": {}}],
            },
            400,
            "ISO-8601",
        ),
        (
            {
                "targets": [{"refId": "A", "target": "history", "payload": {}}],
                "filters": [{"key": "region", "operator": "=", "value": "eu"}],
            },
            400,
            "series",
        ),
        ({"targets": "history"}, 422, None),
    ],
)
def test_bad_queries_are_clear_4xx(
    loaded: TestClient, body: dict, status: int, fragment: str | None
) -> None:
    response = loaded.post("/grafana/query", json=body)
    assert response.status_code == status, response.text
    if fragment is not None:
        assert fragment in response.json()["detail"]


@pytest.mark.parametrize(
    "path", ["/grafana/query", "/grafana/metrics", "/grafana/variable", "/grafana/tag-values"]
)
def test_malformed_json_is_a_422(loaded: TestClient, path: str) -> None:
    response = loaded.post(path, content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert "detail" in response.json()


def test_missing_range_defaults_to_recent_days(loaded: TestClient) -> None:
    body = {"targets": [{"refId": "A", "target": "history", "payload": {"series": SERIES}}]}
    response = loaded.post("/grafana/query", json=body)
    assert response.status_code == 200
    # The synthetic history is in October 2026, older than the default window (last 7 days).
    assert response.json() == [{"target": f"{SERIES} requests", "datapoints": []}]


def test_payload_as_a_json_string_is_parsed(loaded: TestClient) -> None:
    payload = json.dumps({"series": SERIES, "metric": "tokens"})
    [series] = post_query(loaded, {"refId": "A", "target": "history", "payload": payload})
    assert series["target"] == f"{SERIES} tokens" and len(series["datapoints"]) == 48
    every = post_query(loaded, {"refId": "A", "target": "history", "payload": "not json"})[0]
    assert every["target"] == f"{OTHER} requests"  # unparsable: {} as the plugin does
    response = loaded.post(
        "/grafana/query",
        json=query_body({"refId": "A", "target": "history", "payload": [SERIES]}),
    )
    assert response.status_code == 422


def test_multi_value_series_variable(loaded: TestClient) -> None:
    payload = {"series": [SERIES, OTHER], "metric": "requests"}
    result = post_query(loaded, {"refId": "A", "target": "history", "payload": payload})
    assert [s["target"] for s in result] == [f"{SERIES} requests", f"{OTHER} requests"]


def test_hidden_and_empty_targets_are_skipped(loaded: TestClient) -> None:
    targets = [
        {"refId": "A", "target": "history", "payload": {"series": SERIES}, "hide": True},
        {"refId": "B", "payload": {}},
    ]
    assert post_query(loaded, *targets) == []


def test_grafana_routes_need_a_key_when_reads_do(settings: Settings) -> None:
    keyed = settings.model_copy(update={"api_keys": "k", "read_requires_key": True})
    with TestClient(create_app(keyed)) as client:
        assert client.get("/grafana/").status_code == 401
        assert client.post("/grafana/query", json=query_body()).status_code == 401
        headers = {"Authorization": "Bearer k"}
        assert client.get("/grafana/", headers=headers).status_code == 200
        assert client.post("/grafana/query", json=query_body(), headers=headers).json() == []


def test_a_variable_value_of_nested_brackets_is_read_as_one_value(loaded: TestClient) -> None:
    """A payload string that looks like a JSON list (Grafana's json format) but nests beyond
    the parser is one value: here an unknown series, answered as any other, never a 500."""
    nested = "[" * 3000 + "]" * 3000
    target = {"target": "history", "refId": "A", "payload": {"series": nested}}
    response = loaded.post("/grafana/query", json=query_body(target))
    assert response.status_code == 404, response.text
    assert "not found" in response.json()["detail"], response.text
