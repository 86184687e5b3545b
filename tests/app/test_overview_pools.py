"""The overview page's pool cards, on SQLite and PostgreSQL: every figure is the REST pool
plan's (GET /v1/pools/{name}/plan), the page never calibrates band auto, members without a
forecast are listed, a stale pool is marked and user strings are escaped."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db import Database
from app.db.models import PlanCalibration
from app.plans import auto_band
from app.views.chart_data import STALE_NOTE
from tests.app.pool_data import (
    BATCH,
    CHAT,
    CODE,
    code_tokens_per_request,
    create_pool,
    create_profiles,
    pool_body,
    rest_plan,
    store_members,
)

T = TypeVar("T")


@pytest.fixture
def start(client: TestClient, database: Database) -> pd.Timestamp:
    """Pools ``shared`` (no quota) and ``tight`` (one node) over three planned members."""
    create_profiles(client)
    begin = store_members(database)
    create_pool(client, "shared")
    create_pool(client, "tight", quota=1)
    return begin


@pytest.fixture
def calibrations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every band auto calibration (and still runs it)."""
    calls: list[str] = []
    calibrate = auto_band.calibrate

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["series_name"])
        return calibrate(*args, **kwargs)

    monkeypatch.setattr(auto_band, "calibrate", recording)
    return calls


def steady(read: Callable[[], T]) -> tuple[T, pd.Timestamp]:
    """``read()`` and the UTC hour it ran in (read again if the hour turned meanwhile)."""
    for _ in range(3):
        hour = pd.Timestamp.now(tz="UTC").floor("h")
        value = read()
        if pd.Timestamp.now(tz="UTC").floor("h") == hour:
            return value, hour
    raise AssertionError("the hour kept turning")


def pool_card(page: str, name: str) -> tuple[str, dict[str, str], dict[str, list[str]]]:
    """One pool card: its classes, its rows (label → HTML) and its members' table cells."""
    match = re.search(
        rf'<section class="([^"]*)" data-pool="{re.escape(html.escape(name))}">(.*?)</section>',
        page,
        re.S,
    )
    assert match, f"no card for pool {name}"
    body = match.group(2)
    rows = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", body, re.S))
    members = {
        member: re.findall(r"<td>(.*?)</td>", cells)
        for member, cells in re.findall(r'<tr data-member="([^"]*)"[^>]*>(.*?)</tr>', body, re.S)
    }
    return match.group(1), rows, members


def hour_of(plan: dict[str, Any], hour: pd.Timestamp) -> dict[str, Any]:
    return next(h for h in plan["hours"] if pd.Timestamp(h["hour"]) == hour)


def utc(moment: Any) -> str:
    return f"{pd.Timestamp(moment):%Y-%m-%d %H:%M} UTC"


def expected_rows(plan: dict[str, Any], hour: pd.Timestamp) -> dict[str, str]:
    """The card's rows, written out from the REST plan."""
    now, hours = hour_of(plan, hour), plan["hours"]
    nodes, per_node = now["nodes"], plan["gpus_per_node"]
    noun = "node" if nodes == 1 else "nodes"
    wanted = now["demand_nodes"]
    over = f", the plans would need {wanted} without the quota" if wanted > nodes else ""
    reservations = plan["reservations"]
    reserved = reservations["pooled_reserved_nodes"]
    bound = now["lower_bound"]
    return {
        "nodes": (
            f'<span class="peak">{nodes} {noun} now</span> ({now["gpus_used"]} of '
            f"{nodes * per_node} GPUs used{over}); peak {plan['peak_nodes']} over the plan's "
            f"{len(hours)} h from {utc(hours[0]['hour'])}"
        ),
        "lower bound": (
            f"{bound} {'node' if bound == 1 else 'nodes'} now, peak "
            f"{max(h['lower_bound'] for h in hours)} (GPUs used ÷ {per_node} per node, "
            "rounded up)"
        ),
        "fragmentation": (
            f"{now['fragmentation_gpus']} idle GPUs now, at most "
            f"{max(h['fragmentation_gpus'] for h in hours)} in an hour"
        ),
        "reserved vs elastic": (
            f"{reserved} reserved {'node' if reserved == 1 else 'nodes'}; elastic now "
            f"{now['on_demand_nodes']} on demand, {now['spot_nodes']} spot; over the plan "
            f"{sum(h['on_demand_nodes'] for h in hours)} on-demand and "
            f"{sum(h['spot_nodes'] for h in hours)} spot node-hours"
        ),
        "cost": (
            f'<span class="peak">${plan["total_cost_usd"]:,.2f}</span> for the plan\'s '
            f"{len(hours)} h ({plan['node_hours']} node-hours); each member on nodes of its "
            f"own: ${reservations['per_service_cost_usd']:,.2f}"
        ),
    }


