"""The shipped dashboard answers in real Grafana: every panel target, annotation and variable
of deploy/grafana/dashboards/gpucast.json is sent exactly as Grafana 11 with the pinned
simpod-json-datasource plugin sends it (tests/conformance/grafana_plugin.py), and gpucast
answers it as it answers the same query written with the plain values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
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


# -- a multi-value profile, Grafana's other formats, long ranges, ad-hoc filters ---------------

PROFILES = [DOTTED_PROFILE, "h100-70b"]
PER_PROFILE = ("gpus", "cost", "scale_events", "plan_status", "plan_backtest", "profile_compare")


def profile_queries() -> list[tuple[str, dict[str, Any]]]:
    return [(t, q) for t, q in QUERIES if "profile" in str(q["payload"])]


def test_the_profile_variable_is_multi_value() -> None:
    [profile] = [v for v in DASHBOARD["templating"]["list"] if v["name"] == "profile"]
    assert profile["multi"] is True
    assert {q["target"] for _, q in profile_queries()} == set(PER_PROFILE)


def test_every_query_answers_a_multi_value_profile_one_result_per_profile(
    grafana: TestClient,
) -> None:
    both = variables(SERIES)
    both.variables["profile"] = plugin.Variable(PROFILES)
    for title, query in profile_queries():
        sent = plugin.process_target(query, both)
        assert sent["payload"].get("profile", sent["payload"].get("profiles")) == (
            "(h100\\.sxm-70b|h100-70b)"
        )
        status, data = answer(grafana, [sent])
        assert status == 200, (title, data)
        assert (status, data) == answer(grafana, [plain(query, both)]), title
        single = []
        for name in PROFILES:
            one = variables(SERIES)
            one.variables["profile"] = plugin.Variable(name)
            single.append(answer(grafana, [plugin.process_target(query, one)])[1])
        assert_one_result_per_profile(query["target"], data, single)


def assert_one_result_per_profile(target: str, both: list[Any], single: list[list[Any]]) -> None:
    first, second = single
    if target in ("gpus", "cost"):
        assert both == first + second and len(first) >= 1
        assert all(DOTTED_PROFILE in s["target"] for s in first)
    elif target == "plan_backtest":
        assert [t["rows"] for t in both] == [first[0]["rows"], second[0]["rows"]]
        assert [t["name"] for t in both] == [f"{SERIES} on {name}" for name in PROFILES]
    elif target == "scale_events":
        rows = sorted(first[0]["rows"] + second[0]["rows"], key=lambda r: (r[1], r[4]))
        assert sorted(both[0]["rows"], key=lambda r: (r[1], r[4])) == rows
        assert {n for r in rows for n in r[4].split(",") if n in PROFILES} == set(PROFILES)
    elif target == "plan_status":
        assert both[0]["rows"] == first[0]["rows"] + second[0]["rows"]
    else:  # profile_compare: one row per profile compared
        compared = [row[1] for row in both[0]["rows"]]
        assert compared == PROFILES and [row[1] for row in first[0]["rows"]] == [PROFILES[0]]


FORMATS = ("glob", "csv", "pipe", "json", "doublequote", "lucene", "percentencode", "regex")


def test_a_profile_variable_in_another_format_answers_the_same(grafana: TestClient) -> None:
    """``${profile:glob}`` (and Grafana's other formats) in a payload: the variable's values."""
    both = variables(SERIES)
    both.variables["profile"] = plugin.Variable(PROFILES)
    for title, query in profile_queries():
        expected = answer(grafana, [plain(query, both)])
        assert expected[0] == 200, (title, expected)
        for fmt in FORMATS:
            formatted = {
                **query,
                "payload": {
                    k: f"${{profile:{fmt}}}" if v == "$profile" else v
                    for k, v in query["payload"].items()
                },
            }
            sent = plugin.process_target(formatted, both)
            assert answer(grafana, [sent]) == expected, (title, sent)


def test_every_query_answers_the_last_5_years(grafana: TestClient) -> None:
    """Grafana's quick range "Last 5 years" (and longer): every panel answers."""
    now = pd.Timestamp.now(tz="UTC")
    dashboard = variables(SERIES)
    for years in (5, 20):
        time_range = {
            "from": (now - pd.DateOffset(years=years)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "to": now.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "raw": {"from": f"now-{years}y", "to": "now"},
        }
        for title, query in QUERIES:
            body = plugin.query_request([query], dashboard, time_range)
            response = grafana.post("/grafana/query", json=body)
            assert response.status_code == 200, (title, years, response.text)


def test_history_beyond_what_one_query_reads_shows_the_latest_hours_and_says_so(
    grafana: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("app.grafana.series_targets.MAX_SERIES_HOURS", 48)
    now = pd.Timestamp.now(tz="UTC")
    time_range = {"from": (now - pd.DateOffset(years=5)).isoformat(), "to": now.isoformat()}
    target = {"refId": "A", "target": "history", "payload": {"series": [SERIES, OTHER]}}
    response = grafana.post("/grafana/query", json={"range": time_range, "targets": [target]})
    assert response.status_code == 200, response.text
    for item in response.json():
        assert len(item["datapoints"]) == 24  # 48 series-hours over two series
        [notice] = item["meta"]["notices"]
        assert notice["severity"] == "warning"
        assert "48" in notice["text"] and "fewer series or a shorter range" in notice["text"]


def test_ad_hoc_filters_with_every_operator(grafana: TestClient) -> None:
    """Ad-hoc filters as Grafana sends them: ``=~``/``!~`` match the whole name (RE2, as
    Prometheus), ``=|``/``!=|`` take several values; a series chosen in the payload is only
    ever excluded by them."""

    def names(filters: list[dict[str, Any]], payload: dict[str, Any] | None = None) -> list[str]:
        target = {"refId": "A", "target": "history", "payload": payload or {}}
        body = plugin.query_request([target], plugin.Dashboard(), RANGE, filters)
        response = grafana.post("/grafana/query", json=body)
        assert response.status_code == 200, response.text
        return [item["target"].rsplit(" ", 1)[0] for item in response.json()]

    def adhoc(operator: str, value: str = "", **extra: Any) -> dict[str, Any]:
        return {"key": "series", "operator": operator, "value": value, **extra}

    assert names([adhoc("=~", "prod-us/.*")]) == [SERIES]
    assert names([adhoc("=~", "prod-(us|eu)/llama-3\\.1-.*")]) == [OTHER, SERIES]  # by name
    assert names([adhoc("=~", "llama")]) == []  # the whole name, not a part of it
    assert names([adhoc("!~", "prod-us/.*")]) == [OTHER]
    assert names([adhoc("=~", "prod-.*"), adhoc("!=", OTHER)]) == [SERIES]
    assert names([adhoc("=|", values=[OTHER, SERIES])]) == [OTHER, SERIES]
    assert names([adhoc("!=|", values=[OTHER, SERIES])]) == []
    assert names([adhoc("!~", ".*-8b")], {"series": [SERIES, OTHER]}) == [SERIES]
    assert names([adhoc("=~", "nothing")], {"series": SERIES}) == [SERIES]
    dashboard = variables(SERIES)
    for title, query in QUERIES:  # the shipped dashboard, with an ad-hoc regex filter
        for filters in ([adhoc("=~", "prod-.*")], [adhoc("!~", "prod-us/.*")]):
            body = plugin.query_request([query], dashboard, RANGE, filters)
            response = grafana.post("/grafana/query", json=body)
            assert response.status_code == 200, (title, filters, response.text)


@pytest.mark.parametrize(
    ("item", "detail"),
    [
        ({"operator": "=~", "value": "prod-(us"}, "not a regular expression RE2 accepts"),
        ({"operator": "=~", "value": "(a)\\1"}, "not a regular expression RE2 accepts"),
        ({"operator": "<", "value": "x"}, "=, !=, =~, !~, =|, !=|"),
        ({"operator": "=~", "value": "a" * 501}, "the limit is 500"),
        ({"operator": "=", "value": "prod", "key": "region"}, "the only key is 'series'"),
    ],
)
def test_a_bad_ad_hoc_filter_is_a_clear_400(
    grafana: TestClient, item: dict[str, Any], detail: str
) -> None:
    target = {"refId": "A", "target": "history", "payload": {}}
    body = plugin.query_request([target], plugin.Dashboard(), RANGE, [{"key": "series", **item}])
    response = grafana.post("/grafana/query", json=body)
    assert response.status_code == 400 and detail in response.json()["detail"], response.text


def test_a_catastrophic_pattern_is_answered_at_once(grafana: TestClient) -> None:
    """RE2 matches in linear time: a pattern that backtracks exponentially elsewhere is quick."""
    import time

    pattern = "(a|a)*" * 10 + "b"
    target = {"refId": "A", "target": "history", "payload": {}}
    filters = [{"key": "series", "operator": "=~", "value": pattern}]
    started = time.perf_counter()
    body = plugin.query_request([target], plugin.Dashboard(), RANGE, filters)
    assert grafana.post("/grafana/query", json=body).status_code == 200
    assert time.perf_counter() - started < 5
