"""Grafana plan surfaces: the executed schedule with raw_gpus, stale plans in the legend, and
the plan_backtest table served from the stored replay while it is current."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app import grafana, ingest, plans
from app.db import Database, repository
from app.grafana import replay_targets
from app.grafana.plan_targets import STALE_SUFFIX
from app.jobs import ForecastOptions, run_forecasts
from app.plans.backtest import latest_replay, run_backtest
from app.plans.replay import ReplayOptions
from tests.app.test_grafana import PROFILE, SERIES, loaded, post_query  # noqa: F401 (fixture)
from tests.app.test_jobs import daily_load

FAST = ("seasonal_naive", "seasonal_ma")
FRESH = "prod-us/fresh"
DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "dashboards" / "gpucast.json"
BACKTEST_COLUMNS = [
    "policy",
    "recommended",
    "bound",
    "gpu_hours",
    "cost_usd",
    "time_over_capacity_share",
    "requests_over_capacity_share",
    "time_over_85_share",
    "scale_events",
    "peak_gpus",
]
RATIO_COLUMNS = ["gpu_hours_vs_instant_bound", "gpu_hours_vs_reactive_at_equal_risk"]
POLICIES = [
    "gpucast",
    "static-peak",
    "reactive-hpa",
    "seasonal-mean",
    "hourly-perfect-foresight",
    "instant-bound",
]
EQUAL_RISK = "reactive-at-equal-risk"  # present when an HPA target reaches gpucast's risk


def policies(rows: list[dict[str, Any]]) -> list[str]:
    return [r["policy"] for r in rows if r["policy"] != EQUAL_RISK]


def sized_label(served: plans.SeriesPlan) -> str:
    """What band auto sized on: ``yhat x 0.64`` (its headroom), or the fallback band."""
    choice = served.band_choice or {}
    return choice["label"] if choice.get("headroom") else served.plan.band


def plan(database: Database, name: str = SERIES, **params: Any) -> plans.SeriesPlan:
    with database.transaction() as session:
        return plans.series_plan(
            session, series_name=name, profile_name=PROFILE, params=plans.PlanParams(**params)
        )


def target(name: str, **payload: Any) -> dict[str, Any]:
    return {"refId": "A", "target": name, "payload": payload}


def wide_range(start: pd.Timestamp, days: int = 4) -> dict[str, str]:
    return {"from": start.isoformat(), "to": (start + pd.Timedelta(days=days)).isoformat()}


@pytest.fixture
def fresh(loaded: TestClient, database: Database) -> TestClient:  # noqa: F811
    """A series whose history ends in the last hour, so its forecast is not stale."""
    frame = daily_load(days=10, seed=5)
    last = pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=1)
    frame = frame.assign(hour=frame["hour"] + (last - frame["hour"].max()), series=FRESH)
    with database.transaction() as session:
        ingest.store(session, frame, create_series=True)
    options = ForecastOptions(series=(FRESH,), models=FAST, workers=1)
    assert not run_forecasts(database, options).failed
    return loaded


# -- gpus / cost: executed schedule, raw_gpus, staleness -------------------------------------


def test_gpus_serve_the_executed_schedule_and_raw_gpus_on_request(
    loaded: TestClient,  # noqa: F811
    database: Database,
) -> None:
    payload = {"series": SERIES, "profile": PROFILE, "raw_gpus": "true", "cold_start_s": "600"}
    executed, raw = post_query(loaded, target("gpus", **payload))
    served = plan(database, cold_start_s=600)
    frame = served.plan.frame
    # band auto (the default) names the margin sized on; the October forecast is stale
    sized = f"{PROFILE}, auto → {sized_label(served)}"
    assert executed["target"] == f"{SERIES} gpus ({sized}){STALE_SUFFIX}"
    assert raw["target"] == f"{SERIES} raw_gpus ({sized}){STALE_SUFFIX}"
    assert [v for v, _ in executed["datapoints"]] == frame["gpus"].tolist()
    assert [v for v, _ in raw["datapoints"]] == frame["raw_gpus"].tolist()
    # The schedule holds dips and starts rises early, so the two differ on this daily cycle.
    assert frame["gpus"].tolist() != frame["raw_gpus"].tolist()
    assert (frame["gpus"] >= frame["raw_gpus"]).all()  # no quota: never below the formula
    without = post_query(loaded, target("gpus", series=SERIES, profile=PROFILE))
    assert len(without) == 1


def test_a_stale_plan_says_so_in_every_series_name(fresh: TestClient, database: Database) -> None:
    assert plan(database).is_stale() and not plan(database, FRESH).is_stale()
    payload = {"profile": PROFILE, "replicas": "true", "raw_gpus": "true"}
    now = pd.Timestamp.now(tz="UTC")
    names = {
        s["target"]
        for what in ("gpus", "cost")
        for s in post_query(
            fresh, target(what, **payload), range=wide_range(now - pd.Timedelta(days=40), 45)
        )
    }
    assert STALE_SUFFIX == " STALE: forecast older than 36 h"
    october = {n for n in names if not n.startswith(FRESH)}  # SERIES and OTHER, trained in October
    assert len(october) == 8 and all(n.endswith(STALE_SUFFIX) for n in october)
    # the default band is auto: each name says the margin the plan was sized on
    sized = f"auto → {sized_label(plan(database, FRESH))}"
    assert {n for n in names if n.startswith(FRESH)} == {
        f"{FRESH} gpus ({PROFILE}, {sized})",
        f"{FRESH} replicas ({PROFILE}, {sized})",
        f"{FRESH} raw_gpus ({PROFILE}, {sized})",
        f"{FRESH} cost usd/h ({PROFILE}, {sized})",
    }


def test_scale_up_annotations_start_one_cold_start_early(
    loaded: TestClient,  # noqa: F811
    database: Database,
) -> None:
    payload = {"series": SERIES, "profile": PROFILE, "cold_start_s": "600"}
    [table] = post_query(loaded, target("scale_events", **payload))
    frame = plan(database, cold_start_s=600).plan.frame
    gpus, hours = frame["gpus"].tolist(), frame["hour"].tolist()
    changes = [
        (hours[i], gpus[i - 1], gpus[i]) for i in range(1, len(gpus)) if gpus[i] != gpus[i - 1]
    ]
    assert any(after > before for _, before, after in changes)
    assert any(after < before for _, before, after in changes)
    assert len(table["rows"]) == len(changes)
    for row, (hour, before, after) in zip(table["rows"], changes, strict=True):
        start, end, title, text, tags = row
        assert end == int(hour.value // 10**6)
        if after > before:
            assert start == end - 600_000  # ordered 10 minutes before the hour it serves
            assert title == f"scale up {before} → {after} GPUs"
            assert "600 s" in text and f"{hour:%H:%M} UTC" in text
        else:
            assert start == end
            assert title == f"scale down {before} → {after} GPUs" and "1800 s hold" in text
        assert tags.split(",")[-1] == "stale"  # the October forecast is old


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"min_gpus": "1.5"}, "min_gpus must be a whole number"),
        ({"min_gpus": "0"}, "min_gpus must be between 1"),
        ({"max_gpus": "lots"}, "max_gpus must be a whole number"),
        ({"min_gpus": "8", "max_gpus": "4"}, "max_gpus 4 is below payload.min_gpus 8"),
        ({"cold_start_s": "7200"}, "cold_start_s must be between 0 and 3600"),
        ({"scale_down_hold_s": "-1"}, "scale_down_hold_s must be between 0"),
    ],
)
def test_bad_schedule_parameters_are_400(
    loaded: TestClient,  # noqa: F811
    payload: dict[str, str],
    fragment: str,
) -> None:
    for name in ("gpus", "plan_backtest"):
        body = {"targets": [target(name, series=SERIES, profile=PROFILE, **payload)]}
        response = loaded.post("/grafana/query", json=body)
        assert response.status_code == 400, response.text
        assert fragment in response.json()["detail"]


def test_quota_parameters_reach_the_plan(
    loaded: TestClient,  # noqa: F811
    database: Database,
) -> None:
    quota = int(plan(database).plan.peak_gpus) - 2
    payload = {"series": SERIES, "profile": PROFILE, "max_gpus": str(quota), "raw_gpus": True}
    executed, raw = post_query(loaded, target("gpus", **payload))
    assert max(v for v, _ in executed["datapoints"]) == quota
    assert max(v for v, _ in raw["datapoints"]) > quota  # what the formula wanted


# -- plan_backtest -----------------------------------------------------------------------------


def backtest_rows(client: TestClient, **payload: Any) -> list[dict[str, Any]]:
    [table] = post_query(client, target("plan_backtest", **payload))
    assert table["type"] == "table"
    assert [c["text"] for c in table["columns"]] == BACKTEST_COLUMNS + RATIO_COLUMNS
    return [dict(zip(BACKTEST_COLUMNS + RATIO_COLUMNS, row, strict=True)) for row in table["rows"]]


def stored_result(database: Database, **params: Any) -> dict[str, Any] | None:
    with database.transaction() as session:
        series = repository.get_series(session, name=SERIES)
        replay = latest_replay(
            session, series_id=series.id, profile=PROFILE, params=plans.PlanParams(**params)
        )
        return None if replay is None else replay.result


class Replays:
    """Counts the replays plan_backtest runs; each runs for real, with the fast models."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, database: Database, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(dict(kwargs))
        fast = dataclasses.replace(kwargs["options"], models=FAST)
        return run_backtest(database, **{**kwargs, "options": fast})


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> Replays:
    counter = Replays()
    monkeypatch.setattr(replay_targets, "run_backtest", counter)
    return counter


