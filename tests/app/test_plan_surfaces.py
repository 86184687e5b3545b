"""The executable plan on the service: desired replicas (and the stale fallback), the KEDA
object from the API, the plan parameters, and the plan replay through REST and the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
import yaml
from fastapi.testclient import TestClient

from app import plans
from app.cli import main
from app.db import Database
from tests.support.clock import settled_hour
from tests.support.fallback import fallback_of

SERIES = "prod-eu/chat"
PROFILE = {
    "name": "l4-small",
    "gpu_type": "L4",
    "model": "chat-8b",
    "tokens_per_s_per_gpu": 2000.0,
    "gpus_per_replica": 1,
    "usd_per_hour_on_demand": 1.0,
    "usd_per_hour_reserved": 0.6,
}
FAST = "seasonal_naive,seasonal_ma"
SCHEMA = json.loads(
    (
        Path(__file__).resolve().parents[1]
        / "capacity"
        / "schemas"
        / "keda-scaledobject.schema.json"
    ).read_text()
)


def history_rows(end: pd.Timestamp, days: int = 10, seed: int = 3) -> list[dict[str, object]]:
    """Hourly rows ending at ``end`` (exclusive): a daily shape, noise, and peak_rps 1.3x."""
    rng = np.random.default_rng(seed)
    hours = pd.date_range(end - pd.Timedelta(days=days), end, freq="h", inclusive="left")
    shape = 1 + 0.6 * np.sin(2 * np.pi * (hours.hour.to_numpy() - 8) / 24)
    requests = 7200 * shape * rng.lognormal(0, 0.05, len(hours))
    return [
        {
            "timestamp": h.isoformat(),
            "requests": float(r),
            "prompt_tokens": float(r * 800),
            "completion_tokens": float(r * 200),
            "peak_rps": float(r / 3600 * 1.3),
        }
        for h, r in zip(hours, requests, strict=True)
    ]


def _load(client: TestClient, rows: list[dict[str, object]]) -> TestClient:
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    response = client.post(f"/v1/series/{SERIES}/observations", json=rows)
    assert response.status_code == 200, response.text
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    response = client.post(f"/v1/series/{SERIES}/forecast", params={"models": FAST})
    assert response.status_code == 200, response.text
    return client


@pytest.fixture
def db_args(tmp_path: Path) -> list[str]:
    return ["--database-url", f"sqlite:///{tmp_path / 'cli.db'}"]


@pytest.fixture
def fresh(client: TestClient) -> TestClient:
    """History up to the last full hour, so the plan is current."""
    return _load(client, history_rows(settled_hour()))


@pytest.fixture
def old(client: TestClient) -> TestClient:
    """History that ended three days ago: its plan is stale."""
    return _load(client, history_rows(settled_hour() - pd.Timedelta(days=3)))


def test_the_plan_echoes_every_parameter_and_learns_the_peak_factor(fresh: TestClient) -> None:
    params = {"profile": "l4-small", "max_gpus": 40, "cold_start_s": 600, "scale_down_hold_s": 900}
    plan = fresh.get(f"/v1/series/{SERIES}/capacity", params=params).json()
    assert (plan["max_gpus"], plan["cold_start_s"], plan["scale_down_hold_s"]) == (40, 600, 900)
    assert plan["stale"] is False
    assert plan["peak_factor"]["source"] == "peak_rps"
    assert plan["peak_factor"]["by_hour_utc"] == pytest.approx([1.3] * 24)
    for hour in plan["hours"]:
        assert hour["peak_factor"] == pytest.approx(1.3)
        assert hour["sized_tokens_per_s"] == pytest.approx(hour["load_tokens_per_s"] * 1.3)
        assert hour["gpus"] >= min(hour["raw_gpus"], 40) and hour["gpus"] <= 40
    assert plan["cost"]["compared_with"].startswith("a static fleet of")


def test_the_quota_binds_and_the_plan_says_which_hours_are_short(fresh: TestClient) -> None:
    plan = fresh.get(
        f"/v1/series/{SERIES}/capacity",
        params={"profile": "l4-small", "max_gpus": 2, "band": "hi_95"},
    ).json()
    assert plan["peak_gpus"] == 2
    short = {row["hour"]: row for row in plan["short_hours"]}
    assert short, "a 2-GPU quota is below this load's need"
    for hour in plan["hours"]:
        if hour["raw_gpus"] > 2:
            assert short[hour["hour"]]["short_gpus"] == hour["raw_gpus"] - 2
            assert hour["short_gpus"] == hour["raw_gpus"] - 2


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"min_gpus": 0}, "min_gpus"),
        ({"cold_start_s": 3601}, "cold_start_s"),
        ({"scale_down_hold_s": -1}, "scale_down_hold_s"),
        ({"min_gpus": 5, "max_gpus": 4}, "max_gpus=4 is below min_gpus=5"),
    ],
)
def test_unusable_plan_parameters_are_422(fresh: TestClient, params: dict, message: str) -> None:
    for path in ("capacity", "desired-replicas", "kubernetes"):
        response = fresh.get(
            f"/v1/series/{SERIES}/{path}", params={"profile": "l4-small", **params}
        )
        assert response.status_code == 422, (path, response.text)
        assert message in response.text


def test_desired_replicas_follow_the_executed_schedule_now(fresh: TestClient) -> None:
    response = fresh.get(f"/v1/series/{SERIES}/desired-replicas", params={"profile": "l4-small"})
    assert response.status_code == 200, response.text
    body = response.json()
    plan = fresh.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"}).json()
    assert body["stale"] is False and body["source"] == "plan"
    now = pd.Timestamp(body["at"])
    hours = {pd.Timestamp(h["hour"]): h["replicas"] for h in plan["hours"]}
    this_hour = hours[now.floor("h")]
    next_hour = hours.get(now.floor("h") + pd.Timedelta(hours=1), this_hour)
    # the served value lies between this hour's count and the next hour's (lead and drop
    # announcement), never below both
    assert min(this_hour, next_hour) <= body["desired_replicas"] <= max(this_hour, next_hour)
    assert body["fallback_replicas"] == fallback_of(plan) >= plan["peak_replicas"]


def test_a_stale_plan_answers_the_fallback_never_a_low_number(old: TestClient) -> None:
    body = old.get(f"/v1/series/{SERIES}/desired-replicas", params={"profile": "l4-small"}).json()
    plan = old.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"}).json()
    assert body["stale"] is True and plan["stale"] is True
    # the fleet's expected P99 peak, never the floor's lower one (band auto: a fraction)
    assert body["desired_replicas"] == body["fallback_replicas"] == fallback_of(plan)
    assert body["fallback_replicas"] > plan["peak_replicas"]
    assert body["source"].startswith("fallback")


def test_desired_replicas_over_a_day_on_a_hand_made_plan(
    fresh: TestClient, database: Database
) -> None:
    with database.transaction() as session:
        plan = plans.series_plan(
            session, series_name=SERIES, profile_name="l4-small", params=plans.PlanParams()
        )
    frame = plan.plan.frame
    start = frame["hour"].iloc[0].to_pydatetime()
    for index in range(len(frame) - 1):
        hour_start = start + timedelta(hours=index)
        at_start = plans.desired_replicas(plan, now=hour_start + timedelta(seconds=1))
        assert at_start["scheduled_replicas"] == int(frame["replicas"].iloc[index])
        before_next = plans.desired_replicas(plan, now=hour_start + timedelta(minutes=56))
        # 4 minutes before the next hour a rise has already been ordered (cold start 300 s)
        if frame["replicas"].iloc[index + 1] > frame["replicas"].iloc[index]:
            assert before_next["desired_replicas"] == int(frame["replicas"].iloc[index + 1])
    stale = plans.desired_replicas(plan, now=datetime.now(UTC) + timedelta(hours=40))
    assert stale["stale"] is True
    assert stale["desired_replicas"] == plans.fallback_replicas(plan) >= plan.plan.peak_replicas


def test_the_kubernetes_object_polls_desired_replicas_and_validates(fresh: TestClient) -> None:
    response = fresh.get(
        f"/v1/series/{SERIES}/kubernetes",
        params={
            "profile": "l4-small",
            "namespace": "inference",
            "gpucast_url": "http://gpucast.ops:8000",
            "scale_down_hold_s": 1200,
            "reactive_query": "sum(vllm:num_requests_running)",
            "reactive_target": 16,
            "prometheus_url": "http://prometheus:9090",
        },
    )
    assert response.status_code == 200, response.text
    document = yaml.safe_load(response.text)
    jsonschema.validate(document, SCHEMA)
    spec = document["spec"]
    live, reactive = spec["triggers"]
    assert live["type"] == "metrics-api"
    assert live["metadata"]["url"] == (
        "http://gpucast.ops:8000/v1/series/prod-eu/chat/desired-replicas"
        "?profile=l4-small&scale_down_hold_s=1200"
    )
    assert reactive["metadata"]["threshold"] == "16"
    plan = fresh.get(
        f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small", "scale_down_hold_s": 1200}
    ).json()
    # a fleet whose triggers fail holds its expected P99 peak, never below the floor's peak
    assert spec["fallback"]["replicas"] == fallback_of(plan)
    assert (
        spec["fallback"]["replicas"] > plan["peak_replicas"]
    )  # under band auto: the floor is lower
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 1200
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 0
    assert spec["minReplicaCount"] >= 1
    # the URL the object polls answers
    polled = live["metadata"]["url"].removeprefix("http://gpucast.ops:8000")
    assert fresh.get(polled).json()["desired_replicas"] >= 1


def test_kubernetes_cron_mode_and_half_a_reactive_trigger(fresh: TestClient) -> None:
    # band auto calibrated for the plan alone (what a cron object without a reactive trigger
    # runs): its floor carries the load, so it rises and falls
    alone = {"reactive_backstop": "false"}
    cron = fresh.get(
        f"/v1/series/{SERIES}/kubernetes",
        params={"profile": "l4-small", "mode": "cron", "timezone": "Europe/Berlin", **alone},
    )
    assert cron.status_code == 200, cron.text
    spec = yaml.safe_load(cron.text)["spec"]
    jsonschema.validate(yaml.safe_load(cron.text), SCHEMA)
    assert all(t["type"] == "cron" for t in spec["triggers"])
    assert all(t["metadata"]["start"].endswith("* * *") for t in spec["triggers"])
    # calibrated for a reactive trigger beside the plan, this small service's floor stays on
    # the minimum: a cron object without that trigger would hold nothing, and says how to fix it
    carried = fresh.get(
        f"/v1/series/{SERIES}/kubernetes", params={"profile": "l4-small", "mode": "cron"}
    )
    assert carried.status_code == 422
    assert "needs at least one trigger" in carried.text
    assert "reactive_backstop=false" in carried.text and "reactive_query" in carried.text
    half = fresh.get(
        f"/v1/series/{SERIES}/kubernetes",
        params={"profile": "l4-small", "reactive_query": "sum(x)"},
    )
    assert half.status_code == 422
    assert "reactive_query, reactive_target and prometheus_url together" in half.text
    for name in ("Mars/Base", "posix/Europe/Berlin", "localtime"):
        zone = fresh.get(
            f"/v1/series/{SERIES}/kubernetes", params={"profile": "l4-small", "timezone": name}
        )
        assert zone.status_code == 422 and "unknown time zone" in zone.text, name


BACKTEST_KEYS = {
    "policy",
    "recommended",
    "gpu_hours",
    "cost_usd",
    "time_over_capacity_share",
    "requests_over_capacity_share",
    "time_over_85_share",
    "scale_events",
    "peak_gpus",
}


def test_backtest_over_rest(fresh: TestClient) -> None:
    response = fresh.get(
        f"/v1/series/{SERIES}/capacity/backtest",
        params={"profile": "l4-small", "days": 3, "models": FAST},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert {"series", "profile", "days", "resolution_s", "policies"} <= set(body)
    assert (body["series"], body["profile"], body["days"]) == (SERIES, "l4-small", 3)
    rows = {row["policy"]: row for row in body["policies"]}
    assert set(rows) - {"reactive-at-equal-risk"} == {
        "gpucast",
        "static-peak",
        "reactive-hpa",
        "seasonal-mean",
        "hourly-perfect-foresight",
        "instant-bound",
    }
    assert all(set(row) >= BACKTEST_KEYS for row in rows.values())
    assert [r["policy"] for r in body["policies"] if r["recommended"]] == ["gpucast"]
    assert [r["policy"] for r in body["policies"] if r["bound"]] == ["instant-bound"]
    bound = rows["instant-bound"]
    assert bound["time_over_capacity_share"] == 0
    # a lower bound: no policy at 0 % over capacity spends fewer GPU-hours
    assert all(
        bound["gpu_hours"] <= row["gpu_hours"] + 1e-9
        for row in rows.values()
        if row["time_over_capacity_share"] == 0
    )
    assert body["versus_instant_bound"]["gpu_hours_ratio"] == pytest.approx(
        rows["gpucast"]["gpu_hours"] / bound["gpu_hours"]
    )
    frontier = body["reactive_frontier"]
    assert [p["target_utilization"] for p in frontier] == sorted(
        p["target_utilization"] for p in frontier
    )
    equal = body["versus_reactive_at_equal_risk"]
    reaching = [
        p
        for p in frontier
        if p["time_over_capacity_share"] <= rows["gpucast"]["time_over_capacity_share"]
    ]
    if reaching:  # the HPA's frontier read at gpucast's exact risk
        from tests.app.test_equal_risk import expected_gpu_hours

        want = expected_gpu_hours(frontier, rows["gpucast"]["time_over_capacity_share"])
        assert rows["reactive-at-equal-risk"]["gpu_hours"] == pytest.approx(want)
        between = rows["reactive-at-equal-risk"]["between_targets"]
        assert min(between) <= equal["target_utilization"] <= max(between)
    else:
        assert equal["gpu_hours_ratio"] is None and "reactive-at-equal-risk" not in rows
    assert body["load_source"] == "stored hours with peak_rps"
    assert body["resolution_s"] == 60
    for row in rows.values():
        assert row["gpu_hours"] > 0 and 0 <= row["time_over_capacity_share"] <= 1


def test_backtest_over_rest_serves_the_kept_replay_until_a_newer_hour(
    fresh: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.plans.backtest as backtest_module

    calls: list[int] = []
    real = backtest_module.replay_series

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(backtest_module, "replay_series", counted)
    query = {"profile": "l4-small", "days": 2, "models": FAST}
    first = fresh.get(f"/v1/series/{SERIES}/capacity/backtest", params=query)
    second = fresh.get(f"/v1/series/{SERIES}/capacity/backtest", params=query)
    assert first.status_code == second.status_code == 200, second.text
    assert len(calls) == 1  # the second read is the kept result
    assert second.json()["policies"] == first.json()["policies"]
    other = fresh.get(f"/v1/series/{SERIES}/capacity/backtest", params={**query, "days": 3})
    assert other.status_code == 200 and len(calls) == 2  # another window replays


def test_backtest_needs_history_before_its_first_night(client: TestClient) -> None:
    _load(client, history_rows(settled_hour(), days=3))
    response = client.get(
        f"/v1/series/{SERIES}/capacity/backtest", params={"profile": "l4-small", "models": FAST}
    )
    assert response.status_code == 422
    assert "replay fewer days" in response.json()["detail"]
    unknown = client.get(
        f"/v1/series/{SERIES}/capacity/backtest", params={"profile": "l4-small", "models": "magic"}
    )
    assert unknown.status_code == 422 and "unknown model 'magic'" in unknown.text


def _write_load(path: Path, rows: list[dict[str, object]]) -> Path:
    """The stored history as a 10-minute requests_per_s file (each hour's rate, flat)."""
    lines = ["timestamp,requests_per_s"]
    for row in rows:
        hour = pd.Timestamp(row["timestamp"])
        for minute in range(0, 60, 10):
            stamp = hour + pd.Timedelta(minutes=minute)
            lines.append(f"{stamp.isoformat()},{float(row['requests']) / 3600:.6f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_backtest_cli_with_a_load_file(
    db_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    end = pd.Timestamp("2026-11-20T00:00Z")
    rows = history_rows(end)
    hourly = tmp_path / "hourly.csv"
    pd.DataFrame(rows).to_csv(hourly, index=False)
    assert main([*db_args, "ingest", "hourly", str(hourly), "--series", SERIES]) == 0
    _create_profile(db_args)
    load = _write_load(tmp_path / "load.csv", rows)
    args = [*db_args, "backtest", SERIES, "--profile", "l4-small", "--days", "2", "--models", FAST]
    capsys.readouterr()
    assert main([*args, "--load", str(load), "--cold-start-s", "600", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["load_source"] == "file" and body["resolution_s"] == 60
    assert body["params"]["cold_start_s"] == 600
    assert [row["policy"] for row in body["policies"]][0] == "gpucast"
    assert all(set(row) >= BACKTEST_KEYS for row in body["policies"])
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "gpucast *" in table and "instant-bound (bound)" in table and "static peak" in table
    assert "hourly-perfect-foresight" in table and "the instant bound" in table


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("time,requests_per_s\n2026-11-19T00:00Z,1\n", "needs a 'timestamp' column"),
        ("timestamp,qps\n2026-11-19T00:00Z,1\n2026-11-19T00:01Z,1\n", "exactly one of"),
        (
            "timestamp,requests_per_s,requests_per_s\n2026-11-19T00:00Z,1,9\n"
            "2026-11-19T00:01Z,1,9\n",
            "column 'requests_per_s' appears more than once",
        ),
        (
            "timestamp,requests_per_s\n2026-11-19T00:00Z,1\n2026-11-19T00:01Z,-3\n",
            "row 3: requests_per_s '-3' must be a finite number >= 0",
        ),
        (
            "timestamp,tokens_per_s\n2026-11-19T00:00Z,1\nyesterday,1\n",
            "row 3: timestamp 'yesterday' is not ISO 8601",
        ),
        (
            "timestamp,tokens_per_s\n2026-11-19T00:00Z,1\n2026-11-19T00:01Z,1e300\n",
            "row 3: tokens_per_s '1e300' must be a finite number >= 0 and <= 1e+15",
        ),
        (
            "timestamp,tokens_per_s\n2026-11-18T00:00Z,1\n2026-11-19T00:00Z,1\n",
            "a step of 86400 s; the load replays what the stored hours cannot show",
        ),
        (
            "timestamp,tokens_per_s\n2026-11-19T00:00Z,1\n2026-11-19T00:01Z,1\n"
            "2026-11-19T00:03Z,1\n",
            "one regular step",
        ),
    ],
)
def test_backtest_cli_rejects_a_bad_load_file_in_one_line(
    db_args: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    end = pd.Timestamp("2026-11-20T00:00Z")
    hourly = tmp_path / "hourly.csv"
    pd.DataFrame(history_rows(end)).to_csv(hourly, index=False)
    assert main([*db_args, "ingest", "hourly", str(hourly), "--series", SERIES]) == 0
    _create_profile(db_args)
    load = tmp_path / "bad.csv"
    load.write_text(content)
    capsys.readouterr()
    code = main([*db_args, "backtest", SERIES, "--profile", "l4-small", "--load", str(load)])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def _create_profile(db_args: list[str]) -> None:
    from app.db import open_database
    from app.db.models import GpuProfile

    database = open_database(db_args[1])
    with database.transaction() as session:
        session.add(GpuProfile(**PROFILE))
    database.dispose()
