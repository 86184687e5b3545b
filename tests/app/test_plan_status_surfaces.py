"""The freshest run's age and band auto's chosen quantile on every surface: Grafana's
plan_status table and plan legends, the overview card and /metrics."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from app import plans
from app.db import Database
from app.db.models import ForecastRun, PlanCalibration
from app.grafana import TARGETS
from app.grafana.plan_targets import PLAN_BANDS, STALE_SUFFIX, plan_params
from app.grafana.protocol import GrafanaInputError
from app.grafana.status_targets import NAMES
from app.plans import auto_band
from app.plans.calibration import HEADROOMS, POINT_BAND
from app.plans.params import parse_hpa_tolerance
from tests.support.clock import settled_hour

from .test_plan_surfaces import PROFILE, SERIES, history_rows

FAST = "seasonal_naive,seasonal_ma"
GPU = PROFILE["name"]
CAPACITY = f"/v1/series/{SERIES}/capacity"
DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "dashboards" / "gpucast.json"
HOUR = pd.Timedelta(hours=1)


@pytest.fixture
def fitted(client: TestClient) -> TestClient:
    """Ten days of history ending three hours ago, fitted (nightly); the last three hours
    are kept in ``client.rows`` for :func:`refresh`."""
    end = settled_hour()
    rows = history_rows(end, days=10)
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    assert client.post(f"/v1/series/{SERIES}/observations", json=rows[:-3]).status_code == 200
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    response = client.post(f"/v1/series/{SERIES}/forecast", params={"models": FAST})
    assert response.status_code == 200, response.text
    client.rows = rows  # type: ignore[attr-defined]
    client.end = end  # type: ignore[attr-defined]
    return client


def refresh(client: TestClient) -> None:
    """The last three hours arrive: the ingest stores refresh runs of the nightly fit."""
    response = client.post(f"/v1/series/{SERIES}/observations", json=client.rows[-3:])  # type: ignore[attr-defined]
    assert response.status_code == 200
    assert any("refreshed the forecast" in note for note in response.json()["notes"])


def capacity(client: TestClient, **params: Any) -> dict[str, Any]:
    response = client.get(CAPACITY, params={"profile": GPU, **params})
    assert response.status_code == 200, response.text
    return response.json()


def grafana(client: TestClient, name: str, **payload: Any) -> list[dict[str, Any]]:
    now = pd.Timestamp.now(tz="UTC")
    days = pd.Timedelta(days=14)
    body = {
        "range": {"from": (now - days).isoformat(), "to": (now + days).isoformat()},
        "targets": [{"refId": "A", "target": name, "payload": payload}],
    }
    response = client.post("/grafana/query", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def gpus(n: int) -> str:
    """A GPU count as the overview writes it (one GPU, two GPUs)."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def status_rows(client: TestClient, **payload: Any) -> list[dict[str, Any]]:
    [table] = grafana(client, "plan_status", **payload)
    assert table["type"] == "table"
    assert [c["text"] for c in table["columns"]] == list(NAMES)
    return [dict(zip(NAMES, row, strict=True)) for row in table["rows"]]


