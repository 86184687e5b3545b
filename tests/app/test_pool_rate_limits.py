"""A pool member's gateway rate limits, on SQLite and PostgreSQL: the grant in tokens/s, and in
requests/s at each hour's own tokens per request — tokens forecast ÷ requests forecast where
both cover the hour, else the 0.9 quantile of the hour of day over the last four weeks — so
that the requests/s limit never lets in more tokens than the grant when requests are longer in
some hours of the day. Read in one query per member, never the whole history."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app import ingest
from app.cli import main as cli_main
from app.db import Database
from app.plans import PlanParams, series_plan
from app.pools.per_request import (
    FORECAST_SOURCE,
    HISTORY_SOURCE,
    member_tokens_per_request,
)
from tests.app.pool_data import (
    CHAT,
    CODE,
    EXACT,
    HIGH,
    PATTERN,
    code_tokens_per_request,
    create_pool,
    create_profiles,
    history,
    rest_plan,
    save_forecast,
    store_members,
)
from tests.support.clock import settled_hour

CARRIED = 1000 * 0.75 / 1.2  # tokens/s one planned GPU carries (h100 profiles of pool_data)
SPLIT = [(CHAT, "h100-tp4", "standard"), (CODE, "h100-tp4", "standard")]


@pytest.fixture
def start(client: TestClient, database: Database) -> pd.Timestamp:
    """Pool ``split``: chat and code (standard) on one node; both want 8 GPUs in the busy
    hours and get 4 each, both fit in the quiet hours."""
    create_profiles(client)
    begin = store_members(database)
    create_pool(client, "split", quota=1, members=SPLIT)
    return begin


def member_rows(plan: dict, name: str) -> list[tuple[pd.Timestamp, dict]]:
    return [
        (pd.Timestamp(hour["hour"]), item)
        for hour in plan["hours"]
        for item in hour["members"]
        if item["member"] == name
    ]


def test_requests_limits_never_admit_more_than_the_grant_in_any_hour(
    start: pd.Timestamp, client: TestClient
) -> None:
    plan = rest_plan(client, "split", **EXACT)
    rows = member_rows(plan, CODE)
    assert sum(item["throttled"] for _, item in rows) == 12
    measured = history(start, HIGH, per_request=code_tokens_per_request)
    day_mean = measured["total_tokens"].sum() / measured["requests"].sum()  # about 1,317
    [code] = [m for m in plan["members"] if m["member"] == CODE]
    assert code["tokens_per_request"] == pytest.approx(day_mean)
    assert code["tokens_per_request_source"] == HISTORY_SOURCE
    over_by_day_mean = 0
    for hour, item in rows:
        actual = code_tokens_per_request(hour.hour)  # what the hour's requests carry
        grant = item["granted_gpus"] * CARRIED
        assert item["rate_limit_tokens_per_s"] == pytest.approx(grant)
        # the requests/s limit admits at most the grant in tokens/s, in every hour
        assert item["rate_limit_rps"] * actual <= grant * (1 + 1e-9)
        assert item["tokens_per_request"] == pytest.approx(actual)
        if item["throttled"]:
            assert item["granted_gpus"] == 4 and item["rate_limit_rps"] > 0
            # one figure for the day would admit more than the grant in the longer hours
            over_by_day_mean += grant / day_mean * actual > grant * 1.1
    # exactly the throttled hours at 1,500 and 1,750 tokens per request: 2 or more of each
    # run of 6 busy hours
    longer = [hour for hour, item in rows if item["throttled"] and hour.hour % 4 >= 2]
    assert over_by_day_mean == len(longer) >= 4


def test_forecasts_of_both_metrics_give_each_hours_figure(
    start: pd.Timestamp, client: TestClient, database: Database
) -> None:
    # a requests forecast over the first 20 plan hours, at 2,000 to 2,950 tokens per request;
    # none at the 6th hour (0 requests forecast): there and after the 20th hour, history
    tokens = np.asarray(PATTERN[CODE]) * 3600
    ratio = 2000.0 + 50.0 * np.arange(20)
    requests = tokens[:20] / ratio
    requests[5] = 0.0
    save_forecast(database, CODE, "requests", start, requests)
    plan = rest_plan(client, "split", **EXACT)
    [code] = [m for m in plan["members"] if m["member"] == CODE]
    assert code["tokens_per_request_source"] == (
        f"{FORECAST_SOURCE} for 19 h, {HISTORY_SOURCE} for the others"
    )
    for index, (hour, item) in enumerate(member_rows(plan, CODE)):
        expected = ratio[index] if index < 20 and index != 5 else code_tokens_per_request(hour.hour)
        assert item["tokens_per_request"] == pytest.approx(expected)
        grant = item["granted_gpus"] * CARRIED
        assert item["rate_limit_tokens_per_s"] == pytest.approx(grant)
        assert item["rate_limit_rps"] == pytest.approx(grant / expected)
    # chat has no requests forecast: its hours come from its history (1,000 tokens each)
    assert all(item["tokens_per_request"] == 1000 for _, item in member_rows(plan, CHAT))


def test_the_history_figure_is_a_high_quantile_of_the_last_four_weeks(
    client: TestClient, database: Database
) -> None:
    create_profiles(client)
    start = settled_hour()
    days = 40
    frame = history(start, 2000.0, days=days)
    # tokens per request that vary from day to day (1,000 to 1,280 by day and hour), and
    # 50,000 in the 12 days before the last 28 (older than the window: never read)
    day, step = np.divmod(np.arange(days * 24), 24)
    per_request = np.where(day < days - 28, 50_000.0, 1000.0 + 10.0 * ((day * 7 + step) % 29))
    hour_of_day = frame["hour"].dt.hour.to_numpy()
    frame["requests"] = frame["total_tokens"] / per_request
    frame["peak_rps"] = frame["requests"] / 3600
    with database.transaction() as session:
        ingest.store(session, frame.assign(series="pool/noisy"), create_series=True)
    save_forecast(database, "pool/noisy", "tokens", start, [2000.0 * 3600] * 24)
    hours = pd.date_range(start, periods=24, freq="h")
    statements: list[str] = []

    def record(conn, cursor, statement, *args) -> None:  # noqa: ANN001 - the event's signature
        statements.append(statement)

    with database.transaction() as session:
        params = PlanParams(band="yhat")
        plan = series_plan(
            session, series_name="pool/noisy", profile_name="h100-tp4", params=params
        )
        series_id = (
            session.connection()
            .exec_driver_sql("SELECT id FROM series WHERE name = 'pool/noisy'")
            .scalar_one()
        )
        event.listen(database.engine, "before_cursor_execute", record)
        try:
            found = member_tokens_per_request(session, series_id=series_id, plan=plan, hours=hours)
        finally:
            event.remove(database.engine, "before_cursor_execute", record)
    assert len(statements) == 1  # one query: forecasts and the recent history together
    recent = slice(-28 * 24, None)
    for moment in hours:
        at_hour = per_request[recent][hour_of_day[recent] == moment.hour]
        assert len(at_hour) == 28
        assert found.by_hour is not None
        assert found.by_hour[moment] == pytest.approx(np.quantile(at_hour, 0.9))
        assert found.by_hour[moment] > np.mean(at_hour)
    window = frame.iloc[recent]
    assert found.figure == pytest.approx(window["total_tokens"].sum() / window["requests"].sum())
    assert found.source == HISTORY_SOURCE


def test_a_member_without_token_history_gets_a_tokens_per_s_limit_only(
    client: TestClient, database: Database, settings, capsys: pytest.CaptureFixture[str]
) -> None:
    create_profiles(client)
    start = store_members(database)
    frame = history(start, HIGH).assign(prompt_tokens=None, completion_tokens=None)
    frame["total_tokens"] = None
    with database.transaction() as session:
        ingest.store(session, frame.assign(series="pool/untokened"), create_series=True)
    save_forecast(database, "pool/untokened", "tokens", start, np.asarray(PATTERN[CODE]) * 3600)
    members = [(CHAT, "h100-tp4", "standard"), ("pool/untokened", "h100-tp4", "standard")]
    create_pool(client, "blind", quota=1, members=members)
    plan = rest_plan(client, "blind", **EXACT)
    [member] = [m for m in plan["members"] if m["member"] == "pool/untokened"]
    assert member["tokens_per_request"] is None and member["tokens_per_request_source"] is None
    rows = member_rows(plan, "pool/untokened")
    assert sum(item["throttled"] for _, item in rows) == 12
    for _, item in rows:
        assert item["rate_limit_rps"] is None and item["tokens_per_request"] is None
        assert item["rate_limit_tokens_per_s"] == pytest.approx(item["granted_gpus"] * CARRIED)
    url = ["--database-url", settings.database_url]
    assert cli_main([*url, "pool", "plan", "blind", *cli_exact()]) == 0
    text = capsys.readouterr().out
    throttled = [(hour, item) for hour, item in rows if item["throttled"]]
    for hour, item in throttled:
        assert limit_line(hour, item, width=len("pool/untokened")) in text


def cli_exact() -> list[str]:
    return ["--band", "yhat", "--cold-start-s", "0", "--scale-down-hold-s", "0"]


def limit_line(hour: pd.Timestamp, item: dict, *, width: int) -> str:
    """The CLI's rate limit line of one throttled member-hour, written out from REST."""
    per_request, rps = item["tokens_per_request"], item["rate_limit_rps"]
    return (
        f"  {hour:%Y-%m-%d %H:%M}  {item['member']:<{width}} {item['granted_gpus']:>7} "
        f"{item['rate_limit_tokens_per_s']:>12,.0f} "
        f"{'-' if per_request is None else format(per_request, ',.0f'):>10} "
        f"{'-' if rps is None else format(rps, ',.2f'):>10}"
    )