def test_plan_backtest_replays_once_then_serves_the_stored_result(
    loaded: TestClient,  # noqa: F811
    database: Database,
    replays: Replays,
) -> None:
    payload = {"series": SERIES, "profile": PROFILE, "days": "2", "utilization_target": "0.7"}
    rows = backtest_rows(loaded, **payload)
    assert len(replays.calls) == 1
    assert replays.calls[0]["params"] == plans.PlanParams(utilization_target=0.7)
    assert replays.calls[0]["options"] == ReplayOptions(days=2)
    assert policies(rows) == POLICIES
    assert [r["policy"] for r in rows if r["recommended"]] == ["gpucast"]
    assert [r["policy"] for r in rows if r["bound"]] == ["instant-bound"]
    stored = stored_result(database, utilization_target=0.7)
    assert stored is not None and stored["end"] == "2026-10-22T00:00:00+00:00"
    assert [{k: r[k] for k in BACKTEST_COLUMNS} for r in rows] == [
        {k: p[k] for k in BACKTEST_COLUMNS} for p in stored["policies"]
    ]
    by_name = {r["policy"]: r for r in rows}
    ours, bound = by_name["gpucast"], by_name["instant-bound"]
    assert ours["gpu_hours_vs_instant_bound"] == pytest.approx(
        ours["gpu_hours"] / bound["gpu_hours"]
    )
    assert bound["gpu_hours_vs_instant_bound"] == pytest.approx(1.0)
    if EQUAL_RISK in by_name:
        assert ours["gpu_hours_vs_reactive_at_equal_risk"] == pytest.approx(
            ours["gpu_hours"] / by_name[EQUAL_RISK]["gpu_hours"]
        )
    else:
        assert ours["gpu_hours_vs_reactive_at_equal_risk"] is None
    assert all(r["gpu_hours"] > 0 and r["peak_gpus"] >= 1 for r in rows)

    assert backtest_rows(loaded, **payload) == rows  # current: read, not replayed
    assert len(replays.calls) == 1
    three = backtest_rows(loaded, **{**payload, "days": "3"})  # another window: replayed
    backtest_rows(loaded, **{**payload, "utilization_target": "0.6"})  # other parameters
    assert len(replays.calls) == 3
    # Two panels with different windows each read their own stored replay on every refresh.
    assert backtest_rows(loaded, **payload) == rows
    assert backtest_rows(loaded, **{**payload, "days": "3"}) == three != rows
    assert len(replays.calls) == 3