def expected_members(plan: dict[str, Any], hour: pd.Timestamp, band: str) -> dict[str, list[str]]:
    out = {}
    for member in hour_of(plan, hour)["members"]:
        name = member["member"]
        limited = member["throttled"]
        tokens, per_request = member["rate_limit_tokens_per_s"], member["tokens_per_request"]
        rps = member["rate_limit_rps"]
        info = next(m for m in plan["members"] if m["member"] == name)
        throttled = sum(
            m["throttled"] for h in plan["hours"] for m in h["members"] if m["member"] == name
        )
        out[name] = [
            name,
            member["priority"],
            info["profile"],
            f"{member['demand_gpus']} GPUs",
            str(member["granted_gpus"]),
            str(member["shortfall_gpus"]),
            f"{tokens:,.0f} tokens/s" if limited else "-",
            f"{per_request:,.0f}" if limited and per_request is not None else "-",
            f"{rps:,.1f} req/s" if limited and rps is not None else "-",
            f"{throttled} h",
            band,
        ]
    return out


def calibrated_choices(database: Database) -> int:
    with database.transaction() as session:
        return session.scalar(select(func.count()).select_from(PlanCalibration)) or 0


def test_pool_card_figures_are_the_rest_plans(
    start: pd.Timestamp, client: TestClient, database: Database, calibrations: list[str]
) -> None:
    page, hour = steady(lambda: client.get("/").text)
    assert calibrations == [] and calibrated_choices(database) == 0  # the page never calibrates
    assert hour == start + pd.Timedelta(hours=2)  # the plan's third hour
    classes, rows, members = pool_card(page, "shared")
    assert classes == "card pool-card"
    # band auto is not calibrated yet: the card sizes every member on hi_80, as REST does
    plan = rest_plan(client, "shared", band="hi_80")
    for label, text in expected_rows(plan, hour).items():
        assert rows[label] == text, label
    assert members == expected_members(plan, hour, "hi_80")
    # known in advance: chat and code at 8 GPUs (TP4), batch at 2 on 8-GPU nodes
    assert rows["nodes"].startswith('<span class="peak">3 nodes now</span> (18 of 24 GPUs used)')
    assert rows["fragmentation"].startswith("6 idle GPUs now")
    assert rows["fleet"] == (
        "8 H100-80G GPUs per node, no quota; per node-hour $20.00 on demand, $12.00 reserved, "
        "$8.00 spot"
    )
    assert rows["throttled"] == "no hour (no quota)"
    migrations = [(h["hour"], text) for h in plan["hours"] for text in h["migrations"]]
    assert migrations and rows["migrations"].startswith(f"{len(migrations)}, each freeing a node")
    for moment, text in migrations:
        assert f"<li>{utc(moment)}: {html.escape(text)}</li>" in rows["migrations"]
    assert "not planned" not in rows and "forecasts" not in rows  # all planned, all fresh
    command = "<code>gpucast pool plan shared</code>"
    assert rows["band"].startswith(f"auto → hi_80 for {CHAT}, {CODE}, {BATCH}: ")
    assert command in rows["band"]
    assert "1 pool" not in page and "· 2 pools ·" in page


def test_throttled_hours_queued_classes_and_rate_limits_are_the_rest_plans(
    start: pd.Timestamp, client: TestClient
) -> None:
    page, hour = steady(lambda: client.get("/").text)
    plan = rest_plan(client, "tight", band="hi_80")
    _, rows, members = pool_card(page, "tight")
    for label, text in expected_rows(plan, hour).items():
        assert rows[label] == text, label
    assert members == expected_members(plan, hour, "hi_80")
    now = hour_of(plan, hour)
    queued = {
        cls: sum(cls in h["queued_classes"] for h in plan["hours"]) for cls in ("standard", "batch")
    }
    assert rows["throttled"] == (
        f'<span class="stale">{plan["throttled_hours"]} of 24 h</span> under the quota of 1 '
        f"node; queued: standard {queued['standard']} h, batch {queued['batch']} h; now: "
        f"{', '.join(now['queued_classes'])} queued ({now['short_gpus']} GPUs short)"
    )
    # one node never holds 10 GPUs: throttled every hour; this hour chat (critical) fills it
    assert plan["throttled_hours"] == 24 and now["queued_classes"] == ["standard", "batch"]
    assert rows["nodes"].startswith(
        '<span class="peak">1 node now</span> (8 of 8 GPUs used, the plans would need 3 '
        "without the quota)"
    )
    assert members[CHAT][3:9] == ["8 GPUs", "8", "0", "-", "-", "-"]
    assert members[BATCH][3:9] == ["2 GPUs", "0", "2", "0 tokens/s", "1,000", "0.0 req/s"]
    assert f'<tr data-member="{CODE}" class="throttled">' in page


def test_a_partial_grant_shows_its_gateway_rate_limit(
    start: pd.Timestamp, client: TestClient
) -> None:
    # two standard members on one node share it: 4 of their 8 GPUs each this hour
    create_pool(
        client,
        "split",
        quota=1,
        members=[(CHAT, "h100-tp4", "standard"), (CODE, "h100-tp4", "standard")],
    )
    page, hour = steady(lambda: client.get("/").text)
    plan = rest_plan(client, "split", band="hi_80")
    _, _, members = pool_card(page, "split")
    assert members == expected_members(plan, hour, "hi_80")
    # 4 GPUs x 1,000 tokens/s x 0.75 / 1.2 carried per GPU / 1,000 tokens per request
    assert members[CHAT][3:9] == ["8 GPUs", "4", "4", "2,500 tokens/s", "1,000", "2.5 req/s"]
    # code's requests are longer in some hours of the day: fewer of them fill its grant
    per_request = code_tokens_per_request(hour.hour)
    assert members[CODE][3:9] == [
        "8 GPUs",
        "4",
        "4",
        "2,500 tokens/s",
        f"{per_request:,.0f}",
        f"{2500 / per_request:,.1f} req/s",
    ]


