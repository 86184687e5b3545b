"""After a deployment is saved, ``/metrics``, ``desired-replicas``, the capacity plan and the
overview show the same fleet at once — no manual forecast, no plan read first: the deployment
stores its band auto choice, and every reader finds it under the deployment's key (its
profile, at its SLO) — on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app import plans
from app.cli import main
from app.db import Database
from app.db.models import PlanCalibration
from tests.app.test_plan_metrics import samples
from tests.app.test_plan_surfaces import SERIES, _load, history_rows
from tests.capacity.loadtest_fixtures import synthetic_csv, synthetic_rows
from tests.support.clock import settled_hour
from tests.support.fallback import fallback_of

SLO = {"ttft_p95_s": 2.0, "tpot_p95_s": 0.05}


@pytest.fixture
def planned(client: TestClient) -> TestClient:
    """The series forecast up to the current hour; a one-number profile (``l4-small``) and a
    load-test one measured at the series' 800/200 mix (``toy``)."""
    _load(client, history_rows(settled_hour()))
    body = {
        "gpu_type": "TOY-GPU",
        "model": "toy-7b",
        "gpus_per_replica": 2,
        "usd_per_hour_on_demand": 3.0,
        "files": [
            {"name": "toy.csv", "content": synthetic_csv(synthetic_rows(((800, 200), (800, 600))))}
        ],
    }
    response = client.put("/v1/gpu-profiles/toy/loadtest", json=body)
    assert response.status_code == 201, response.text
    return client


def calibrations(database: Database) -> int:
    with database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(PlanCalibration)) or 0)


def surfaces(client: TestClient, database: Database, profile: str) -> dict[str, Any]:
    """What each surface says of the series' fleet now and tomorrow, read in the order that
    used to disagree: the scrape and the overview (never calibrate) before desired-replicas;
    and the plan the stored forecast and choice make (``series_plan``, default parameters).
    (REST capacity answers are kept up to 5 s: a write by another process, the CLI, shows
    there that late.)"""
    found = samples(client)
    labels = (f"profile={profile}", f"series={SERIES}")
    page = client.get("/")
    assert page.status_code == 200
    card = page.text.split(f'data-series="{SERIES}"')[1].split("</section>")[0]
    peak = re.search(r'class="peak">(\d+) GPUs?</span> \(([^)]+)\)', card)
    assert peak is not None, card
    desired = client.get(f"/v1/series/{SERIES}/desired-replicas")
    assert desired.status_code == 200, desired.text
    with database.read_transaction() as session:
        plan = plans.series_plan(session, series_name=SERIES, params=plans.PlanParams()).as_dict()
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    hour = next(h for h in plan["hours"] if h["hour"] == now)
    return {
        "gauge_replicas": found["gpucast_plan_desired_replicas"][labels],
        "gauge_gpus": found["gpucast_plan_gpus"][labels],
        "gauge_headroom": found.get("gpucast_plan_band_headroom", {}).get(labels),
        "overview_peak_gpus": int(peak.group(1)),
        "overview_profile": peak.group(2),
        "overview_pending": "not yet calibrated" in card,
        "desired": desired.json(),
        "plan": plan,
        "plan_hour_gpus": hour["gpus"],
    }


def assert_agree(seen: dict[str, Any], profile: str) -> None:
    desired, plan = seen["desired"], seen["plan"]
    assert desired["profile"] == plan["profile"] == seen["overview_profile"] == profile
    assert seen["gauge_replicas"] == desired["desired_replicas"]
    assert seen["gauge_gpus"] == seen["plan_hour_gpus"]
    assert seen["overview_peak_gpus"] == plan["peak_gpus"]  # the floor's peak
    # what KEDA falls back to, and a stale plan answers: the fleet's expected P99 peak
    assert desired["fallback_replicas"] == fallback_of(plan) >= plan["peak_replicas"]
    assert not seen["overview_pending"]
    headroom = (plan["band_choice"] or {}).get("headroom")
    assert seen["gauge_headroom"] == (pytest.approx(headroom) if headroom is not None else None)


def test_after_deploying_at_an_slo_every_surface_shows_the_same_fleet(
    planned: TestClient, database: Database
) -> None:
    # the series served without an SLO, and read: its choice is stored under that deployment
    response = planned.put(f"/v1/series/{SERIES}/deployment", json={"profile": "l4-small"})
    assert response.status_code == 200, response.text
    assert_agree(surfaces(planned, database, "l4-small"), "l4-small")
    # redeployed at an SLO on the load-test profile: no read calibrates, and all agree
    response = planned.put(f"/v1/series/{SERIES}/deployment", json={"profile": "toy", **SLO})
    assert response.status_code == 200, response.text
    stored = calibrations(database)
    seen = surfaces(planned, database, "toy")
    assert calibrations(database) == stored
    assert seen["plan"]["capacity_basis"] == "slo capacity at each hour's mix"
    assert seen["plan"]["band_choice"]["headroom"] is not None  # band auto calibrated
    assert_agree(seen, "toy")
    capacity = planned.get(f"/v1/series/{SERIES}/capacity").json()
    assert (capacity["profile"], capacity["peak_gpus"]) == ("toy", seen["overview_peak_gpus"])
    # and back to the one-number profile without an SLO
    response = planned.put(f"/v1/series/{SERIES}/deployment", json={"profile": "l4-small"})
    assert response.status_code == 200, response.text
    assert_agree(surfaces(planned, database, "l4-small"), "l4-small")


def test_gpucast_series_deploy_agrees_with_every_surface(
    planned: TestClient, database: Database, database_url: str
) -> None:
    db = ["--database-url", database_url]
    assert main([*db, "series", "deploy", SERIES, "--profile", "l4-small"]) == 0
    assert_agree(surfaces(planned, database, "l4-small"), "l4-small")
    args = ["--profile", "toy", "--ttft-p95-s", "2", "--tpot-p95-s", "0.05"]
    assert main([*db, "series", "deploy", SERIES, *args]) == 0
    stored = calibrations(database)
    seen = surfaces(planned, database, "toy")
    assert calibrations(database) == stored
    assert_agree(seen, "toy")