def test_plan_backtest_uses_a_replay_stored_elsewhere_until_a_new_hour_arrives(
    loaded: TestClient,  # noqa: F811
    database: Database,
    replays: Replays,
) -> None:
    options = ReplayOptions(days=2, models=FAST)
    result = run_backtest(
        database,
        series_name=SERIES,
        profile_name=PROFILE,
        params=plans.PlanParams(),
        options=options,
    )
    rows = backtest_rows(loaded, series=SERIES, profile=PROFILE, days=2)
    assert replays.calls == []
    assert [r["gpu_hours"] for r in rows] == [p["gpu_hours"] for p in result["policies"]]

    hour = pd.Timestamp(result["end"])  # the next hour is observed: the replay ends later now
    with database.transaction() as session:
        last = daily_load().iloc[[-24]].assign(hour=hour, series=SERIES)
        ingest.store(session, last, create_series=False)
    # an hour stored outside this server (the CLI, another replica) shows once the response
    # cache's entries expire (read_cache_ttl_s): expire them as that much time would
    loaded.app.state.response_cache.clear()  # type: ignore[attr-defined]
    backtest_rows(loaded, series=SERIES, profile=PROFILE, days=2)
    assert len(replays.calls) == 1
    stored = stored_result(database)
    assert stored is not None and pd.Timestamp(stored["end"]) == hour + pd.Timedelta(hours=1)
    backtest_rows(loaded, series=SERIES, profile=PROFILE, days=2)
    assert len(replays.calls) == 1


