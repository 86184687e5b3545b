"""Every plan surface covers the hours asked or says which are missing and why; hours already
past are not sold as the plan ahead; ``stale`` also says when no hour of a plan is ahead."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.db import Database
from app.plans.text import _saving
from tests.app.pool_data import (
    BATCH,
    EXACT,
    create_pool,
    create_profiles,
    rest_plan,
    save_forecast,
    store_members,
)
from tests.app.test_plan_surfaces import SERIES, _load, history_rows
from tests.support.clock import settled_hour
from tests.support.fallback import fallback_of


def test_a_pool_plan_short_of_the_hours_asked_says_which_and_why(
    client: TestClient,
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    start = store_members(database)
    save_forecast(database, BATCH, "tokens", start, np.full(5, 1000.0 * 3600))  # ends early
    create_profiles(client)
    create_pool(client, "short")
    body = rest_plan(client, "short", hours=24, **EXACT)
    assert (body["hours_asked"], len(body["hours"])) == (24, 5)
    assert len(body["missing_hours"]) == 19
    assert pd.Timestamp(body["missing_hours"][0]) == start + pd.Timedelta(hours=5)
    (note,) = [n for n in body["notes"] if "hours asked" in n]
    assert "covers 5 of the 24 hours asked" in note and BATCH in note
    capsys.readouterr()
    argv = ["--database-url", database_url, "pool", "plan", "short", "--band", "yhat"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ONLY 5 OF THE 24 HOURS ASKED" in out and "covers 5 of the 24 hours asked" in out


def test_a_full_pool_plan_has_no_missing_hours(client: TestClient, database: Database) -> None:
    store_members(database)
    create_profiles(client)
    create_pool(client, "full")
    body = rest_plan(client, "full", hours=12, **EXACT)
    assert body["missing_hours"] == []
    assert not [n for n in body["notes"] if "hours asked" in n]


def test_a_plan_mostly_in_the_past_says_so(
    client: TestClient, database_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    now = settled_hour()
    _load(client, history_rows(now - pd.Timedelta(hours=22)))
    plan = client.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"}).json()
    assert plan["hours_ahead"] == 2 and plan["stale"] is False
    (note,) = plan["notes"]
    assert "22 of this plan's 24 hours are past" in note and "--refresh" in note
    capsys.readouterr()
    argv = ["--database-url", database_url, "plan", SERIES, "--profile", "l4-small"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "22 of this plan's 24 hours are past" in out
    assert "-0%" not in out and "$-" not in out


def test_a_plan_with_no_hour_ahead_is_stale_and_answers_its_fallback(client: TestClient) -> None:
    now = settled_hour()
    _load(client, history_rows(now - pd.Timedelta(hours=30)))
    plan = client.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"}).json()
    assert plan["hours_ahead"] == 0 and plan["stale"] is True
    assert "every hour of this plan is past" in plan["notes"][0]
    desired = client.get(
        f"/v1/series/{SERIES}/desired-replicas", params={"profile": "l4-small"}
    ).json()
    assert desired["stale"] is True
    assert desired["desired_replicas"] == fallback_of(plan) >= plan["peak_replicas"]


def test_a_current_plan_has_no_notes(client: TestClient) -> None:
    now = settled_hour()
    _load(client, history_rows(now))
    plan = client.get(f"/v1/series/{SERIES}/capacity", params={"profile": "l4-small"}).json()
    assert (plan["hours_ahead"], plan["notes"], plan["stale"]) == (24, [], False)


@pytest.mark.parametrize(
    ("fraction", "usd", "said"),
    [
        (-0.001, -0.4, "no saving"),
        (0.0, 0.0, "no saving"),
        (0.25, 120.0, "saving 25% ($120)"),
        (-0.1, -50.0, "costs more 10% ($50)"),
    ],
)
def test_the_saving_is_never_minus_zero(fraction: float, usd: float, said: str) -> None:
    cost = SimpleNamespace(saving_vs_static_fraction=fraction, saving_vs_static_usd=usd)
    assert _saving(cost) == said


def test_the_overview_card_says_its_plan_hours_are_mostly_past(client: TestClient) -> None:
    now = settled_hour()
    _load(client, history_rows(now - pd.Timedelta(hours=22)))
    page = client.get("/").text
    assert "22 of this plan&#x27;s 24 hours are past" in page or "22 of this plan's 24" in page


def test_grafana_says_why_a_plan_with_no_hour_ahead_is_stale(client: TestClient) -> None:
    now = settled_hour()
    from app.grafana.plan_targets import PAST_NOTE

    _load(client, history_rows(now - pd.Timedelta(hours=30)))
    body = {
        "range": {"from": (now - pd.Timedelta(days=3)).isoformat(), "to": now.isoformat()},
        "targets": [
            {"target": "gpus", "payload": {"series": SERIES, "profile": "l4-small"}, "refId": "A"}
        ],
    }
    response = client.post("/grafana/query", json=body)
    assert response.status_code == 200, response.text
    names = [frame.get("target", "") for frame in response.json()]
    assert names and all(f"STALE: {PAST_NOTE}" in name for name in names), names
