"""/metrics gauges a Prometheus alert can use: how old each latest forecast's training data
is, whether the plans built from it are stale (trained more than 36 h ago), and the figures of
every shared pool's plan (equal to GET /v1/pools/{name}/plan, read without calibrating)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pandas as pd
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

import capacity
from app.db import Database
from app.db.models import ForecastRun, PlanCalibration, Series
from app.jobs import ForecastOptions, run_forecasts
from app.plans import auto_band
from tests.app.pool_data import (
    BATCH,
    CHAT,
    CODE,
    code_tokens_per_request,
    create_pool,
    create_profiles,
    rest_plan,
    store_members,
)
from tests.app.test_jobs import FAST, daily_load, load

T = TypeVar("T")
POOL_LABELS = ("pool", "member", "priority")  # the order the samples are keyed by
OLD = "prod/october"  # daily_load's history ends 2026-10-21 23:00
FRESH = "prod/fresh"


def scrape(client: TestClient, name: str) -> dict[tuple[str, str], float]:
    """``{(series, metric): value}`` of one gauge in the scrape."""
    response = client.get("/metrics")
    assert response.status_code == 200
    values = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == name:
                values[(sample.labels["series"], sample.labels["metric"])] = sample.value
    return values


def fresh_history(last: pd.Timestamp) -> pd.DataFrame:
    frame = daily_load(days=10, seed=4)
    return frame.assign(hour=frame["hour"] + (last - frame["hour"].max()))


@pytest.fixture
def forecasted(database: Database) -> Database:
    load(database, OLD, daily_load())
    last = pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=1)
    load(database, FRESH, fresh_history(last))
    assert not run_forecasts(database, ForecastOptions(models=FAST, workers=1)).failed
    return database


def test_trained_age_and_staleness_of_every_latest_forecast(
    forecasted: Database, client: TestClient
) -> None:
    before = pd.Timestamp.now(tz="UTC")
    age = scrape(client, "gpucast_forecast_trained_age_seconds")
    stale = scrape(client, "gpucast_plan_stale")
    after = pd.Timestamp.now(tz="UTC")
    keys = {(s, m) for s in (OLD, FRESH) for m in ("requests", "tokens")}
    assert set(age) == set(stale) == keys
    trained_old = pd.Timestamp("2026-10-21T23:00Z")
    for metric in ("requests", "tokens"):
        low, high = (before - trained_old).total_seconds(), (after - trained_old).total_seconds()
        assert low - 1 <= age[(OLD, metric)] <= high + 1
        assert 3600 <= age[(FRESH, metric)] <= 2 * 3600 + 60
        assert stale[(OLD, metric)] == 1 and stale[(FRESH, metric)] == 0


def test_staleness_follows_the_latest_complete_run(
    forecasted: Database, client: TestClient
) -> None:
    with forecasted.transaction() as session:
        series = session.query(Series).filter_by(name=OLD).one()
        # A newer run that failed does not make the old forecast fresh.
        session.add(
            ForecastRun(
                series_id=series.id,
                metric="requests",
                status="failed",
                trained_until=pd.Timestamp.now(tz="UTC").to_pydatetime(),
                horizon=24,
                error="boom",
            )
        )
    assert scrape(client, "gpucast_plan_stale")[(OLD, "requests")] == 1
    # New history and a refit: the latest complete run is fresh now.
    last = pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=2)
    load(forecasted, OLD, fresh_history(last))
    options = ForecastOptions(series=(OLD,), metrics=("requests",), models=FAST, workers=1)
    assert not run_forecasts(forecasted, options).failed
    stale = scrape(client, "gpucast_plan_stale")
    assert stale[(OLD, "requests")] == 0 and stale[(OLD, "tokens")] == 1
    age = scrape(client, "gpucast_forecast_trained_age_seconds")
    assert 2 * 3600 <= age[(OLD, "requests")] <= 3 * 3600 + 60


def test_the_stale_boundary_is_36_hours(database: Database, client: TestClient) -> None:
    now = pd.Timestamp.now(tz="UTC")
    with database.transaction() as session:
        for name, hours in (("a/inside", 35.5), ("a/outside", 36.5)):
            series = Series(name=name, labels={})
            session.add(series)
            session.flush()
            session.add(
                ForecastRun(
                    series_id=series.id,
                    metric="tokens",
                    status="complete",
                    trained_until=(now - pd.Timedelta(hours=hours)).to_pydatetime(),
                    horizon=24,
                )
            )
    stale = scrape(client, "gpucast_plan_stale")
    assert stale == {("a/inside", "tokens"): 0, ("a/outside", "tokens"): 1}


# -- shared pools -----------------------------------------------------------------------------


@pytest.fixture
def pool_start(client: TestClient, database: Database) -> pd.Timestamp:
    """Pools ``shared`` (no quota) and ``tight`` (one node) over three planned members."""
    create_profiles(client)
    begin = store_members(database)
    create_pool(client, "shared")
    create_pool(client, "tight", quota=1)
    return begin


def pool_scrape(client: TestClient) -> dict[str, dict[tuple[str, ...], float]]:
    """``{sample name: {label values: value}}`` of every ``gpucast_pool_*`` sample, read with
    this hour fixed (scraped again if the hour turned meanwhile)."""
    for _ in range(3):
        hour = pd.Timestamp.now(tz="UTC").floor("h")
        response = client.get("/metrics")
        if pd.Timestamp.now(tz="UTC").floor("h") == hour:
            break
    assert response.status_code == 200
    out: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name.startswith("gpucast_pool_"):
                labels = tuple(sample.labels[k] for k in POOL_LABELS if k in sample.labels)
                out.setdefault(sample.name, {})[labels] = sample.value
    return out


def in_one_hour(read: Callable[[], T]) -> T:
    """``read()``, again if the hour turned while it ran: a scrape, the REST plans and the
    gauges expected from them must all be of one current hour."""
    for _ in range(3):
        hour = pd.Timestamp.now(tz="UTC").floor("h")
        result = read()
        if pd.Timestamp.now(tz="UTC").floor("h") == hour:
            break
    return result


def pool_gauges(
    client: TestClient, names: Sequence[str]
) -> tuple[dict[str, dict[tuple[str, ...], float]], dict[str, dict[tuple[str, ...], float]]]:
    """A scrape and, per pool in ``names``, the gauges expected from its REST plan sized on
    hi_80 (which never calibrates), all of one hour."""

    def read() -> tuple[dict, dict]:
        scraped = pool_scrape(client)
        plans = {name: rest_plan(client, name, band="hi_80") for name in names}
        return scraped, {name: expected_pool_gauges(name, plan) for name, plan in plans.items()}

    return in_one_hour(read)


def expected_pool_gauges(name: str, plan: dict[str, Any]) -> dict[tuple[str, ...], float]:
    """The samples of one planned pool, ``{(sample, *labels): value}``, written out from its
    REST plan."""
    hour = pd.Timestamp.now(tz="UTC").floor("h")
    now = next(h for h in plan["hours"] if pd.Timestamp(h["hour"]) == hour)
    pool = (name,)
    gauges = {
        "planned": 1,
        "unplanned_members": len(plan["unplanned"]),
        "plan_stale": int(bool(plan["stale_members"])),
        "plan_hours": len(plan["hours"]),
        "nodes": now["nodes"],
        "lower_bound_nodes": now["lower_bound"],
        "fragmentation_gpus": now["fragmentation_gpus"],
        "on_demand_nodes": now["on_demand_nodes"],
        "spot_nodes": now["spot_nodes"],
        "peak_nodes": plan["peak_nodes"],
        "reserved_nodes": plan["reservations"]["pooled_reserved_nodes"],
        "cost_usd": plan["total_cost_usd"],
        "throttled_hours": plan["throttled_hours"],
        "migrations": plan["migrations"],
    }
    out = {(f"gpucast_pool_{k}", *pool): v for k, v in gauges.items()}
    for member in now["members"]:
        labels = (name, member["member"], member["priority"])
        out[("gpucast_pool_member_granted_gpus", *labels)] = member["granted_gpus"]
        out[("gpucast_pool_member_shortfall_gpus", *labels)] = member["shortfall_gpus"]
        if not member["throttled"]:
            continue
        for field in ("rate_limit_tokens_per_s", "rate_limit_rps", "tokens_per_request"):
            if member[field] is not None:
                out[(f"gpucast_pool_member_{field}", name, member["member"])] = member[field]
    return out


def of_pool(scraped: dict[str, dict[tuple, float]], name: str) -> dict[tuple[str, ...], float]:
    """The samples of one pool, ``{(sample, *labels): value}``, without the count of
    uncalibrated members."""
    return {
        (sample, *labels): value
        for sample, values in scraped.items()
        for labels, value in values.items()
        if labels[0] == name and sample != "gpucast_pool_uncalibrated_members"
    }


def calibrated_choices(database: Database) -> int:
    with database.transaction() as session:
        return session.scalar(select(func.count()).select_from(PlanCalibration)) or 0


def test_pool_gauges_equal_the_rest_plan_and_never_calibrate(
    pool_start: pd.Timestamp,
    client: TestClient,
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    calibrate = auto_band.calibrate

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["series_name"])
        return calibrate(*args, **kwargs)

    monkeypatch.setattr(auto_band, "calibrate", recording)
    scraped, expected = pool_gauges(client, ("shared", "tight"))
    assert calls == [] and calibrated_choices(database) == 0  # a scrape never calibrates
    # until band auto is calibrated, every member is sized on hi_80, as this plan is
    for name in ("shared", "tight"):
        assert of_pool(scraped, name) == pytest.approx(expected[name]), name
        assert scraped["gpucast_pool_uncalibrated_members"][(name,)] == 3
    # known in advance (the plan's third hour: chat and code at 8 GPUs, batch at 2)
    assert scraped["gpucast_pool_nodes"] == {("shared",): 3, ("tight",): 1}
    assert scraped["gpucast_pool_throttled_hours"] == {("shared",): 0, ("tight",): 24}
    shortfall = scraped["gpucast_pool_member_shortfall_gpus"]
    assert {k: v for k, v in shortfall.items() if k[0] == "tight"} == {
        ("tight", CHAT, "critical"): 0,
        ("tight", CODE, "standard"): 8,
        ("tight", BATCH, "batch"): 2,
    }
    # throttled members only: nothing is granted to them on the one node, so 0 requests/s
    assert scraped["gpucast_pool_member_rate_limit_rps"] == {
        ("tight", CODE): 0,
        ("tight", BATCH): 0,
    }
    assert scraped["gpucast_pool_member_rate_limit_tokens_per_s"] == {
        ("tight", CODE): 0,
        ("tight", BATCH): 0,
    }

    def calibrated() -> tuple[dict, dict]:
        default = rest_plan(client, "shared")  # a band auto read stores every member's choice
        return pool_scrape(client), expected_pool_gauges("shared", default)

    # the plan, the scrape and the gauges expected from the plan all of one hour (read again
    # if the hour turned between them); a read again reuses the stored choices
    scraped, expected_shared = in_one_hour(calibrated)
    assert sorted(calls) == sorted([CHAT, CODE, BATCH])  # once each; the scrape calibrated none
    assert scraped["gpucast_pool_uncalibrated_members"] == {("shared",): 0, ("tight",): 0}
    assert of_pool(scraped, "shared") == pytest.approx(expected_shared)


def test_a_partial_grant_exports_its_rate_limit(pool_start: pd.Timestamp, client: TestClient):
    members = [(CHAT, "h100-tp4", "standard"), (CODE, "h100-tp4", "standard")]
    create_pool(client, "split", quota=1, members=members)
    (scraped, expected), hour = in_one_hour(
        lambda: (pool_gauges(client, ("split",)), pd.Timestamp.now(tz="UTC").floor("h").hour)
    )
    assert of_pool(scraped, "split") == pytest.approx(expected["split"])
    # one node shared by two standard members: 4 GPUs each, each carrying 1,000 x 0.75 / 1.2
    # tokens/s, at 1,000 tokens per request (chat) and at code's figure of this hour of day
    per_request = code_tokens_per_request(hour)
    split = {
        name: {k: v for k, v in scraped[f"gpucast_pool_member_{name}"].items() if k[0] == "split"}
        for name in ("rate_limit_tokens_per_s", "tokens_per_request", "rate_limit_rps")
    }
    assert split == {
        "rate_limit_tokens_per_s": {
            ("split", CHAT): pytest.approx(2500),
            ("split", CODE): pytest.approx(2500),
        },
        "tokens_per_request": {
            ("split", CHAT): pytest.approx(1000),
            ("split", CODE): pytest.approx(per_request),
        },
        "rate_limit_rps": {
            ("split", CHAT): pytest.approx(2.5),
            ("split", CODE): pytest.approx(2500 / per_request),
        },
    }


def test_pools_that_cannot_be_planned_do_not_break_the_scrape(
    pool_start: pd.Timestamp, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client.post("/v1/series", json={"name": "pool/new"}).status_code == 201
    create_pool(client, "empty", members=[("pool/new", "h100-tp2", "standard")])
    create_pool(
        client, "mixed", members=[(CHAT, "h100-tp4", "critical"), ("pool/new", "h100-tp2", "batch")]
    )
    assert client.get("/v1/pools/empty/plan").status_code == 409
    plan_pool = capacity.plan_pool

    def failing(spec: capacity.PoolSpec, *args: Any, **kwargs: Any) -> capacity.PoolPlan:
        if spec.name == "tight":
            raise RuntimeError("boom")
        return plan_pool(spec, *args, **kwargs)

    monkeypatch.setattr(capacity, "plan_pool", failing)
    scraped, expected = pool_gauges(client, ("mixed",))
    assert scraped["gpucast_pool_planned"] == {
        ("empty",): 0,
        ("mixed",): 1,
        ("shared",): 1,
        ("tight",): 0,
    }
    assert scraped["gpucast_pool_unplanned_members"] == {
        ("empty",): 1,
        ("mixed",): 1,
        ("shared",): 0,
        ("tight",): 3,
    }
    assert set(scraped["gpucast_pool_nodes"]) == {("mixed",), ("shared",)}
    assert of_pool(scraped, "mixed") == pytest.approx(expected["mixed"])
    # the rest of the scrape is still there
    assert scrape(client, "gpucast_plan_stale")[(CHAT, "tokens")] == 0


def test_a_stale_pool_plan_has_no_current_hour(client: TestClient, database: Database) -> None:
    create_profiles(client)
    store_members(database, start=pd.Timestamp("2026-03-02T00:00Z"))
    create_pool(client, "old")
    scraped = pool_scrape(client)
    plan = rest_plan(client, "old", band="hi_80")
    assert scraped["gpucast_pool_plan_stale"] == {("old",): 1}
    assert scraped["gpucast_pool_peak_nodes"] == {("old",): plan["peak_nodes"]}
    assert scraped["gpucast_pool_cost_usd"] == {("old",): pytest.approx(plan["total_cost_usd"])}
    for now_only in ("nodes", "fragmentation_gpus", "member_shortfall_gpus"):
        assert f"gpucast_pool_{now_only}" not in scraped
