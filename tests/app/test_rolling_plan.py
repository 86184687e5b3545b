"""The rolling plan on the service: refresh runs after ingest, plans from the freshest run,
band=auto chosen once per nightly run, retention of refresh runs."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

import capacity
from app.cli import main
from app.db import Database
from app.db.models import ForecastRun, PlanCalibration
from app.jobs.refresh import apply_retention, refresh_forecasts
from app.plans.calibration import HEADROOMS, POINT_BAND, HeadroomReplay
from tests.support.clock import settled_hour

from .test_plan_surfaces import PROFILE, SERIES, history_rows

FAST = "seasonal_naive,seasonal_ma"


@pytest.fixture
def fitted(client: TestClient) -> tuple[TestClient, pd.Timestamp]:
    """Ten days of history ending three hours ago, fitted; the last three hours not sent."""
    end = settled_hour()
    rows = history_rows(end, days=10)
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    assert client.post(f"/v1/series/{SERIES}/observations", json=rows[:-3]).status_code == 200
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    response = client.post(f"/v1/series/{SERIES}/forecast", params={"models": FAST})
    assert response.status_code == 200, response.text
    client.rows = rows  # type: ignore[attr-defined]
    return client, end


def _runs(database: Database) -> list[ForecastRun]:
    with database.transaction() as session:
        return list(session.scalars(select(ForecastRun).order_by(ForecastRun.id)))


def test_plans_read_after_an_ingest_come_from_the_refreshed_run(
    fitted: tuple[TestClient, pd.Timestamp], database: Database
) -> None:
    client, end = fitted
    before = client.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"}).json()
    assert before["run_kind"] == "nightly"
    nightly_ids = {r.id for r in _runs(database)}

    response = client.post(f"/v1/series/{SERIES}/observations", json=client.rows[-3:])
    assert response.status_code == 200
    assert any("refreshed the forecast" in note for note in response.json()["notes"])

    runs = [r for r in _runs(database) if r.id not in nightly_ids]
    assert {r.kind for r in runs} == {"refresh"} and {r.metric for r in runs} == {
        "requests",
        "tokens",
    }
    for run in runs:
        assert run.parent_id in nightly_ids and run.status == "complete"
        assert pd.Timestamp(run.trained_until) == end - pd.Timedelta(hours=1)
        assert run.state is None  # a refresh reuses its parent's state
    after = client.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"}).json()
    assert after["run_kind"] == "refresh"
    tokens_refresh = next(r for r in runs if r.metric == "tokens")
    assert after["forecast_run_ids"] == [tokens_refresh.id]
    assert after["fitted_run_id"] == tokens_refresh.parent_id
    assert pd.Timestamp(after["hours"][0]["hour"]) == end
    assert pd.Timestamp(before["hours"][0]["hour"]) == end - pd.Timedelta(hours=3)
    # the forecast read shows the freshest run too, with its quantiles
    forecast = client.get(f"/v1/series/{SERIES}/forecast", params={"metric": "tokens"}).json()
    assert (forecast["id"], forecast["kind"]) == (tokens_refresh.id, "refresh")
    assert forecast["parent_id"] == tokens_refresh.parent_id
    first = forecast["points"][0]
    levels = [first[c] for c in ("q50", "q60", "q70", "q80", "q90", "q95", "q99")]
    assert levels == sorted(levels) and levels[0] >= 0


def test_forecast_refresh_on_the_cli_refreshes_only_what_grew(
    fitted: tuple[TestClient, pd.Timestamp],
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, _ = fitted
    assert main(["--database-url", database_url, "forecast", "--refresh"]) == 0
    assert "refreshed 0 forecasts" in capsys.readouterr().out
    from app import ingest
    from app.ingest.columns import CANONICAL

    with database.transaction() as session:  # stored without the ingest's own refresh
        frame = pd.DataFrame(client.rows[-2:]).rename(columns={"timestamp": "hour"})
        frame["hour"] = pd.to_datetime(frame["hour"], utc=True)
        frame["series"] = SERIES
        frame["total_tokens"] = frame["prompt_tokens"] + frame["completion_tokens"]
        ingest.store(session, frame.loc[:, list(CANONICAL)], create_series=False)
    assert main(["--database-url", database_url, "forecast", "--refresh"]) == 0
    out = capsys.readouterr().out
    assert "refreshed 2 forecasts" in out and "0 failed" in out
    assert main(["--database-url", database_url, "forecast", "--refresh"]) == 0
    assert "refreshed 0 forecasts" in capsys.readouterr().out
    assert main(["--database-url", database_url, "forecast", "--refresh", "nope"]) == 2


def test_band_auto_is_chosen_once_per_nightly_run_and_says_why(
    fitted: tuple[TestClient, pd.Timestamp], database: Database
) -> None:
    client, _ = fitted
    url = f"/v1/series/{SERIES}/capacity"
    plan = client.get(url, params={"profile": "l4-small"}).json()
    assert plan["band"] == "auto" and plan["max_over_capacity"] == 0.01
    assert plan["safety_factor"] is None  # auto: the calibrated headroom is the margin
    choice = plan["band_choice"]
    assert choice["band"] == plan["sized_band"] == POINT_BAND
    assert choice["headroom"] in HEADROOMS and choice["label"] == f"yhat x {choice['headroom']:.2f}"
    rows = choice["candidates"]
    assert [row["headroom"] for row in rows] == sorted(row["headroom"] for row in rows)
    assert all(row["headroom"] in HEADROOMS for row in rows)
    hours = [row["gpu_hours"] for row in rows]
    assert hours == sorted(hours)  # more headroom never costs less
    chosen = next(row for row in rows if row["headroom"] == choice["headroom"])
    assert choice["replayed_time_over_capacity_share"] == chosen["time_over_capacity_share"]
    assert choice["met"] is (chosen["risk_upper_bound"] <= 0.01)
    # with the reactive backstop beside the plan every candidate meets 1 %, so the cheapest is
    # the grid's lowest (the test below takes the backstop away to move the choice inside)
    assert_cheapest_meeting(choice, 0.01)
    assert choice["note"] and 1 <= choice["days"] <= 7
    # the explicit bands still work, size on what they name, at the default 1.2
    explicit = client.get(url, params={"profile": "l4-small", "band": "hi_95"}).json()
    assert explicit["band"] == explicit["sized_band"] == "hi_95"
    assert explicit["band_choice"] is None
    assert explicit["safety_factor"] is None

    def calibrations() -> int:  # band auto's choices (an explicit band's replay is keyed band=)
        with database.transaction() as session:
            return session.scalar(
                select(func.count())
                .select_from(PlanCalibration)
                .where(PlanCalibration.params_key.not_like("band=%"))
            )

    assert calibrations() == 1
    client.get(url, params={"profile": "l4-small"})
    client.get(f"/v1/series/{SERIES}/desired-replicas", params={"profile": "l4-small"})
    assert calibrations() == 1  # not recomputed on read
    # after new hours (a refresh run) the same nightly choice still holds
    client.post(f"/v1/series/{SERIES}/observations", json=client.rows[-3:])
    client.get(url, params={"profile": "l4-small"})
    assert calibrations() == 1
    # another risk target is another choice
    strict = client.get(url, params={"profile": "l4-small", "max_over_capacity": 0.001}).json()
    assert strict["band_choice"]["max_over_capacity"] == 0.001
    assert_cheapest_meeting(strict["band_choice"], 0.001)
    assert calibrations() == 2


def assert_cheapest_meeting(choice: dict[str, Any], target: float) -> None:
    """The chosen headroom meets ``target`` and the next cheaper one of the grid, replayed on
    the way (the bisection ends between neighbours), does not: nothing cheaper meets it."""
    rows = {row["headroom"]: row for row in choice["candidates"]}
    assert choice["met"] and rows[choice["headroom"]]["risk_upper_bound"] <= target
    k = HEADROOMS.index(choice["headroom"])
    if k > 0:
        assert rows[HEADROOMS[k - 1]]["risk_upper_bound"] > target


def test_band_auto_is_the_cheapest_headroom_meeting_each_target(
    fitted: tuple[TestClient, pd.Timestamp],
) -> None:
    """Without the reactive backstop the plan alone carries the load, so small headrooms miss:
    at half the point forecast the busiest hour's plan is 3,200 x 0.5 x 1.3 / (2,000 x 0.75)
    -> 2 GPUs, 4,000 tokens/s, against busiest minutes near 3,200 x 1.3 = 4,160 tokens/s.
    The choice lands inside the grid, and a stricter target needs a larger headroom."""
    client, _ = fitted
    url = f"/v1/series/{SERIES}/capacity"
    chosen = {}
    for target in (0.05, 0.001):
        query = {"profile": "l4-small", "reactive_backstop": "false", "max_over_capacity": target}
        choice = client.get(url, params=query).json()["band_choice"]
        assert_cheapest_meeting(choice, target)
        # the grid's lowest misses (so the check of the cheaper neighbour above is not empty)
        assert choice["headroom"] > HEADROOMS[0]
        chosen[target] = choice["headroom"]
    assert chosen[0.001] > chosen[0.05]


def test_band_auto_sizes_the_point_forecast_times_its_headroom(
    fitted: tuple[TestClient, pd.Timestamp],
) -> None:
    client, _ = fitted
    url = f"/v1/series/{SERIES}/capacity"
    auto = client.get(url, params={"profile": "l4-small"}).json()
    headroom = auto["band_choice"]["headroom"]
    point = client.get(url, params={"profile": "l4-small", "band": "yhat", "safety_factor": 1})
    sized = [h["sized_tokens_per_s"] for h in auto["hours"]]
    plain = [h["sized_tokens_per_s"] for h in point.json()["hours"]]
    assert sized == pytest.approx([v * headroom for v in plain])
    # an explicit safety factor stacks on the calibrated headroom, on purpose
    stacked = client.get(url, params={"profile": "l4-small", "safety_factor": 1.5}).json()
    assert stacked["safety_factor"] == 1.5
    stacked_sized = [h["sized_tokens_per_s"] for h in stacked["hours"]]
    assert stacked_sized == pytest.approx([v * stacked["band_choice"]["headroom"] for v in plain])
    expected = capacity.gpus_for_load(
        np.array(stacked_sized),
        stacked["per_gpu_tokens_per_s"],
        utilization_target=0.75,
        safety_factor=1.5,
        min_gpus=1,
        gpus_per_replica=stacked["gpus_per_replica"],
    )
    assert [h["raw_gpus"] for h in stacked["hours"]] == expected.tolist()


def test_band_auto_says_when_there_is_too_little_history(client: TestClient) -> None:
    end = settled_hour()
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    rows = history_rows(end, days=2)
    assert client.post(f"/v1/series/{SERIES}/observations", json=rows).status_code == 200
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    assert client.post(f"/v1/series/{SERIES}/forecast", params={"models": FAST}).status_code == 200
    plan = client.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"}).json()
    assert plan["sized_band"] == "hi_80"
    assert plan["band_choice"]["met"] is False
    assert "not calibrated" in plan["band_choice"]["note"]


@pytest.mark.parametrize(
    "value", ["0", "-0.1", "0.9", "abc"], ids=["zero", "negative", "too-high", "text"]
)
def test_a_bad_risk_target_is_a_422(fitted: tuple[TestClient, pd.Timestamp], value: str) -> None:
    client, _ = fitted
    response = client.get(
        f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small", "max_over_capacity": value}
    )
    assert response.status_code == 422


def _steady(gpus: int, start: pd.Timestamp, hours: int) -> list[capacity.PlanDecision]:
    return [
        capacity.PlanDecision(
            at=start + pd.Timedelta(hours=h),
            start=start + pd.Timedelta(hours=h),
            gpus=np.full(24, gpus),
        )
        for h in range(hours)
    ]


def _bursty_load(start: pd.Timestamp, burst_days: tuple[int, ...]) -> pd.Series:
    """1,000 tokens/s for two days, except 30 minutes at 1,150 on each of ``burst_days``."""
    minutes = pd.date_range(start, periods=48 * 60, freq="min")
    load = pd.Series(1000.0, index=minutes)
    for day in burst_days:
        burst = start + pd.Timedelta(days=day, hours=14)
        load[(minutes >= burst) & (minutes < burst + pd.Timedelta(minutes=30))] = 1150.0
    return load


def _headroom_replay(
    load: pd.Series,
    start: pd.Timestamp,
    gpus_at: Any,
    backstop: capacity.ReactiveSpec | None = None,
) -> HeadroomReplay:
    fleet = capacity.Fleet(per_gpu_tokens_per_s=100.0, rules=capacity.ScheduleRules(cold_start_s=0))
    return HeadroomReplay(
        lambda h: _steady(gpus_at(h), start, 48),
        load,
        fleet=fleet,
        start=start,
        end=start + pd.Timedelta(hours=48),
        backstop=backstop,
    )


def test_the_headroom_is_the_cheapest_meeting_the_target_on_a_known_history() -> None:
    start = pd.Timestamp("2026-03-02T00:00Z")
    load = _bursty_load(start, (0, 1))  # 2.08 % of the time at 1,150 tokens/s

    def gpus_at(h: float) -> int:  # a point forecast of 1,000 tokens/s at 100 per GPU
        return math.ceil(10 * h - 1e-9)

    replay = _headroom_replay(load, start, gpus_at)
    # 10 or 11 GPUs: short in the bursts only; 12: never
    loose = replay.choose(0.025)
    assert loose.met and loose.band == "yhat"
    assert loose.headroom == min(h for h in HEADROOMS if gpus_at(h) >= 10)
    assert loose.risk == pytest.approx(60 / (48 * 60))
    strict = replay.choose(0.01)
    assert strict.met and strict.risk == 0.0
    assert strict.headroom == min(h for h in HEADROOMS if gpus_at(h) >= 12)
    # bisection: a few replays, not the whole grid, each once across both targets
    assert len(strict.table) <= 12 < len(HEADROOMS)
    assert [row["headroom"] for row in strict.table] == sorted(r["headroom"] for r in strict.table)
    never = _headroom_replay(load, start, lambda h: 9).choose(0.01)
    assert not never.met and never.headroom == HEADROOMS[-1]
    assert "no headroom met 1.00%" in never.note
    # a reactive trigger beside the plan catches the bursts: the lowest headroom suffices
    backed = _headroom_replay(
        load, start, gpus_at, backstop=capacity.ReactiveSpec(target_utilization=0.75)
    ).choose(0.01)
    assert backed.met and backed.headroom == HEADROOMS[0] and backed.risk < 0.01


def test_the_headroom_meets_the_target_with_the_day_to_day_spread_of_the_risk() -> None:
    start = pd.Timestamp("2026-03-02T00:00Z")
    load = _bursty_load(start, (1,))  # one burst day, one calm: 1.04 % over two days

    def gpus_at(h: float) -> int:
        return math.ceil(10 * h - 1e-9)

    replay = _headroom_replay(load, start, gpus_at)
    choice = replay.choose(0.015)
    # 10 GPUs replay to 1.04 % (under 1.5 %), but the days differ (2.08 % and 0 %): the mean
    # plus its standard error (2.08 %) does not meet the target, so the margin grows
    ten = replay.row(min(h for h in HEADROOMS if gpus_at(h) == 10))
    assert ten["time_over_capacity_share"] == pytest.approx(30 / (48 * 60))
    assert ten["risk_upper_bound"] == pytest.approx(60 / (48 * 60), rel=1e-3)
    assert choice.met and gpus_at(choice.headroom) == 12


def test_retention_drops_old_refresh_runs_and_keeps_the_newest(
    fitted: tuple[TestClient, pd.Timestamp], database: Database
) -> None:
    client, _ = fitted
    for row in client.rows[-3:]:
        assert client.post(f"/v1/series/{SERIES}/observations", json=[row]).status_code == 200
    assert refresh_forecasts(database).refreshed == []  # ingest already refreshed them
    kinds = [r.kind for r in _runs(database)]
    assert kinds.count("refresh") == 6 and kinds.count("nightly") == 2
    report = apply_retention(database, refresh_days=15, now=datetime.now(UTC))
    assert report.refresh_deleted == 0
    report = apply_retention(database, refresh_days=15, now=datetime.now(UTC) + timedelta(days=16))
    assert report.refresh_deleted == 4  # the newest refresh of each metric stays
    runs = _runs(database)
    assert [r.kind for r in runs].count("refresh") == 2
    report = apply_retention(
        database, refresh_days=15, nightly_days=30, now=datetime.now(UTC) + timedelta(days=40)
    )
    assert report.nightly_deleted == 0  # parents of kept refreshes
    plan = client.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"})
    assert plan.status_code == 200 and plan.json()["run_kind"] == "refresh"


def test_the_kubernetes_object_warns_when_band_auto_lacks_its_reactive_trigger(
    fitted: tuple[TestClient, pd.Timestamp],
) -> None:
    import yaml

    client, _ = fitted
    url = f"/v1/series/{SERIES}/kubernetes"
    bare = client.get(url, params={"profile": "l4-small"})
    assert bare.status_code == 200
    assert bare.text.startswith("# WARNING: band auto was calibrated for a fleet that runs")
    assert yaml.safe_load(bare.text)["kind"] == "ScaledObject"
    alone = client.get(url, params={"profile": "l4-small", "reactive_backstop": "false"})
    assert not alone.text.startswith("#") and "reactive_backstop=false" in alone.text
    backed = client.get(
        url,
        params={
            "profile": "l4-small",
            "reactive_query": "sum(rate(vllm:generation_tokens_total[1m]))",
            "reactive_target": 1500,
            "prometheus_url": "http://prometheus:9090",
        },
    )
    assert not backed.text.startswith("#")
    assert len(yaml.safe_load(backed.text)["spec"]["triggers"]) == 2


def test_the_nightly_run_recalibrates_the_choices_in_use(
    fitted: tuple[TestClient, pd.Timestamp],
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, _ = fitted
    client.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"})
    client.get(
        f"/v1/series/{SERIES}/capacity",
        params={"profile": "l4-small", "max_over_capacity": 0.05},
    )
    argv = ["--database-url", database_url, "forecast", SERIES, "--models", FAST, "--workers", "1"]
    assert main(argv) == 0
    assert "band auto recalibrated for 2 series x profile x parameters" in capsys.readouterr().out
    with database.transaction() as session:
        newest = session.scalar(
            select(func.max(ForecastRun.id)).where(
                ForecastRun.kind == "nightly", ForecastRun.metric == "tokens"
            )
        )
        stored = session.scalars(
            select(PlanCalibration.result).where(PlanCalibration.run_id == newest)
        ).all()
    assert sorted(r["max_over_capacity"] for r in stored) == [0.01, 0.05]


def test_the_calibration_sizes_each_hour_exactly_as_the_live_plan() -> None:
    from app.plans.calibration import BandChoice
    from app.plans.params import PlanParams
    from app.plans.past_plans import Sizing, band_decisions
    from app.plans.service import auto_sizing
    from app.plans.sizing import ProfileFigures, plan_from_forecast

    rng = np.random.default_rng(5)
    moments = pd.date_range("2026-03-02T05:00Z", periods=3, freq="h")
    profile = ProfileFigures(name="p", tokens_per_s_per_gpu=900.0, gpus_per_replica=2)
    params = PlanParams(min_gpus=2, max_gpus=40, cold_start_s=600, scale_down_hold_s=3600)
    factors = capacity.PeakFactors(
        by_hour=tuple(float(f) for f in 1 + rng.random(24)),
        source="peak_rps",
        quantile=0.5,
        days=28,
        samples=500,
        note="hand-made",
    )
    sizing = Sizing(profile=profile, params=params, tokens_per_request=310.0, peak_factors=factors)
    values = rng.uniform(2_000, 40_000, (3, 24))  # requests per hour
    # band auto: the point forecast times a calibrated headroom, as the live plan sizes it
    choice = BandChoice(
        band=POINT_BAND,
        met=True,
        max_over_capacity=0.01,
        risk=0.0,
        gpu_hours=1.0,
        window_start=None,
        window_end=None,
        headroom=1.3401,
    )
    decisions = band_decisions(
        {POINT_BAND: values}, moments, POINT_BAND, sizing, headroom=choice.headroom
    )
    for row, moment in enumerate(moments):
        frame = pd.DataFrame(
            {"ds": pd.date_range(moment, periods=24, freq="h"), POINT_BAND: values[row]}
        )
        live_frame, live_params = auto_sizing(choice, frame, params)
        plan, _, _ = plan_from_forecast(
            live_frame,
            history=pd.DataFrame({"requests": [1.0], "total_tokens": [310.0]}),
            uses_tokens=False,
            profile=profile,
            params=live_params,
            series_name="s",
            peak_factors=factors,
        )
        assert decisions[row].gpus.tolist() == plan.frame["gpus"].tolist()
        assert decisions[row].start == moment
        assert decisions[row].at == moment + pd.Timedelta(minutes=5)
    # an explicit band (the replay of explicit bands) keeps its own default safety factor
    explicit = PlanParams(**{**params.as_dict(), "band": "q80"})
    fixed = band_decisions(
        {"q80": values}, moments, "q80", Sizing(profile, explicit, 310.0, factors)
    )
    for row, moment in enumerate(moments):
        frame = pd.DataFrame(
            {"ds": pd.date_range(moment, periods=24, freq="h"), "q80": values[row]}
        )
        plan, _, _ = plan_from_forecast(
            frame,
            history=pd.DataFrame({"requests": [1.0], "total_tokens": [310.0]}),
            uses_tokens=False,
            profile=profile,
            params=explicit,
            series_name="s",
            peak_factors=factors,
        )
        assert fixed[row].gpus.tolist() == plan.frame["gpus"].tolist()
