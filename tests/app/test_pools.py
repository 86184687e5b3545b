"""Pools stored and served: REST CRUD and the CLI on SQLite and PostgreSQL, every validation
rule (a 4xx naming the problem, nothing written), API keys on writes, what deleting a series or
a profile does to a pool, and the checks a pool plan relies on."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import pools
from app.api import create_app
from app.cli import main
from app.db import Database, repository
from app.errors import InputError
from app.settings import Settings
from tests.app.test_bad_input import checksum

PROFILES = {
    "h100-tp2": {"gpu_type": "H100-80G", "tokens_per_s_per_gpu": 2400.0, "gpus_per_replica": 2},
    "h100-tp8": {"gpu_type": "H100-80G", "tokens_per_s_per_gpu": 900.0, "gpus_per_replica": 8},
    "a100-tp1": {"gpu_type": "A100-80G", "tokens_per_s_per_gpu": 1500.0, "gpus_per_replica": 1},
}
SERIES = ("prod/chat", "prod/code", "batch:eu/summarize")
POOL = {
    "name": "prod-us/h100",
    "gpu_type": "H100-80G",
    "gpus_per_node": 8,
    "node_prices": {
        "on_demand_usd_per_hour": 98.0,
        "reserved_usd_per_hour": 62.5,
        "spot_usd_per_hour": 39.0,
    },
    "quota_nodes": 12,
    "spot_interruption": 0.08,
    "members": [
        {"series": "prod/chat", "profile": "h100-tp2", "priority": "critical", "spot_ok": False},
        {"series": "prod/code", "profile": "h100-tp8", "priority": "standard", "spot_ok": False},
        {
            "series": "batch:eu/summarize",
            "profile": "h100-tp2",
            "priority": "batch",
            "spot_ok": True,
        },
    ],
}


def _seed(database: Database) -> None:
    with database.transaction() as session:
        for name in SERIES:
            repository.create_series(session, name=name)
        for name, figures in PROFILES.items():
            repository.create_gpu_profile(session, name=name, model="llama-3.1-70b", **figures)


@pytest.fixture
def seeded(client: TestClient, database: Database) -> TestClient:
    _seed(database)
    return client


def _body(**changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(POOL)
    body.update(changes)
    return body


def _member(position: int, **changes: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        body["members"][position].update(changes)

    return change


def _expected_members(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        m
        | {
            "gpus_per_replica": PROFILES[m["profile"]]["gpus_per_replica"],
            "tokens_per_s_per_gpu": PROFILES[m["profile"]]["tokens_per_s_per_gpu"],
        }
        for m in body["members"]
    ]


# -- CRUD -------------------------------------------------------------------------------------


def test_rest_round_trip(seeded: TestClient) -> None:
    created = seeded.post("/v1/pools", json=POOL)
    assert created.status_code == 201, created.text
    shown = created.json()
    assert {k: v for k, v in shown.items() if k not in ("created_at", "updated_at")} == POOL | {
        "members": _expected_members(POOL)
    }
    assert shown["created_at"] == shown["updated_at"]
    assert seeded.get("/v1/pools/prod-us/h100").json() == shown
    assert seeded.get("/v1/pools").json() == [shown]

    # PUT replaces everything, the member list included; the given order is kept.
    replacement = _body(gpu_type=None, quota_nodes=None, gpus_per_node=4)
    del replacement["name"]
    replacement["node_prices"] = {"on_demand_usd_per_hour": 49.0}
    replacement["members"] = [
        {"series": "prod/code", "profile": "a100-tp1", "priority": "batch"},
        {"series": "prod/chat", "profile": "h100-tp2"},
    ]
    replaced = seeded.put("/v1/pools/prod-us/h100", json=replacement)
    assert replaced.status_code == 200, replaced.text
    after = replaced.json()
    assert after["node_prices"] == {
        "on_demand_usd_per_hour": 49.0,
        "reserved_usd_per_hour": None,
        "spot_usd_per_hour": None,
    }
    assert (after["gpu_type"], after["gpus_per_node"], after["quota_nodes"]) == (None, 4, None)
    assert after["spot_interruption"] == 0.08
    assert [(m["series"], m["profile"], m["priority"], m["spot_ok"]) for m in after["members"]] == [
        ("prod/code", "a100-tp1", "batch", False),
        ("prod/chat", "h100-tp2", "standard", False),
    ]
    assert after["created_at"] == shown["created_at"] and after["updated_at"] > shown["updated_at"]
    assert seeded.get("/v1/pools/prod-us/h100").json() == after

    assert seeded.delete("/v1/pools/prod-us/h100").status_code == 204
    assert seeded.get("/v1/pools/prod-us/h100").status_code == 404
    assert seeded.get("/v1/pools").json() == []
    # the series and profiles stay
    assert len(seeded.get("/v1/series").json()) == len(SERIES)
    assert seeded.delete("/v1/gpu-profiles/h100-tp2").status_code == 204


def test_defaults_and_an_empty_pool(seeded: TestClient) -> None:
    body = {"name": "spare", "node_prices": {"on_demand_usd_per_hour": 10}}
    created = seeded.post("/v1/pools", json=body)
    assert created.status_code == 201, created.text
    shown = created.json()
    assert shown["gpus_per_node"] == 8 and shown["spot_interruption"] == 0.05
    assert shown["gpu_type"] is None and shown["quota_nodes"] is None
    assert shown["members"] == [] and shown["node_prices"]["on_demand_usd_per_hour"] == 10.0


def test_unknown_pools_are_404(seeded: TestClient, database: Database) -> None:
    before = checksum(database)
    replacement = _body()
    del replacement["name"]
    for response in (
        seeded.get("/v1/pools/ghost"),
        seeded.put("/v1/pools/ghost", json=replacement),
        seeded.delete("/v1/pools/ghost"),
        seeded.get("/v1/pools/ghost/plan"),
    ):
        assert response.status_code == 404
        assert response.json()["detail"].startswith("pool 'ghost")
    assert checksum(database) == before


def test_an_existing_name_is_409_and_changes_nothing(
    seeded: TestClient, database: Database
) -> None:
    assert seeded.post("/v1/pools", json=POOL).status_code == 201
    before = checksum(database)
    for body in (POOL, _body(members=[]), _body(gpus_per_node=2, gpu_type=None)):
        response = seeded.post("/v1/pools", json=body)
        assert response.status_code == 409
        assert response.json()["detail"].startswith("pool 'prod-us/h100' already exists")
    assert checksum(database) == before


# -- validation -------------------------------------------------------------------------------

# case -> (change to the body, status, a fragment of the detail)
CASES: dict[str, tuple[Callable[[dict[str, Any]], None], int, str]] = {
    "unknown series": (_member(1, series="ghost"), 422, "members[1]: series 'ghost' not found"),
    "unknown series, case differs": (
        _member(0, series="PROD/CHAT"),
        422,
        "series 'PROD/CHAT' not found",
    ),
    "unknown series, a prefix": (_member(2, series="batch"), 422, "series 'batch' not found"),
    "unknown profile": (
        _member(0, profile="h200-tp2"),
        422,
        "members[0] (series 'prod/chat'): GPU profile 'h200-tp2' not found",
    ),
    "unknown profile, case differs": (
        _member(2, profile="H100-TP2"),
        422,
        "GPU profile 'H100-TP2' not found",
    ),
    "replica wider than a node": (
        lambda b: b.update(gpus_per_node=4),
        422,
        "members[1] (series 'prod/code'): GPU profile 'h100-tp8' needs 8 GPUs per replica, "
        "more than the pool's 4 GPUs per node",
    ),
    "replica wider than a one-GPU node": (
        lambda b: b.update(gpus_per_node=1),
        422,
        "GPU profile 'h100-tp2' needs 2 GPUs per replica",
    ),
    "profile of another GPU type": (
        _member(1, profile="a100-tp1"),
        422,
        "members[1] (series 'prod/code'): GPU profile 'a100-tp1' is for 'A100-80G' GPUs; "
        "the pool's nodes are 'H100-80G'",
    ),
    "pool of another GPU type": (
        lambda b: b.update(gpu_type="H100"),
        422,
        "is for 'H100-80G' GPUs; the pool's nodes are 'H100'",
    ),
    "series twice": (
        _member(2, series="prod/chat"),
        422,
        "members[2]: series 'prod/chat' is listed twice (also members[0])",
    ),
    "series twice, other profile": (
        lambda b: b["members"].append({"series": "prod/code", "profile": "h100-tp2"}),
        422,
        "members[3]: series 'prod/code' is listed twice (also members[1])",
    ),
    "priority unknown": (_member(0, priority="urgent"), 422, "'critical', 'standard' or 'batch'"),
    "priority upper case": (_member(1, priority="CRITICAL"), 422, "'critical', 'standard'"),
    "priority empty": (_member(2, priority=""), 422, "'critical', 'standard' or 'batch'"),
    "priority a number": (_member(2, priority=1), 422, "'critical', 'standard' or 'batch'"),
    "spot_ok a string": (_member(0, spot_ok="yes"), 422, "valid boolean"),
    "member field unknown": (_member(0, weight=2), 422, "Extra inputs"),
    "gpus_per_node 0": (lambda b: b.update(gpus_per_node=0), 422, "greater than or equal to 1"),
    "gpus_per_node 65": (lambda b: b.update(gpus_per_node=65), 422, "less than or equal to 64"),
    "gpus_per_node true": (lambda b: b.update(gpus_per_node=True), 422, "not a boolean"),
    "gpus_per_node 2.5": (lambda b: b.update(gpus_per_node=2.5), 422, "fractional part"),
    "on-demand price missing": (lambda b: b.update(node_prices={}), 422, "Field required"),
    "on-demand price 0": (
        lambda b: b["node_prices"].update(on_demand_usd_per_hour=0),
        422,
        "greater than 0",
    ),
    "on-demand price a string": (
        lambda b: b["node_prices"].update(on_demand_usd_per_hour="98"),
        422,
        "valid number",
    ),
    "reserved price 0": (
        lambda b: b["node_prices"].update(reserved_usd_per_hour=0),
        422,
        "greater than 0",
    ),
    "spot price negative": (
        lambda b: b["node_prices"].update(spot_usd_per_hour=-1.0),
        422,
        "greater than 0",
    ),
    "quota 0": (lambda b: b.update(quota_nodes=0), 422, "greater than or equal to 1"),
    "spot interruption 1": (lambda b: b.update(spot_interruption=1.0), 422, "less than 1"),
    "spot interruption negative": (
        lambda b: b.update(spot_interruption=-0.01),
        422,
        "greater than or equal to 0",
    ),
    "field unknown": (lambda b: b.update(region="us-east"), 422, "Extra inputs"),
    "name with an empty segment": (lambda b: b.update(name="prod//h100"), 422, "invalid pool name"),
    "name with a '..' segment": (lambda b: b.update(name="prod/../h100"), 422, "'..' segments"),
    "name ending in /plan": (lambda b: b.update(name="prod/plan"), 422, "'plan' is reserved"),
    "name with a space": (lambda b: b.update(name="prod h100"), 422, "invalid pool name"),
    "name too long": (lambda b: b.update(name="p" * 201), 422, "at most 200 characters"),
    "name with a NUL": (lambda b: b.update(name="prod\x00"), 422, "control character U+0000"),
    "series with a line feed": (
        _member(0, series="prod/chat\n"),
        422,
        "control character U+000A",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_pools_are_4xx_and_write_nothing(
    seeded: TestClient, database: Database, case: str
) -> None:
    change, status, fragment = CASES[case]
    assert seeded.post("/v1/pools", json=_body(name="existing")).status_code == 201
    before = checksum(database)
    body = _body()
    change(body)
    response = seeded.post("/v1/pools", json=body)
    assert response.status_code == status, response.text
    assert fragment in str(response.json()["detail"]), response.json()
    if not case.startswith("name"):  # the same rules on PUT, which leaves the pool as it was
        del body["name"]
        replaced = seeded.put("/v1/pools/existing", json=body)
        assert replaced.status_code == status, replaced.text
        assert fragment in str(replaced.json()["detail"])
    assert checksum(database) == before


def test_put_takes_no_name(seeded: TestClient) -> None:
    assert seeded.post("/v1/pools", json=POOL).status_code == 201
    response = seeded.put("/v1/pools/prod-us/h100", json=POOL)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "name"]


def test_writes_need_a_key_when_configured(settings: Settings, database: Database) -> None:
    _seed(database)
    keyed = settings.model_copy(update={"api_keys": "k-pools"})
    replacement = _body()
    del replacement["name"]
    with TestClient(create_app(keyed)) as client:
        key = {"X-API-Key": "k-pools"}
        for call in (
            lambda headers: client.post("/v1/pools", json=POOL, headers=headers),
            lambda headers: client.put("/v1/pools/prod-us/h100", json=replacement, headers=headers),
            lambda headers: client.delete("/v1/pools/prod-us/h100", headers=headers),
        ):
            before = checksum(database)
            for headers in ({}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer wrong"}):
                assert call(headers).status_code == 401
            assert checksum(database) == before
            assert call(key).status_code in (200, 201, 204)
            if client.get("/v1/pools").json():  # reads need no key by default
                assert client.get("/v1/pools/prod-us/h100").status_code == 200


# -- what other deletes do to a pool ----------------------------------------------------------


def test_deleting_a_series_removes_it_from_its_pools(seeded: TestClient) -> None:
    assert seeded.post("/v1/pools", json=POOL).status_code == 201
    assert seeded.delete("/v1/series/prod/code").status_code == 204
    members = seeded.get("/v1/pools/prod-us/h100").json()["members"]
    assert [m["series"] for m in members] == ["prod/chat", "batch:eu/summarize"]


def test_a_profile_in_use_cannot_be_deleted(seeded: TestClient, database: Database) -> None:
    assert seeded.post("/v1/pools", json=POOL).status_code == 201
    assert seeded.post("/v1/pools", json=_body(name="second")).status_code == 201
    before = checksum(database)
    response = seeded.delete("/v1/gpu-profiles/h100-tp2")
    assert response.status_code == 409
    assert response.json()["detail"] == (
        "GPU profile 'h100-tp2' is used by pool(s) 'prod-us/h100', 'second'; "
        "remove it from their members first"
    )
    assert checksum(database) == before
    assert seeded.delete("/v1/gpu-profiles/a100-tp1").status_code == 204  # not in a pool
    assert seeded.delete("/v1/pools/prod-us/h100").status_code == 204
    assert seeded.delete("/v1/pools/second").status_code == 204
    assert seeded.delete("/v1/gpu-profiles/h100-tp2").status_code == 204


# -- loading a pool for a plan ----------------------------------------------------------------


def test_load_pool_gives_members_with_profile_figures(
    seeded: TestClient, database: Database
) -> None:
    assert seeded.post("/v1/pools", json=POOL).status_code == 201
    with database.transaction() as session:
        pool = pools.load_pool(session, name="prod-us/h100")
    assert pool.gpus_per_node == 8 and pool.quota_nodes == 12
    assert pool.node_prices().reserved_usd_per_hour == 62.5
    chat, code, batch = pool.members
    assert (chat.series, chat.priority, chat.gpus_per_replica) == ("prod/chat", "critical", 2)
    assert (code.profile, code.tokens_per_s_per_gpu) == ("h100-tp8", 900.0)
    assert batch.spot_ok and batch.gpu_type == "H100-80G"
    with database.transaction() as session:
        assert [p.name for p in pools.list_pools(session)] == ["prod-us/h100"]


def test_a_profile_changed_after_joining_is_reported_by_load_pool(
    seeded: TestClient, database: Database
) -> None:
    assert seeded.post("/v1/pools", json=_body(gpus_per_node=8)).status_code == 201
    widened = PROFILES["h100-tp8"] | {"model": "llama-3.1-405b", "gpus_per_replica": 16}
    assert seeded.put("/v1/gpu-profiles/h100-tp8", json=widened).status_code == 200
    assert seeded.get("/v1/pools/prod-us/h100").status_code == 200  # still shown as stored
    with database.transaction() as session, pytest.raises(InputError) as raised:
        pools.load_pool(session, name="prod-us/h100")
    assert str(raised.value).startswith(
        "pool 'prod-us/h100', member 'prod/code': GPU profile 'h100-tp8' needs 16 GPUs"
    )


# -- CLI --------------------------------------------------------------------------------------


def _cli(database_url: str, *args: str) -> int:
    return main(["--database-url", database_url, "pool", *args])


MEMBER_FLAGS = [
    "--member",
    "prod/chat:h100-tp2:critical",
    "--member",
    "prod/code:h100-tp8",
    "--member",
    "batch:eu/summarize:h100-tp2:batch:spot",
]
POOL_FLAGS = [
    "--node-price",
    "98",
    "--reserved-price",
    "62.5",
    "--spot-price",
    "39",
    "--gpus-per-node",
    "8",
    "--quota",
    "12",
    "--gpu-type",
    "H100-80G",
    "--spot-interruption",
    "0.08",
    *MEMBER_FLAGS,
]


def test_cli_round_trip(
    database: Database, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(database)
    assert _cli(database_url, "list") == 0
    assert "no pools yet" in capsys.readouterr().out
    assert _cli(database_url, "create", "prod-us/h100", *POOL_FLAGS) == 0
    assert "pool prod-us/h100 created with 3 members" in capsys.readouterr().out
    assert _cli(database_url, "show", "prod-us/h100", "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in shown.items() if k not in ("created_at", "updated_at")} == POOL | {
        "members": _expected_members(POOL)
    }
    assert _cli(database_url, "show", "prod-us/h100") == 0
    text = capsys.readouterr().out
    assert "on-demand 98.00, reserved 62.50, spot 39.00" in text
    assert "batch:eu/summarize  h100-tp2  batch     yes   2" in text
    assert _cli(database_url, "list") == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[1].split() == ["prod-us/h100", "H100-80G", "8", "98.00", "12", "3"]

    assert _cli(database_url, "update", "prod-us/h100", "--node-price", "50") == 0
    assert "replaced; it has 0 members" in capsys.readouterr().out
    with database.transaction() as session:
        pool = pools.get_pool(session, name="prod-us/h100")
    assert (pool.on_demand_usd_per_hour, pool.gpu_type, pool.members) == (50.0, None, ())

    assert _cli(database_url, "delete", "prod-us/h100") == 0
    assert "deleted" in capsys.readouterr().out
    assert _cli(database_url, "show", "prod-us/h100") == 2
    assert capsys.readouterr().err == "gpucast: error: pool 'prod-us/h100' not found\n"


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_cli_create_from_a_file(
    database: Database,
    database_url: str,
    tmp_path: Path,
    suffix: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import yaml

    _seed(database)
    path = tmp_path / f"pool{suffix}"
    path.write_text(json.dumps(POOL) if suffix == ".json" else yaml.safe_dump(POOL))
    assert _cli(database_url, "create", "prod-us/h100", "--file", str(path)) == 0
    capsys.readouterr()
    with database.transaction() as session:
        shown = pools.as_dict(pools.get_pool(session, name="prod-us/h100"))
    assert shown["members"] == _expected_members(POOL)
    assert shown["node_prices"] == POOL["node_prices"]
    # update from the same file (the name in it matches)
    assert _cli(database_url, "update", "prod-us/h100", "--file", str(path)) == 0


# case -> (arguments after 'pool', start of the one error line)
CLI_CASES: dict[str, tuple[list[str], str]] = {
    "no price": (["create", "p", *MEMBER_FLAGS], "give --node-price USD"),
    "price not a number": (["create", "p", "--node-price", "cheap"], "--node-price must be a"),
    "price 0": (["create", "p", "--node-price", "0"], "--node-price: Input should be greater"),
    "price nan": (["create", "p", "--node-price", "nan"], "--node-price: Input should be a finite"),
    "gpus per node 2.5": (
        ["create", "p", "--node-price", "9", "--gpus-per-node", "2.5"],
        "--gpus-per-node must be a whole number",
    ),
    "gpus per node 65": (
        ["create", "p", "--node-price", "9", "--gpus-per-node", "65"],
        "--gpus-per-node: Input should be less than or equal to 64",
    ),
    "quota 0": (["create", "p", "--node-price", "9", "--quota", "0"], "--quota: Input should"),
    "spot interruption 1": (
        ["create", "p", "--node-price", "9", "--spot-interruption", "1"],
        "--spot-interruption: Input should be less than 1",
    ),
    "member without profile": (
        ["create", "p", "--node-price", "9", "--member", "prod/chat"],
        "--member 'prod/chat': use SERIES:PROFILE[:PRIORITY[:spot]]",
    ),
    "member empty field": (
        ["create", "p", "--node-price", "9", "--member", "prod/chat::batch"],
        "--member 'prod/chat::batch': use",
    ),
    "member bad priority": (
        ["create", "p", "--node-price", "9", "--member", "prod/chat:h100-tp2:urgent"],
        "--member 'prod/chat:h100-tp2:urgent' (priority): Input should be 'critical'",
    ),
    "member unknown series": (
        ["create", "p", "--node-price", "9", "--member", "ghost:h100-tp2"],
        "members[0]: series 'ghost' not found",
    ),
    "member unknown profile": (
        ["create", "p", "--node-price", "9", "--member", "prod/chat:nope"],
        "members[0] (series 'prod/chat'): GPU profile 'nope' not found",
    ),
    "member too wide": (
        [
            "create",
            "p",
            "--node-price",
            "9",
            "--gpus-per-node",
            "4",
            "--member",
            "prod/code:h100-tp8",
        ],
        "members[0] (series 'prod/code'): GPU profile 'h100-tp8' needs 8 GPUs per replica",
    ),
    "member other gpu type": (
        [
            "create",
            "p",
            "--node-price",
            "9",
            "--gpu-type",
            "H100-80G",
            "--member",
            "prod/chat:a100-tp1",
        ],
        "members[0] (series 'prod/chat'): GPU profile 'a100-tp1' is for 'A100-80G'",
    ),
    "member twice": (
        [
            "create",
            "p",
            "--node-price",
            "9",
            "--member",
            "prod/chat:h100-tp2",
            "--member",
            "prod/chat:a100-tp1",
        ],
        "members[1]: series 'prod/chat' is listed twice",
    ),
    "existing name": (
        ["create", "existing", "--node-price", "9"],
        "pool 'existing' already exists",
    ),
    "reserved name": (
        ["create", "prod/plan", "--node-price", "9"],
        "invalid pool name 'prod/plan'",
    ),
    "bad name": (["create", "/x", "--node-price", "9"], "invalid pool name '/x'"),
    "file and flags": (
        ["create", "p", "--file", "x.json", "--node-price", "9"],
        "--file describes",
    ),
    "file missing": (["create", "p", "--file", "missing.json"], "file not found: missing.json"),
    "update unknown": (["update", "ghost", "--node-price", "9"], "pool 'ghost' not found"),
    "update bad member": (
        ["update", "existing", "--node-price", "9", "--member", "prod/chat:nope"],
        "members[0] (series 'prod/chat'): GPU profile 'nope' not found",
    ),
    "delete unknown": (["delete", "ghost"], "pool 'ghost' not found"),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_cli_bad_input_exits_2_with_one_line_and_writes_nothing(
    database: Database, database_url: str, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(database)
    assert _cli(database_url, "create", "existing", "--node-price", "9") == 0
    capsys.readouterr()
    arguments, start = CLI_CASES[case]
    before = checksum(database)
    assert _cli(database_url, *arguments) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpucast: error: {start}"), err
    assert err.count("\n") == 1
    assert checksum(database) == before


FILE_CASES = {
    "not JSON": (".json", '{"node_prices": ', "not valid JSON"),
    "not YAML": (".yaml", "members: [1, 2", "not valid YAML"),
    "a date that is none": (".yaml", "created: 2026-13-01\n", "not readable YAML (month must be"),
    "5,000 digits": (".yaml", "node_prices: {h100: " + "9" * 5000 + "}\n", "(Exceeds the limit"),
    "not an object": (
        ".yaml",
        "- 1\n- 2\n",
        "expected an object with the pool's fields, not a list",
    ),
    "empty": (".yaml", "", "expected an object with the pool's fields, not nothing"),
    "another name": (".json", json.dumps(_body(name="other")), "describes pool 'other', not 'p'"),
    "unknown field": (".json", json.dumps(_body(name="p", zone="a")), ": zone: Extra inputs"),
    "bad priority": (
        ".yaml",
        "node_prices: {on_demand_usd_per_hour: 9}\nmembers: [{series: prod/chat, "
        "profile: h100-tp2, priority: urgent}]\n",
        ": members[0].priority: Input should be 'critical'",
    ),
    "price a string": (
        ".yaml",
        "node_prices: {on_demand_usd_per_hour: '9'}\n",
        ": node_prices.on_demand_usd_per_hour: Input should be a valid number",
    ),
    "NUL in a series": (
        ".json",
        json.dumps(_body(name="p", members=[{"series": "prod\x00", "profile": "h100-tp2"}])),
        ": members[0].series: Value error, a name must not contain control characters",
    ),
    "unknown series": (
        ".yaml",
        "node_prices: {on_demand_usd_per_hour: 9}\nmembers: [{series: ghost, profile: x}]\n",
        "members[0]: series 'ghost' not found",
    ),
    "too deep": (".json", "[" * 40 + "]" * 40, "nests 40 levels deep"),
    "not UTF-8": (".yaml", b"name: \xff\n", "is not UTF-8 text"),
}


@pytest.mark.parametrize("case", sorted(FILE_CASES))
def test_cli_bad_files_exit_2_and_write_nothing(
    database: Database,
    database_url: str,
    tmp_path: Path,
    case: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _seed(database)
    suffix, content, fragment = FILE_CASES[case]
    path = tmp_path / f"pool{suffix}"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    before = checksum(database)
    assert _cli(database_url, "create", "p", "--file", str(path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpucast: error: ") and err.count("\n") == 1
    assert fragment in err, err
    assert checksum(database) == before