def test_plan_backtest_runs_the_real_replay(loaded: TestClient, database: Database) -> None:  # noqa: F811
    # No patching: the service's own candidates, the request's database, a stored result.
    rows = backtest_rows(loaded, series=SERIES, profile=PROFILE, days=1)
    stored = stored_result(database)
    assert stored is not None and stored["days"] == 1
    assert policies(rows) == POLICIES
    assert json.loads(json.dumps(rows)) == rows


def test_concurrent_plan_backtests_replay_once(
    database: Database,
    loaded: TestClient,  # noqa: F811
    replays: Replays,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def slow_replay(db: Database, **kwargs: Any) -> dict[str, Any]:
        time.sleep(0.5)  # long enough for the second query to arrive meanwhile
        return replays(db, **kwargs)

    results: list[Any] = []

    def query() -> None:
        with database.transaction() as session:
            ctx = grafana.QueryContext(
                session=session,
                start=pd.Timestamp("2026-10-20T00:00Z").to_pydatetime(),
                end=pd.Timestamp("2026-10-23T00:00Z").to_pydatetime(),
                database=database,
            )
            payload = {"series": SERIES, "profile": PROFILE, "days": "2"}
            results.append(replay_targets.plan_backtest(ctx, payload))

    monkeypatch.setattr(replay_targets, "run_backtest", slow_replay)
    threads = [threading.Thread(target=query) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 2 and results[0] == results[1]
    assert len(replays.calls) == 1


@pytest.mark.parametrize(
    ("payload", "status", "fragment"),
    [
        ({"profile": PROFILE, "days": "2"}, 400, "replays one series"),
        ({"series": SERIES, "profile": PROFILE, "days": "0"}, 400, "days must be between 1"),
        ({"series": SERIES, "profile": PROFILE, "days": "2.5"}, 400, "whole number"),
        ({"series": SERIES, "profile": PROFILE, "days": "91"}, 400, "between 1 and 90"),
        ({"series": SERIES, "profile": PROFILE, "days": "30"}, 400, "replay fewer days"),
        ({"series": SERIES, "profile": "a100", "days": "2"}, 400, "not found"),
        ({"series": "no/such", "profile": PROFILE}, 404, "no/such"),
        ({"series": SERIES, "profile": PROFILE, "band": "p99"}, 400, "hi_80"),
    ],
)
def test_bad_plan_backtest_payloads_are_4xx(
    loaded: TestClient,  # noqa: F811
    replays: Replays,
    payload: dict[str, Any],
    status: int,
    fragment: str,
) -> None:
    response = loaded.post("/grafana/query", json={"targets": [target("plan_backtest", **payload)]})
    assert response.status_code == status, response.text
    assert fragment in response.json()["detail"]


def test_plan_backtest_of_a_series_without_observations_is_400(
    loaded: TestClient,  # noqa: F811
    replays: Replays,
) -> None:
    assert loaded.post("/v1/series", json={"name": "staging/empty"}).status_code == 201
    body = {"targets": [target("plan_backtest", series="staging/empty", profile=PROFILE)]}
    response = loaded.post("/grafana/query", json=body)
    assert response.status_code == 400 and "no observations" in response.json()["detail"]
    assert replays.calls == []


def test_plan_backtest_is_in_the_catalog_and_on_the_dashboard(
    loaded: TestClient,  # noqa: F811
) -> None:
    body = loaded.post("/grafana/metrics", json={}).json()
    by_name = {m["value"]: {p["name"]: p for p in m["payloads"]} for m in body}
    editors = by_name["plan_backtest"]
    assert list(editors) == [
        "series",
        "profile",
        "days",
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
    assert editors["days"]["type"] == "input" and editors["days"]["placeholder"] == "7"
    assert [o["value"] for o in editors["band"]["options"]] == [
        "auto",
        "yhat",
        "hi_80",
        "hi_95",
        *(f"q{level}" for level in (50, 60, 70, 80, 90, 95, 99)),
    ]
    assert [o["value"] for o in by_name["gpus"]["raw_gpus"]["options"]] == ["false", "true"]
    assert {"max_gpus", "cold_start_s", "scale_down_hold_s"} <= set(by_name["scale_events"])

    dashboard = json.loads(DASHBOARD.read_text())
    panels = {t["target"]: p for p in dashboard["panels"] for t in p["targets"]}
    table = panels["plan_backtest"]
    assert table["type"] == "table"
    assert table["targets"][0]["payload"]["series"] == "$series"
    gpus = panels["gpus"]
    assert gpus["targets"][0]["payload"]["raw_gpus"] == "true"
    matchers = [o["matcher"]["options"] for o in gpus["fieldConfig"]["overrides"]]
    assert any("raw_gpus" in m for m in matchers) and any("STALE" in m for m in matchers)