def ms(moment: Any) -> int:
    return int(pd.Timestamp(moment).value // 10**6)


def runs(database: Database, kind: str) -> list[ForecastRun]:
    with database.transaction() as session:
        query = select(ForecastRun).where(ForecastRun.kind == kind).order_by(ForecastRun.id)
        return list(session.scalars(query))


# -- Grafana ----------------------------------------------------------------------------------


def test_plan_status_shows_the_refreshed_run_its_age_and_the_quantile_sized_on(
    fitted: TestClient, database: Database
) -> None:
    refresh(fitted)
    before = pd.Timestamp.now(tz="UTC")
    [row] = status_rows(fitted, series=SERIES, profile=GPU)
    plan = capacity(fitted)  # reads the choice the table's query stored
    end = fitted.end  # type: ignore[attr-defined]
    nightly = next(r for r in runs(database, "nightly") if r.metric == "tokens")
    refreshed = next(r for r in runs(database, "refresh") if r.metric == "tokens")

    assert (row["series"], row["profile"], row["run_kind"]) == (SERIES, GPU, "refresh")
    assert row["run_id"] == refreshed.id == plan["forecast_run_ids"][0]
    assert row["trained_until"] == ms(end - HOUR) == ms(plan["trained_until"])
    assert row["run_stored_at"] == ms(refreshed.created_at)
    trained_age = (before - (end - HOUR)) / HOUR
    assert trained_age - 0.02 <= row["trained_age_hours"] <= trained_age + 0.1
    assert 0 <= row["run_age_hours"] < 0.1 and row["stale"] is False
    assert row["fitted_run_id"] == nightly.id == plan["fitted_run_id"]
    assert row["fitted_trained_until"] == ms(end - 4 * HOUR)  # fitted before the last 3 hours
    assert row["model"] == plan["model"]

    choice = plan["band_choice"]
    assert plan["sized_band"] == POINT_BAND and choice["band"] == plan["sized_band"]
    assert choice["headroom"] in HEADROOMS
    assert row["band"] == "auto" and row["sized_band"] == f"auto → {choice['label']}"
    assert row["replayed_time_over_capacity_share"] == choice["replayed_time_over_capacity_share"]
    assert row["max_over_capacity"] == 0.01 and row["met"] is choice["met"]
    assert row["calibration_days"] == choice["days"] and row["note"] == choice["note"]


def test_plan_status_of_an_explicit_band_and_of_a_series_without_a_forecast(
    fitted: TestClient,
) -> None:
    assert fitted.post("/v1/series", json={"name": "staging/new"}).status_code == 201
    new, row = status_rows(fitted, series=["staging/new", SERIES], profile=GPU, band="hi_95")
    assert row["run_kind"] == "nightly" and row["fitted_run_id"] == row["run_id"]
    assert row["fitted_trained_until"] == row["trained_until"]
    assert (row["band"], row["sized_band"]) == ("hi_95", "hi_95")
    assert row["met"] is None and row["replayed_time_over_capacity_share"] is None
    assert row["note"] == "band hi_95 asked for: no calibration"
    assert new["series"] == "staging/new" and new["run_kind"] is None
    assert new["note"] == "no complete forecast yet; run 'gpucast forecast staging/new'"
    assert json.loads(json.dumps([new, row])) == [new, row]


def test_plan_legends_name_the_quantile_band_auto_sized_on(fitted: TestClient) -> None:
    refresh(fitted)
    # a low utilization target, so that the floor rises and falls with the forecast (at 0.75
    # the reactive trigger carries this small service, band auto's headroom is its lowest and
    # the floor stays on the minimum: no scale events)
    strict = {"utilization_target": 0.3}
    payload = {"series": SERIES, "profile": GPU, "raw_gpus": True, **strict}
    gpus, raw = grafana(fitted, "gpus", **payload)
    [cost] = grafana(fitted, "cost", **payload)
    choice = capacity(fitted, **strict)["band_choice"]
    sized = choice["label"]
    assert sized == f"{POINT_BAND} x {choice['headroom']:.2f}"
    assert gpus["target"] == f"{SERIES} gpus ({GPU}, auto → {sized})"
    assert raw["target"] == f"{SERIES} raw_gpus ({GPU}, auto → {sized})"
    assert cost["target"] == f"{SERIES} cost usd/h ({GPU}, auto → {sized})"
    assert not gpus["target"].endswith(STALE_SUFFIX)  # refreshed an hour ago
    [table] = grafana(fitted, "scale_events", series=SERIES, profile=GPU, **strict)
    assert table["rows"] and all(f"(auto → {sized}, target 0.3)" in r[3] for r in table["rows"])
    # an explicit band keeps the plain name (dashboard overrides match on it)
    [explicit] = grafana(fitted, "gpus", series=SERIES, profile=GPU, band="hi_80")
    assert explicit["target"] == f"{SERIES} gpus ({GPU})"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("true", True), ("false", False), (" FALSE ", False)]
    + [(["false"], False), (None, True), ("", True)],
)
def test_reactive_backstop_takes_json_booleans_and_strings(value: Any, expected: bool) -> None:
    payload = {} if value is None else {"reactive_backstop": value}
    assert plan_params(payload).reactive_backstop is expected


@pytest.mark.parametrize("value", ["maybe", "yes", 1, 0, 2.5, {"on": True}, [True, False]])
def test_a_bad_reactive_backstop_is_a_grafana_input_error(value: Any) -> None:
    with pytest.raises(GrafanaInputError, match="reactive_backstop"):
        plan_params({"reactive_backstop": value})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, 0.0),
        ("", 0.0),
        ("0.1", 0.1),
        (0.1, 0.1),
        (["0.25"], 0.25),
        ("none", None),
        ("NONE", None),
    ],
)
def test_grafana_hpa_tolerance_is_the_rest_setting(value: Any, expected: float | None) -> None:
    payload = {} if value is None else {"hpa_tolerance": value}
    params = plan_params(payload)
    assert params.hpa_tolerance == expected
    if expected is not None:  # the same setting REST and the CLI parse
        assert params.hpa_tolerance == parse_hpa_tolerance(str(expected))


@pytest.mark.parametrize("value", ["1.5", "-0.1", "ten", True, ["0.1", "0.2"]])
def test_a_bad_grafana_hpa_tolerance_is_a_grafana_input_error(value: Any) -> None:
    with pytest.raises(GrafanaInputError, match="hpa_tolerance"):
        plan_params({"hpa_tolerance": value})


