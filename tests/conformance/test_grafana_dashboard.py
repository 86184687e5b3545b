"""The shipped dashboard answers in real Grafana: every panel target, annotation and variable
of deploy/grafana/dashboards/gpucast.json is sent exactly as Grafana 11 with the pinned
simpod-json-datasource plugin sends it (tests/conformance/grafana_plugin.py), and gpucast
answers it as it answers the same query written with the plain values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import ingest
from app.db import Database
from app.jobs import ForecastOptions, run_forecasts
from tests.app.test_grafana import OTHER, RANGE, SERIES, loaded  # noqa: F401 (fixture)
from tests.app.test_grafana_plan_backtest import FAST, Replays, replays  # noqa: F401 (fixture)
from tests.app.test_jobs import daily_load
from tests.conformance import grafana_plugin as plugin

DASHBOARD = json.loads(
    (Path(__file__).parents[2] / "deploy/grafana/dashboards/gpucast.json").read_text()
)
DOTTED_PROFILE = "h100.sxm-70b"  # a profile name the regex format escapes too


def dashboard_queries() -> list[tuple[str, dict[str, Any]]]:
    queries = [(p["title"], t) for p in DASHBOARD["panels"] for t in p.get("targets", [])]
    queries += [(a["name"], a["target"]) for a in DASHBOARD["annotations"]["list"] if "target" in a]
    return queries


QUERIES = dashboard_queries()


@pytest.fixture
def grafana(loaded: TestClient, replays: Replays) -> TestClient:  # noqa: F811
    profile = {
        "name": DOTTED_PROFILE,
        "gpu_type": "H100-SXM",
        "model": "llama-3.1-70b",
        "tokens_per_s_per_gpu": 100,
        "gpus_per_replica": 2,
        "usd_per_hour_on_demand": 4.0,
    }
    assert loaded.post("/v1/gpu-profiles", json=profile).status_code == 201
    return loaded


def variables(series: str | list[str]) -> plugin.Dashboard:
    return plugin.Dashboard(
        {
            "series": plugin.Variable(series),
            "profile": plugin.Variable(DOTTED_PROFILE),
            "band": plugin.Variable("auto"),
        }
    )


def plain(query: dict[str, Any], dashboard: plugin.Dashboard) -> dict[str, Any]:
    """The oracle: the same query with each ``$name`` payload value replaced by its value."""
    payload = {}
    for key, value in query["payload"].items():
        if isinstance(value, str) and value.startswith("$"):
            payload[key] = dashboard.variables[value[1:]].value
        else:
            assert "$" not in str(value), f"{key}: only whole-value variables are modelled"
            payload[key] = value
    return {"refId": query["refId"], "target": query["target"], "payload": payload}


def answer(client: TestClient, targets: list[dict[str, Any]]) -> tuple[int, Any]:
    """Status and body, without the columns that age with the clock between two calls."""
    response = client.post("/grafana/query", json={"range": RANGE, "targets": targets})
    body = response.json()
    if response.status_code == 200:
        body = [_without_ages(item) for item in body]
    return response.status_code, body


def _without_ages(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") != "table":
        return item
    keep = [i for i, c in enumerate(item["columns"]) if not c["text"].endswith("_age_hours")]
    return {
        **item,
        "columns": [item["columns"][i] for i in keep],
        "rows": [[row[i] for i in keep] for row in item["rows"]],
    }


FIELD_TYPES = {
    "time": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
}


def typed_as_declared(item: dict[str, Any]) -> bool:
    """Every table cell is of its column's Grafana field type (or null): Grafana parses the
    column by its declared type, so a boolean in a "string" column shows as text."""
    if item.get("type") != "table":
        return True
    kinds = [FIELD_TYPES[c["type"]] for c in item["columns"]]
    cells = (zip(kinds, row, strict=True) for row in item["rows"])
    return all(v is None or kind(v) for row in cells for kind, v in row)


def test_the_dashboard_is_in_builder_mode_with_variables_in_every_query() -> None:
    """What the tests below exercise: each query's payload goes through the regex format."""
    assert len(QUERIES) == 12
    for _, query in QUERIES:
        assert query["editorMode"] == "builder"
        assert query["payload"]["series"] == "$series"


def test_every_query_answers_as_sent_by_the_plugin(grafana: TestClient) -> None:
    dashboard = variables(SERIES)
    for title, query in QUERIES:
        body = plugin.query_request([query], dashboard, RANGE)
        sent = body["targets"][0]
        assert sent["payload"]["series"] == "prod-us\\/llama-3\\.1-70b"  # what really arrives
        if "profile" in sent["payload"]:
            assert sent["payload"]["profile"] == "h100\\.sxm-70b"
        status, data = answer(grafana, body["targets"])
        assert status == 200, (title, data)
        assert data, f"{title}: nothing to show"
        assert (status, data) == answer(grafana, [plain(query, dashboard)]), title
        for item in data:
            assert typed_as_declared(item), (title, item.get("columns"))


def test_a_multi_value_series_variable_arrives_as_one_regex(grafana: TestClient) -> None:
    dashboard = variables([SERIES, OTHER])
    for title, query in QUERIES:
        sent = plugin.process_target(query, dashboard)
        assert sent["payload"]["series"] == "(prod-us\\/llama-3\\.1-70b|prod-eu\\/llama-3\\.1-8b)"
        assert answer(grafana, [sent]) == answer(grafana, [plain(query, dashboard)]), title


def test_the_dashboard_variables_list_their_options(grafana: TestClient) -> None:
    dashboard = variables(SERIES)
    expected = {"series": [OTHER, SERIES], "profile": ["h100-70b", DOTTED_PROFILE]}
    for variable in DASHBOARD["templating"]["list"]:
        body = plugin.variable_request(variable["query"], dashboard)
        response = grafana.post("/grafana/variable", json=body)
        assert response.status_code == 200, response.text
        values = [row["__value"] for row in response.json()]
        assert values == expected.get(variable["name"], values) and values


def test_payload_options_read_the_escaped_series(grafana: TestClient, database: Database) -> None:
    """The query editor lists the forecast metrics of the series chosen, with the payload
    formatted too: a series forecast for requests only offers requests and qps."""
    name = "staging/v1.2+requests"
    with database.transaction() as session:
        ingest.store(session, daily_load(days=8).assign(series=name), create_series=True)
    options = ForecastOptions(series=(name,), metrics=("requests",), models=FAST, workers=1)
    assert not run_forecasts(database, options).failed
    dashboard = plugin.Dashboard({"series": plugin.Variable(name)})
    request = plugin.payload_options_request("forecast", "metric", {"series": "$series"}, dashboard)
    assert request["payload"] == {"series": "staging\\/v1\\.2\\+requests"}
    answered = grafana.post("/grafana/metric-payload-options", json=request).json()
    assert [o["value"] for o in answered] == ["requests", "qps"]