def test_the_card_never_calibrates_and_follows_the_stored_choices(
    start: pd.Timestamp, client: TestClient, database: Database, calibrations: list[str]
) -> None:
    client.get("/")
    assert calibrations == [] and calibrated_choices(database) == 0
    # a band auto plan read calibrates every member and stores its choice
    default = rest_plan(client, "shared")
    assert sorted(calibrations) == sorted([CHAT, CODE, BATCH])
    stored = calibrated_choices(database)
    assert stored == 3
    page, hour = steady(lambda: client.get("/").text)
    assert len(calibrations) == 3 and calibrated_choices(database) == stored
    _, rows, members = pool_card(page, "shared")
    assert "band" not in rows  # every member sized on its stored choice
    for label, text in expected_rows(default, hour).items():
        assert rows[label] == text, label
    # the hand-made forecasts have no refresh state: band auto's stored choice is hi_80
    assert members == expected_members(default, hour, "hi_80")
    # the other pool's members use the same series and profiles: calibrated too
    assert "band" not in pool_card(page, "tight")[1]


def test_members_without_a_forecast_are_listed_as_not_planned(
    start: pd.Timestamp, client: TestClient
) -> None:
    assert client.post("/v1/series", json={"name": "pool/new"}).status_code == 201
    create_pool(
        client, "mixed", members=[(CHAT, "h100-tp4", "critical"), ("pool/new", "h100-tp2", "batch")]
    )
    create_pool(client, "empty", members=[("pool/new", "h100-tp2", "standard")])
    page = client.get("/").text
    plan = rest_plan(client, "mixed", band="hi_80")
    [unplanned] = plan["unplanned"]
    _, rows, members = pool_card(page, "mixed")
    assert rows["not planned"] == (
        f"<ul><li><b>pool/new</b>: {html.escape(unplanned['reason'])}</li></ul>"
    )
    assert "has no complete forecast yet" in unplanned["reason"]
    assert list(members) == [CHAT]
    # a pool none of whose members can be planned: the card says why, the page still serves
    response = client.get("/v1/pools/empty/plan")
    assert response.status_code == 409
    classes, rows, members = pool_card(page, "empty")
    assert classes == "card pool-card" and members == {}
    assert rows == {
        "members": "pool/new (standard)",
        "plan": f'<span class="note">{html.escape(response.json()["detail"])}</span>',
    }


def test_a_stale_pool_is_marked_like_a_stale_series(client: TestClient, database: Database) -> None:
    create_profiles(client)
    begin = store_members(database, start=pd.Timestamp("2026-03-02T00:00Z"))
    create_pool(client, "old")
    page = client.get("/").text
    classes, rows, members = pool_card(page, "old")
    assert classes == "card pool-card stale-plan"
    plan = rest_plan(client, "old", band="hi_80")
    assert rows["nodes"] == (
        f'<span class="stale">now is outside the plan</span>; peak {plan["peak_nodes"]} over '
        f"the plan's 24 h from {utc(begin)}"
    )
    assert rows["forecasts"] == f'<span class="stale">{STALE_NOTE}: {BATCH}, {CHAT}, {CODE}</span>'
    for name, cells in members.items():
        assert cells[0] == f'{name} <span class="stale">stale</span>'
        assert cells[3:9] == ["-"] * 6


def test_user_strings_on_the_card_are_escaped(client: TestClient, database: Database) -> None:
    gpu_type = '<img src=x onerror="alert(1)"> & H100'
    for name, tp in (("h100-tp4", 4), ("h100-tp2", 2)):
        body = {
            "name": name,
            "gpu_type": gpu_type,
            "model": "llama",
            "tokens_per_s_per_gpu": 1000,
            "gpus_per_replica": tp,
        }
        assert client.post("/v1/gpu-profiles", json=body).status_code == 201
    store_members(database)
    body = pool_body("a+b@eu/shared") | {"gpu_type": gpu_type}
    assert client.post("/v1/pools", json=body).status_code == 201, client.get("/v1/pools").text
    page = client.get("/").text
    assert gpu_type not in page and "<img src=x" not in page
    _, rows, _ = pool_card(page, "a+b@eu/shared")
    assert rows["fleet"].startswith(f"8 {html.escape(gpu_type)} GPUs per node")
    assert "<h2>pool a+b@eu/shared</h2>" in page


def test_without_pools_there_is_no_pool_card(client: TestClient, database: Database) -> None:
    create_profiles(client)
    store_members(database)
    page = client.get("/").text
    assert "pool-card" not in page.split("</style>")[1] and " pools · " not in page