def test_reactive_backstop_and_max_over_capacity_reach_the_calibration(
    fitted: TestClient, database: Database
) -> None:
    for value in (False, "false", True):
        assert status_rows(fitted, series=SERIES, profile=GPU, reactive_backstop=value)
    strict = status_rows(fitted, series=SERIES, profile=GPU, max_over_capacity="0.002")
    assert strict[0]["max_over_capacity"] == 0.002
    with database.transaction() as session:
        keys = set(session.scalars(select(PlanCalibration.params_key)))
    # one choice per parameters: JSON false and "false" are the same plan
    assert len(keys) == 3
    assert plans.PlanParams(reactive_backstop=False).calibration_key() in keys
    assert plans.PlanParams(max_over_capacity=0.002).calibration_key() in keys
    for bad, fragment in (
        ({"reactive_backstop": "maybe"}, "must be true or false, got 'maybe'"),
        ({"reactive_backstop": {"x": 1}}, "must be true or false"),
        ({"max_over_capacity": "0.9"}, "max_over_capacity must be between"),
        ({"max_over_capacity": "lots"}, "max_over_capacity must be a number"),
    ):
        for name in ("plan_status", "gpus", "plan_backtest"):
            body = {"targets": [{"target": name, "payload": {"series": SERIES, **bad}}]}
            response = fitted.post("/grafana/query", json=body)
            assert response.status_code == 400, (name, bad, response.text)
            assert fragment in response.json()["detail"]


def test_plan_status_and_the_band_auto_options_are_in_the_catalog_and_on_the_dashboard(
    fitted: TestClient,
) -> None:
    body = fitted.post("/grafana/metrics", json={}).json()
    by_name = {m["value"]: {p["name"]: p for p in m["payloads"]} for m in body}
    assert list(by_name["plan_status"]) == [
        "series",
        "profile",
        "band",
        "utilization_target",
        "safety_factor",
        "min_gpus",
        "max_gpus",
        "cold_start_s",
        "scale_down_hold_s",
        "max_over_capacity",
        "reactive_backstop",
        "hpa_tolerance",
    ]
    assert TARGETS["plan_status"].annotation is False
    for name in ("gpus", "cost", "scale_events", "plan_backtest", "plan_status"):
        editors = by_name[name]
        assert editors["max_over_capacity"]["type"] == "input"
        assert editors["max_over_capacity"]["placeholder"] == "0.01"
        assert [o["value"] for o in editors["reactive_backstop"]["options"]] == ["true", "false"]
        assert [o["value"] for o in editors["band"]["options"]] == list(PLAN_BANDS)
        assert editors["band"]["placeholder"] == "auto"
        assert editors["hpa_tolerance"]["type"] == "input"
        assert editors["hpa_tolerance"]["placeholder"] == "0"
    variable = fitted.post("/grafana/variable", json={"payload": {"target": "targets"}}).json()
    assert {"__text": "plan_status", "__value": "plan_status"} in variable

    dashboard = json.loads(DASHBOARD.read_text())
    [panel] = [p for p in dashboard["panels"] if p["targets"][0]["target"] == "plan_status"]
    assert panel["type"] == "table"
    assert panel["targets"][0]["payload"] == {
        "series": "$series",
        "profile": "$profile",
        "band": "$band",
    }
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["band"]["query"]["query"] == "plan_bands"
    assert variables["band"]["current"]["value"] == "auto"
    boxes = [p["gridPos"] for p in dashboard["panels"]]
    cells = {(b["x"] + i, b["y"] + j) for b in boxes for i in range(b["w"]) for j in range(b["h"])}
    assert len(cells) == sum(b["w"] * b["h"] for b in boxes)  # no two panels overlap


# -- overview ---------------------------------------------------------------------------------


def card(page: str, name: str = SERIES) -> str:
    match = re.search(
        rf'<section class="[^"]*" data-series="{re.escape(html.escape(name))}">(.*?)</section>',
        page,
        re.S,
    )
    assert match, f"no card for {name}"
    return match.group(1)


def row(text: str, label: str) -> str:
    match = re.search(rf"<dt>{re.escape(label)}</dt><dd>(.*?)</dd>", text, re.S)
    assert match, f"no {label!r} row in {text}"
    return match.group(1)


def utc(moment: Any) -> str:
    stamp = pd.Timestamp(moment)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return f"{stamp:%Y-%m-%d %H:%M} UTC"


