"""The overview card: a stale plan is marked, and the latest stored replay is one line
(never replayed on page load)."""

from __future__ import annotations

import html
import re
from typing import Any

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app import plans
from app.db import Database
from app.db.models import GpuProfile
from app.jobs import ForecastOptions, run_forecasts
from app.plans import backtest
from app.plans.replay import ReplayOptions
from app.plans.summary import replay_summary
from app.views.chart_data import STALE_NOTE
from tests.app.test_charts import FAST, ODD, SERIES, add_profile, hourly, load

FRESH = "prod-us/fresh"


def card(page: str, name: str) -> str:
    """The HTML of one series' card."""
    match = re.search(
        rf'<section class="([^"]*)" data-series="{re.escape(html.escape(name))}">(.*?)</section>',
        page,
        re.S,
    )
    assert match, f"no card for {name}"
    return f"{match.group(1)}|{match.group(2)}"


def store_replay(database: Database, profile: str = "h100-70b", **params: Any) -> dict[str, Any]:
    return backtest.run_backtest(
        database,
        series_name=SERIES,
        profile_name=profile,
        params=plans.PlanParams(**params),
        options=ReplayOptions(days=2, models=FAST),
    )


@pytest.fixture
def forecasted(database: Database) -> Database:
    """SERIES and ODD with history in November (stale by now), FRESH ending an hour ago."""
    load(database, SERIES, hourly())
    load(database, ODD, hourly(level=9_000.0, seed=1))
    frame = hourly(days=10, seed=2)
    last = pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=1)
    load(database, FRESH, frame.assign(hour=frame["hour"] + (last - frame["hour"].max())))
    add_profile(database)
    assert not run_forecasts(database, ForecastOptions(models=FAST, workers=1)).failed
    return database


@pytest.fixture
def no_replays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fails the test's page loads if anything replays."""
    calls: list[str] = []

    def replay(*args: Any, **kwargs: Any) -> None:
        calls.append("replay")
        raise AssertionError("the overview page must never replay")

    monkeypatch.setattr(backtest, "replay_series", replay)
    return calls


def test_a_stale_plan_is_marked_on_its_card(forecasted: Database, client: TestClient) -> None:
    page = client.get("/").text
    stale, fresh = card(page, SERIES), card(page, FRESH)
    assert stale.startswith("card stale-plan|") and fresh.startswith("card|")
    assert f'<span class="stale">{STALE_NOTE}, trained until 2026-11-14 23:00 UTC</span>' in stale
    assert STALE_NOTE not in fresh and 'class="peak"' in fresh


def test_without_a_stored_replay_the_card_says_how_to_get_one(
    forecasted: Database, client: TestClient, no_replays: list[str]
) -> None:
    page = client.get("/").text
    command = f"gpucast backtest {SERIES} --profile h100-70b"
    assert (
        f'<dt>plan replay</dt><dd><span class="note">none stored yet; run <code>{command}'
        in (card(page, SERIES).split("|", 1)[1])
    )
    assert no_replays == []


def test_the_card_shows_the_latest_stored_replay_of_its_profile(
    forecasted: Database, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = store_replay(forecasted)
    newer = store_replay(forecasted, utilization_target=0.6)  # any parameters: the newest
    with forecasted.transaction() as session:
        session.add(
            GpuProfile(
                name="l40s-70b",
                gpu_type="L40S",
                model="llama-3.1-70b",
                tokens_per_s_per_gpu=500.0,
                gpus_per_replica=4,
            )
        )
    slower = store_replay(forecasted, "l40s-70b")  # another profile: only on its own page
    monkeypatch.setattr(backtest, "replay_series", lambda *a, **k: pytest.fail("replayed"))

    text = card(client.get("/").text, SERIES)
    line = html.escape(replay_summary(newer))
    assert line != html.escape(replay_summary(older))
    assert f"<dt>plan replay</dt><dd>{line} " in text
    # the default band is auto: the line names the margins the replay chose night by night
    chosen = ", ".join(dict.fromkeys(night["label"] for night in newer["gpucast_plans"]))
    assert chosen and all(b.startswith("yhat x ") or b == "hi_80" for b in chosen.split(", "))
    assert f"(replay to 2026-11-15 00:00 UTC, band auto → {chosen})" in text
    assert "GPU-hours" in line and "static peak" in line and "over capacity" in line
    assert "the instant bound" in line  # gpucast against the bound, as a ratio
    assert "none stored yet" in card(client.get("/").text, ODD)  # nothing stored for ODD

    other = card(client.get("/", params={"profile": "l40s-70b"}).text, SERIES)
    assert html.escape(replay_summary(slower)) in other and line not in other


def test_the_replay_line_needs_a_profile(database: Database, client: TestClient) -> None:
    load(database, SERIES, hourly(days=2))
    page = client.get("/").text
    assert "no GPU profile" in page and "plan replay" not in page
