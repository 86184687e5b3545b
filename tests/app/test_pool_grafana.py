"""Grafana targets of shared pools, on SQLite and PostgreSQL: nodes, cost and shortfall per
hour equal GET /v1/pools/{name}/plan with the same parameters, annotations for a migration and
for a hand-made quota shortfall, and unknown pools or pools without a plan answered as the
series targets answer them."""

from __future__ import annotations

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.db import Database
from app.grafana import TARGETS
from app.grafana.plan_targets import PLAN_BANDS
from tests.app.pool_data import (
    BATCH,
    CHAT,
    CODE,
    EXACT,
    MEMBERS,
    code_tokens_per_request,
    create_pool,
    create_profiles,
    pool_body,
    rest_plan,
    store_members,
)

POOL_TARGETS = ("pool_nodes", "pool_cost", "pool_shortfall", "pool_migrations", "pool_throttled")


@pytest.fixture
def start(client: TestClient, database: Database) -> pd.Timestamp:
    """Pools ``shared`` (no quota) and ``tight`` (one node) over three planned members."""
    create_profiles(client)
    begin = store_members(database)
    create_pool(client, "shared")
    create_pool(client, "tight", quota=1)
    return begin


def query(client: TestClient, start: pd.Timestamp, target: str, **payload: object) -> list:
    body = {
        "range": {
            "from": (start - pd.Timedelta(hours=1)).isoformat(),
            "to": (start + pd.Timedelta(hours=25)).isoformat(),
        },
        "targets": [{"refId": "A", "target": target, "payload": payload}],
    }
    response = client.post("/grafana/query", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def ms(hour: str) -> int:
    return int(pd.Timestamp(hour).value // 10**6)


def values(series: dict) -> list:
    return [value for value, _ in series["datapoints"]]


def test_pool_targets_are_listed_with_the_stored_pools(start: pd.Timestamp, client: TestClient):
    body = client.post("/grafana/metrics", json={}).json()
    assert [m["value"] for m in body] == list(TARGETS)
    editors = {m["value"]: {p["name"]: p for p in m["payloads"]} for m in body}
    for name in POOL_TARGETS:
        assert list(editors[name])[:4] == ["pool", "hours", "band", "utilization_target"]
        assert "series" not in editors[name] and "profile" not in editors[name]
        assert [o["value"] for o in editors[name]["pool"]["options"]] == ["shared", "tight"]
        assert [o["value"] for o in editors[name]["band"]["options"]] == list(PLAN_BANDS)
        assert editors[name]["hours"] == {
            "label": "Plan hours",
            "name": "hours",
            "type": "input",
            "placeholder": "24",
        }
    assert TARGETS["pool_migrations"].annotation and TARGETS["pool_throttled"].annotation
    assert [o["value"] for o in editors["pool_shortfall"]["per"]["options"]] == ["member", "total"]
    options = client.post(
        "/grafana/metric-payload-options",
        json={"metric": "pool_cost", "payload": {}, "name": "pool"},
    ).json()
    assert options == [
        {"label": "shared (3 members)", "value": "shared"},
        {"label": "tight (3 members)", "value": "tight"},
    ]
    variable = client.post("/grafana/variable", json={"payload": {"target": "pools"}}).json()
    assert variable == [{"__text": p, "__value": p} for p in ("shared", "tight")]


def test_pool_nodes_and_cost_equal_the_pool_plan(start: pd.Timestamp, client: TestClient):
    plan = rest_plan(client, "shared", **EXACT)
    payload = {"pool": "shared", **EXACT, "lower_bound": "true", "reserved": "true"}
    nodes, lower, reserved = query(client, start, "pool_nodes", **payload)
    assert [s["target"] for s in (nodes, lower, reserved)] == [
        "shared nodes",
        "shared lower bound nodes",
        "shared reserved nodes",
    ]
    hours = plan["hours"]
    assert [t for _, t in nodes["datapoints"]] == [ms(h["hour"]) for h in hours]
    assert values(nodes) == [h["nodes"] for h in hours]
    assert values(nodes) == [3] * 6 + [2] * 6 + [3] * 6 + [2] * 6  # known in advance
    assert values(lower) == [h["lower_bound"] for h in hours]
    assert values(reserved) == [h["reserved_nodes"] for h in hours]
    [cost] = query(client, start, "pool_cost", pool="shared", **EXACT)
    assert cost["target"] == "shared cost usd/h"
    assert values(cost) == pytest.approx([h["cost_usd"] for h in hours])
    assert sum(values(cost)) == pytest.approx(plan["total_cost_usd"])
    # Without the extra flags, one series; the default parameters (band auto) serve the plan
    # the REST API serves with them.
    [default] = query(client, start, "pool_nodes", pool="shared")
    assert values(default) == [h["nodes"] for h in rest_plan(client, "shared")["hours"]]


def test_pool_shortfall_per_member_and_total(start: pd.Timestamp, client: TestClient) -> None:
    plan = rest_plan(client, "tight", **EXACT)
    series = query(client, start, "pool_shortfall", pool="tight", **EXACT)
    assert [s["target"] for s in series] == [f"tight {m} shortfall gpus" for m, _, _ in MEMBERS]
    for item in series:
        member = item["target"].split(" ")[1]
        expected = [
            next(m["shortfall_gpus"] for m in h["members"] if m["member"] == member)
            for h in plan["hours"]
        ]
        assert values(item) == expected
    by_member = {s["target"].split(" ")[1]: values(s) for s in series}
    assert by_member[CHAT] == [0] * 24  # critical is fully served
    # one node: code waits while chat needs two replicas, fits beside one of them
    assert by_member[CODE] == [8] * 6 + [0] * 6 + [8] * 6 + [0] * 6
    assert by_member[BATCH] == [2] * 24
    [total] = query(client, start, "pool_shortfall", pool="tight", per="total", **EXACT)
    assert total["target"] == "tight shortfall gpus"
    assert values(total) == [h["short_gpus"] for h in plan["hours"]]
    free = query(client, start, "pool_shortfall", pool="shared", per="total", **EXACT)
    assert values(free[0]) == [0] * 24


def annotations(client: TestClient, start: pd.Timestamp, target: str, **payload: object) -> list:
    [table] = query(client, start, target, **payload)
    assert [c["text"] for c in table["columns"]] == ["Time", "TimeEnd", "Title", "Text", "Tags"]
    return [
        dict(zip(["time", "end", "title", "text", "tags"], r, strict=True)) for r in table["rows"]
    ]


def test_migration_annotations_are_the_plans_migrations(start: pd.Timestamp, client: TestClient):
    plan = rest_plan(client, "shared", **EXACT)
    expected = [(h["hour"], text) for h in plan["hours"] for text in h["migrations"]]
    assert plan["migrations"] == len(expected) >= 1
    rows = annotations(client, start, "pool_migrations", pool="shared", **EXACT)
    assert [(r["time"], r["end"], r["text"]) for r in rows] == [
        (ms(hour), ms(hour), text) for hour, text in expected
    ]
    # the load drops at the 7th hour: batch's replica moves next to the others
    hour, text = expected[0]
    assert ms(hour) == ms((start + pd.Timedelta(hours=6)).isoformat())
    assert text == f"move 1 replica of {BATCH} from node 3 to node 1, frees 1 node"
    assert rows[0]["title"] == "shared: migration frees 1 node"
    assert rows[0]["tags"] == "migration,shared"
    assert annotations(client, start, "pool_migrations", pool="tight", **EXACT) == []


def test_throttled_hours_name_the_queued_classes_and_short_members(
    start: pd.Timestamp, client: TestClient
) -> None:
    plan = rest_plan(client, "tight", **EXACT)
    rows = annotations(client, start, "pool_throttled", pool="tight", **EXACT)
    throttled = [h for h in plan["hours"] if h["throttled"]]
    assert len(rows) == plan["throttled_hours"] == len(throttled) == 24  # one node is never enough
    for index, (row, hour) in enumerate(zip(rows, throttled, strict=True)):
        busy = index // 6 % 2 == 0  # chat needs both halves of the node in the busy hours
        queued = ["standard", "batch"] if busy else ["batch"]
        assert hour["queued_classes"] == queued
        assert row["time"] == ms(hour["hour"]) and row["end"] == row["time"] + 3_600_000
        assert row["title"] == f"tight throttled: {', '.join(queued)} queued"
        assert row["tags"] == ",".join(["throttled", "tight", *queued])
        short = [m for m in hour["members"] if m["throttled"]]
        assert {m["member"] for m in short} == ({CODE, BATCH} if busy else {BATCH})
        for member in short:
            assert limits_text(member) in row["text"]
        assert CHAT not in row["text"]
        assert f"{hour['short_gpus']} of {hour['demand_gpus']} GPUs not granted" in row["text"]
        assert f"quota of 1 node; queued: {', '.join(queued)};" in row["text"]
    assert annotations(client, start, "pool_throttled", pool="shared", **EXACT) == []


def limits_text(member: dict) -> str:
    """A short member's part of the throttled hour's text, written out from the REST plan."""
    return (
        f"{member['member']} ({member['priority']}) {member['shortfall_gpus']} GPUs short, "
        f"rate limit {member['rate_limit_tokens_per_s']:,.0f} tokens/s "
        f"({member['rate_limit_rps']:,.4g} req/s at {member['tokens_per_request']:,.0f} tokens "
        "per request)"
    )


def test_a_rate_limit_is_named_where_a_member_is_granted_less(
    start: pd.Timestamp, client: TestClient
) -> None:
    # two nodes: chat and code fit, batch waits in the busy hours and runs in the quiet ones
    body = pool_body("tight", quota=2)
    body.pop("name")
    assert client.put("/v1/pools/tight", json=body).status_code == 200
    plan = rest_plan(client, "tight", **EXACT)
    rows = annotations(client, start, "pool_throttled", pool="tight", **EXACT)
    assert len(rows) == plan["throttled_hours"] == 12
    assert all(r["title"] == "tight throttled: batch queued" for r in rows)
    limits = "rate limit 0 tokens/s (0 req/s at 1,000 tokens per request)"
    assert all(f"{BATCH} (batch) 2 GPUs short, {limits}" in r["text"] for r in rows)
    assert rows[0]["text"] == (
        "tight: 2 of 18 GPUs not granted under the quota of 2 nodes; queued: batch; "
        f"{BATCH} (batch) 2 GPUs short, {limits}"
    )


def test_a_partial_grant_names_its_limits_at_the_hours_tokens_per_request(
    start: pd.Timestamp, client: TestClient
) -> None:
    # one node shared by two standard members: 4 GPUs each in the busy hours
    members = [(CHAT, "h100-tp4", "standard"), (CODE, "h100-tp4", "standard")]
    create_pool(client, "split", quota=1, members=members)
    plan = rest_plan(client, "split", **EXACT)
    rows = annotations(client, start, "pool_throttled", pool="split", **EXACT)
    throttled = [h for h in plan["hours"] if h["throttled"]]
    assert len(rows) == len(throttled) == 12
    for row, hour in zip(rows, throttled, strict=True):
        code = next(m for m in hour["members"] if m["member"] == CODE)
        assert limits_text(code) in row["text"]
        # known in advance: 4 GPUs x 625 tokens/s, at code's tokens per request of the hour
        per_request = code_tokens_per_request(pd.Timestamp(hour["hour"]).hour)
        rps = 2500 / per_request
        assert (
            f"{CODE} (standard) 4 GPUs short, rate limit 2,500 tokens/s "
            f"({rps:,.4g} req/s at {per_request:,.0f} tokens per request)"
        ) in row["text"]


def test_without_a_pool_every_pool_is_served(start: pd.Timestamp, client: TestClient) -> None:
    names = [s["target"] for s in query(client, start, "pool_cost", **EXACT)]
    assert names == ["shared cost usd/h", "tight cost usd/h"]


def test_unknown_pools_bad_payloads_and_pools_without_a_plan(
    start: pd.Timestamp, client: TestClient
) -> None:
    for target in POOL_TARGETS:
        body = {"targets": [{"target": target, "payload": {"pool": "nope"}}]}
        response = client.post("/grafana/query", json=body)
        assert response.status_code == 404, response.text
        assert response.json()["detail"] == "pool 'nope' not found; pools: shared, tight"
    for bad, fragment in (
        ({"hours": "0"}, "payload.hours must be between 1 and 168"),
        ({"band": "q42"}, "payload.band 'q42' is unknown"),
        ({"per": "node"}, "payload.per 'node' is unknown"),
    ):
        body = {"targets": [{"target": "pool_shortfall", "payload": {"pool": "shared", **bad}}]}
        response = client.post("/grafana/query", json=body)
        assert response.status_code == 400 and fragment in response.json()["detail"]
    # a pool none of whose members has a forecast: nothing to chart, as for such a series
    assert client.post("/v1/series", json={"name": "pool/new"}).status_code == 201
    create_pool(client, "empty", members=[("pool/new", "h100-tp2", "standard")])
    assert client.get("/v1/pools/empty/plan").status_code == 409
    assert query(client, start, "pool_nodes", pool="empty") == []
    assert annotations(client, start, "pool_throttled", pool="empty") == []
    # a range before the plan: series without points
    body = {
        "range": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"},
        "targets": [{"target": "pool_nodes", "payload": {"pool": "shared"}}],
    }
    [series] = client.post("/grafana/query", json=body).json()
    assert series == {"target": "shared nodes", "datapoints": []}


def test_a_stale_member_marks_the_pools_names(client: TestClient, database: Database) -> None:
    create_profiles(client)
    begin = store_members(database, start=pd.Timestamp("2026-03-02T00:00Z"))
    create_pool(client, "old")
    [nodes] = query(client, begin, "pool_nodes", pool="old", **EXACT)
    assert nodes["target"] == "old nodes STALE: forecast older than 36 h"
    assert len(nodes["datapoints"]) == 24
    rows = annotations(client, begin, "pool_migrations", pool="old", **EXACT)
    assert rows and all(r["tags"] == "migration,old,stale" for r in rows)