@pytest.fixture
def never_calibrates(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def calibrate(*args: Any, **kwargs: Any) -> None:
        calls.append(kwargs.get("series_name", "?"))
        raise AssertionError("the overview must not calibrate band auto")

    monkeypatch.setattr(auto_band, "calibrate", calibrate)
    return calls


def test_the_card_says_how_fresh_the_forecast_is(fitted: TestClient, database: Database) -> None:
    end = fitted.end  # type: ignore[attr-defined]
    nightly = next(r for r in runs(database, "nightly") if r.metric == "tokens")
    text = row(card(fitted.get("/").text), "forecast")
    assert re.fullmatch(
        rf"fitted \d+ min ago \(nightly run\) from the hours up to {utc(end - 4 * HOUR)}", text
    ), text

    refresh(fitted)
    text = row(card(fitted.get("/").text), "forecast")
    assert re.fullmatch(
        rf"refreshed \d+ min ago from the hours up to {utc(end - HOUR)}; "
        rf"fitted {utc(nightly.created_at)} \(nightly run\)",
        text,
    ), text


def test_the_card_never_calibrates_and_shows_a_stored_choice(
    fitted: TestClient, never_calibrates: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    refresh(fitted)
    page = fitted.get("/")
    assert page.status_code == 200 and never_calibrates == []
    text = card(page.text)
    band = row(text, "band")
    assert band.startswith(
        'auto → hi_80: <span class="stale">not yet calibrated for this nightly run; sized on '
        "hi_80 meanwhile</span>"
    )
    assert f"<code>gpucast plan {SERIES} --profile {GPU}</code>" in band

    monkeypatch.undo()  # a plan read replays (the fallback band's expected fleet)
    fallback = capacity(fitted, band="hi_80")
    assert f'<span class="peak">{gpus(fallback["peak_gpus"])}</span> ({GPU})' in text
    plan = capacity(fitted)  # a band auto plan read calibrates (and stores) the choice
    choice = plan["band_choice"]
    assert plan["sized_band"] == POINT_BAND and choice["candidates"]
    text = card(fitted.get("/").text)
    # the card's chart sizes on band auto too (its stored headroom), not on the bare yhat
    assert "band=auto" in text and "band=yhat" not in text
    assert f'<span class="peak">{gpus(plan["peak_gpus"])}</span> ({GPU})' in text
    risk = f"{choice['replayed_time_over_capacity_share'] * 100:.2g} %"
    days = f"{choice['days']:.3g}"
    if choice["met"]:
        expected = (
            f"auto → {choice['label']}: {risk} replayed over capacity (target 1 %) over {days} days"
        )
    else:
        expected = (
            f'auto → {choice["label"]}: <span class="stale">{risk} replayed over capacity, '
            f"above the target of 1 %: no candidate met it over {days} days</span>"
        )
    assert row(text, "band") == expected


def test_the_card_says_when_band_auto_could_not_be_calibrated(client: TestClient) -> None:
    end = settled_hour()
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    rows = history_rows(end, days=2)
    assert client.post(f"/v1/series/{SERIES}/observations", json=rows).status_code == 200
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    assert client.post(f"/v1/series/{SERIES}/forecast", params={"models": FAST}).status_code == 200
    note = capacity(client)["band_choice"]["note"]
    assert note.startswith("not calibrated (")
    band = row(card(client.get("/").text), "band")
    assert band == f'auto → hi_80: <span class="stale">{html.escape(note)}</span>'


# -- /metrics ---------------------------------------------------------------------------------


def scrape(client: TestClient) -> dict[str, dict[tuple[str, ...], float]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    out: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = tuple(sample.labels[k] for k in sorted(sample.labels))
            out.setdefault(sample.name, {})[labels] = sample.value
    return out


def test_metrics_follow_the_refresh_and_show_the_stored_quantile(
    fitted: TestClient, never_calibrates: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    end = fitted.end  # type: ignore[attr-defined]

    def trained_age() -> float:
        return scrape(fitted)["gpucast_forecast_trained_age_seconds"][("tokens", SERIES)]

    now = datetime.now(UTC)
    assert trained_age() == pytest.approx((now - end + 4 * HOUR).total_seconds(), abs=30)
    refresh(fitted)
    now = datetime.now(UTC)
    assert trained_age() == pytest.approx((now - end + HOUR).total_seconds(), abs=30)

    before = scrape(fitted)  # nothing stored yet: no quantile, and the scrape calibrates none
    assert "gpucast_plan_band_headroom" not in before and never_calibrates == []
    monkeypatch.undo()
    plan = capacity(fitted)
    capacity(fitted, max_over_capacity=0.002)  # other parameters: not the gauge's
    gauges = scrape(fitted)
    assert gauges["gpucast_plan_band_headroom"] == {(GPU, SERIES): plan["band_choice"]["headroom"]}
    assert "gpucast_plan_band_quantile" not in gauges  # a headroom, not a quantile
    assert gauges["gpucast_plan_band_met"] == {(GPU, SERIES): float(plan["band_choice"]["met"])}