def test_cli_lists_every_throttled_hours_limits_as_rest_does(
    start: pd.Timestamp, client: TestClient, settings, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = rest_plan(client, "split", **EXACT)
    url = ["--database-url", settings.database_url]
    assert cli_main([*url, "pool", "plan", "split", *cli_exact()]) == 0
    text = capsys.readouterr().out
    assert (
        "rate limits (throttled hours; enforce tokens/s where the gateway counts tokens):" in text
    )
    throttled = [
        (hour, item)
        for name in (CHAT, CODE)
        for hour, item in member_rows(plan, name)
        if item["throttled"]
    ]
    assert len(throttled) == 24
    lines = text.splitlines()
    for hour, item in throttled:
        line = limit_line(hour, item, width=len(CODE))
        assert line in lines
        # known in advance: 4 GPUs granted, 2,500 tokens/s, at the hour's tokens per request
        per_request = 1000.0 if item["member"] == CHAT else code_tokens_per_request(hour.hour)
        assert line.split()[3:] == [
            "4",
            "2,500",
            f"{per_request:,.0f}",
            f"{2500 / per_request:.2f}",
        ]
    [code] = [line for line in lines if line.startswith(f"  {CODE} (standard")]
    assert code.endswith(
        "throttled 12 h, worst short 4 GPUs, rate limit 2,500 tokens/s; tokens per request: "
        f"{HISTORY_SOURCE}"
    )
