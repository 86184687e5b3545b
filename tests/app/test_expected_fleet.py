"""The expected fleet on every surface: the plan publishes what the deployment will run (the
load each hour was sized for times the replayed ratios of its band — auto's or an explicit
one's — never below the floor) beside
the floor KEDA polls, and the surfaces agree."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db import Database
from app.db.models import PlanCalibration
from app.plans.calibration import BandChoice
from tests.app.test_plan_metrics import samples
from tests.app.test_plan_surfaces import FAST, SERIES, _load, history_rows
from tests.support.clock import settled_hour

PARAMS = {"profile": "l4-small"}


@pytest.fixture
def planned(client: TestClient) -> TestClient:
    return _load(client, history_rows(settled_hour()))


def _plan(client: TestClient) -> dict:
    response = client.get(f"/v1/series/{SERIES}/capacity", params=PARAMS)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_plan_publishes_the_expected_fleet_beside_its_floor(planned: TestClient) -> None:
    plan = _plan(planned)
    expected = plan["expected_fleet"]
    assert expected["measured"] is True, expected
    # the ratios are band auto's own, stored with its choice, measured on the sized load
    ratios = BandChoice.from_dict(plan["band_choice"]).fleet_ratios
    assert ratios is not None and expected["ratios"] == ratios.as_dict()
    assert ratios.base == "load" and 0 < ratios.p50 <= ratios.p90 <= ratios.p99
    floors = np.array([h["gpus"] for h in plan["hours"]], dtype=float)
    # the load each hour was sized for, in GPUs at 100 % of the profile's tokens/s
    load = np.array([h["sized_tokens_per_s"] / h["per_gpu_tokens_per_s"] for h in plan["hours"]])
    assert (load > 0).all() and len(set(np.round(load, 6))) > 1  # the forecast's shape
    # the expected GPU-hours: every hour's sized load times the pooled ratio, never below
    # the floor
    assert expected["gpu_hours"] == pytest.approx(np.maximum(load * ratios.total, floors).sum())
    assert expected["gpu_hours"] >= plan["gpu_hours"] - 1e-9
    for hour, sized in zip(plan["hours"], load, strict=True):
        p50, p90 = hour["expected_gpus_p50"], hour["expected_gpus_p90"]
        assert hour["gpus"] <= p50 <= p90
        # P90 is the sized load times the P90 ratio, rounded up to whole GPUs (1 per replica)
        assert p90 == max(math.ceil(sized * ratios.p90 - 1e-9), hour["gpus"])
    # the hours follow the forecast, not a flat floor
    assert len({h["expected_gpus_p90"] for h in plan["hours"]}) > 1
    assert expected["peak_gpus_p90"] == max(h["expected_gpus_p90"] for h in plan["hours"])
    assert expected["cost"]["gpu_hours"] == pytest.approx(expected["gpu_hours"])
    assert "floor" in plan["gpus_are"]


@pytest.mark.parametrize("band", ["hi_80", "yhat"])
def test_an_explicit_band_publishes_its_measured_fleet(
    planned: TestClient, database: Database, band: str
) -> None:
    plan = planned.get(f"/v1/series/{SERIES}/capacity", params=PARAMS | {"band": band}).json()
    assert plan["sized_band"] == band and plan["band_choice"] is None  # sized as asked
    expected = plan["expected_fleet"]
    assert expected["measured"] is True, expected
    # the band's own replay (one, at its safety factor 1.2), stored under a key naming it
    with database.read_transaction() as session:
        rows = session.execute(select(PlanCalibration.params_key, PlanCalibration.result)).all()
    (key, stored), *others = [(k, r) for k, r in rows if k.startswith(f"band={band},")]
    assert not others and "safety_factor=None" in key
    assert stored["band"] == band and stored["headroom"] is None
    assert len(stored["candidates"]) == 1 and stored["params"]["band"] == band
    ratios = BandChoice.from_dict(stored).fleet_ratios
    assert ratios is not None and expected["ratios"] == ratios.as_dict()
    assert ratios.base == "load" and 0 < ratios.p50 <= ratios.p90 <= ratios.p99
    assert f"{band} at safety factor 1.2 replayed" in stored["note"]
    load = np.array([h["sized_tokens_per_s"] / h["per_gpu_tokens_per_s"] for h in plan["hours"]])
    floors = np.array([h["gpus"] for h in plan["hours"]], dtype=float)
    assert expected["gpu_hours"] == pytest.approx(np.maximum(load * ratios.total, floors).sum())
    assert expected["gpu_hours"] >= plan["gpu_hours"] - 1e-9
    for hour, sized in zip(plan["hours"], load, strict=True):
        assert hour["gpus"] <= hour["expected_gpus_p50"] <= hour["expected_gpus_p90"]
        assert hour["expected_gpus_p90"] == max(math.ceil(sized * ratios.p90 - 1e-9), hour["gpus"])
    assert expected["peak_gpus_p99"] >= expected["peak_gpus_p90"] >= plan["peak_gpus"]
    # band auto's choice is a row of its own: neither read finds the other's
    auto = _plan(planned)
    assert auto["band_choice"]["band"] == "yhat" and auto["band_choice"]["headroom"] is not None
    assert auto["expected_fleet"]["ratios"] != expected["ratios"] or band == "yhat"
    desired = planned.get(
        f"/v1/series/{SERIES}/desired-replicas", params=PARAMS | {"band": band}
    ).json()
    assert desired["expected_replicas_p90"] is not None
    assert desired["expected_replicas_p90"] >= desired["desired_replicas"]
    # a second read replays nothing: the stored measurement is reused
    with database.read_transaction() as session:
        count = session.scalar(select(func.count()).select_from(PlanCalibration))
    again = planned.get(f"/v1/series/{SERIES}/capacity", params=PARAMS | {"band": band}).json()
    assert again["expected_fleet"] == expected
    with database.read_transaction() as session:
        assert session.scalar(select(func.count()).select_from(PlanCalibration)) == count


def test_the_nightly_run_replays_the_explicit_bands_asked_for(
    planned: TestClient, database: Database
) -> None:
    from app.plans import auto_band

    def keys() -> list[tuple[str, int]]:
        with database.read_transaction() as session:
            rows = session.execute(
                select(PlanCalibration.params_key, PlanCalibration.run_id).order_by(
                    PlanCalibration.id
                )
            ).all()
        return [(key, run) for key, run in rows if key.startswith("band=q90,")]

    params = PARAMS | {"band": "q90"}
    assert planned.get(f"/v1/series/{SERIES}/capacity", params=params).status_code == 200
    [(key, first_run)] = keys()
    # the next night: a new nightly run, which the job replays the band for before any read
    response = planned.post(f"/v1/series/{SERIES}/forecast", params={"models": FAST})
    assert response.status_code == 200, response.text
    assert auto_band.recalibrate(database) >= 1
    stored = keys()
    assert len(stored) == 2 and stored[0] == (key, first_run)
    assert stored[1][0] == key and stored[1][1] != first_run
    assert auto_band.recalibrate(database) == 0  # once per nightly run
    plan = planned.get(f"/v1/series/{SERIES}/capacity", params=params).json()
    assert plan["expected_fleet"]["measured"] is True
    assert keys() == stored  # the read found the night's measurement


def test_explicit_band_reads_share_band_autos_read_bound(
    planned: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.plans import auto_band
    from app.plans.calibration_gate import READ_CALIBRATIONS_PER_NIGHT

    calls: list[str] = []

    def fake(_session: object, *, params: object, **_: object) -> BandChoice:
        calls.append(str(params))
        return BandChoice.uncalibrated(0.01, "fake")

    monkeypatch.setattr(auto_band, "calibrate", fake)
    url = f"/v1/series/{SERIES}/capacity"
    for step in range(READ_CALIBRATIONS_PER_NIGHT):
        target = {"utilization_target": 0.5 + step * 0.01}
        band = "hi_80" if step % 2 else "auto"
        assert planned.get(url, params=PARAMS | target | {"band": band}).status_code == 200
    assert len(calls) == READ_CALIBRATIONS_PER_NIGHT
    refused = planned.get(url, params=PARAMS | {"band": "hi_95", "utilization_target": 0.9})
    assert refused.status_code == 429, refused.text
    assert "parameter sets" in refused.json()["detail"]
    assert len(calls) == READ_CALIBRATIONS_PER_NIGHT  # refused before any replay
    # the default parameters of every band stay free
    for band in ("auto", "hi_95", "q70"):
        assert planned.get(url, params=PARAMS | {"band": band}).status_code == 200
    assert len(calls) == READ_CALIBRATIONS_PER_NIGHT + 3


def test_readers_that_never_calibrate_do_not_replay_an_explicit_band(
    planned: TestClient, database: Database
) -> None:
    # no band auto choice stored: the overview and /metrics plan on the fallback band, and
    # read its fleet only when stored (nor is their unmeasured plan served to a later read)
    assert planned.get("/", params={"profile": "l4-small"}).status_code == 200
    assert "gpucast_plan_gpus" in planned.get("/metrics").text
    with database.read_transaction() as session:
        assert session.scalar(select(func.count()).select_from(PlanCalibration)) == 0
    plan = planned.get(f"/v1/series/{SERIES}/capacity", params=PARAMS | {"band": "hi_80"})
    assert plan.json()["expected_fleet"]["measured"] is True


def test_desired_replicas_metrics_and_the_scaled_object_agree(
    planned: TestClient, database: Database
) -> None:
    plan = _plan(planned)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    at = next(i for i, h in enumerate(plan["hours"]) if datetime.fromisoformat(h["hour"]) == now)
    hour = plan["hours"][at]
    desired = planned.get(f"/v1/series/{SERIES}/desired-replicas", params=PARAMS).json()
    assert desired["expected_replicas_p50"] == hour["expected_gpus_p50"]  # 1 GPU per replica
    assert desired["expected_replicas_p90"] == hour["expected_gpus_p90"]
    found = samples(planned)
    labels = ("profile=l4-small", f"series={SERIES}")
    assert found["gpucast_expected_fleet_gpus_p50"][labels] == hour["expected_gpus_p50"]
    assert found["gpucast_expected_fleet_gpus_p90"][labels] == hour["expected_gpus_p90"]
    assert found["gpucast_plan_gpus"][labels] == hour["gpus"]  # the floor beside it
    text = planned.get(f"/v1/series/{SERIES}/kubernetes", params=PARAMS)
    assert text.status_code == 200, text.text
    spec = yaml.safe_load(text.text)["spec"]
    # never below what the deployment is expected to run at P99 (nor the default 2 x peak)
    assert spec["maxReplicaCount"] >= plan["expected_fleet"]["peak_gpus_p99"]
    assert spec["maxReplicaCount"] >= 2 * plan["peak_replicas"]
    # a fleet that lost sight of its load (a trigger failing) holds what it is expected to run
    # at its busiest, not the floor's peak (under band auto a fraction of the forecast)
    expected_peak = plan["expected_fleet"]["peak_gpus_p99"]  # 1 GPU per replica
    assert expected_peak > plan["peak_replicas"]  # the case that matters: the floor is lower
    assert spec["fallback"]["replicas"] == expected_peak
    assert spec["fallback"]["replicas"] <= spec["maxReplicaCount"]


@pytest.mark.parametrize("band", ["auto", "hi_80"])
def test_the_cli_headline_is_the_expected_fleet(
    planned: TestClient, capsys: pytest.CaptureFixture[str], database_url: str, band: str
) -> None:
    from app.cli import main

    plan = planned.get(f"/v1/series/{SERIES}/capacity", params=PARAMS | {"band": band}).json()
    assert plan["expected_fleet"]["measured"] is True
    args = ["plan", SERIES, "--profile", "l4-small", "--band", band]
    assert main(["--database-url", database_url, *args]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("  EXPECTED FLEET for these 24 h: ")
    assert f"{plan['expected_fleet']['gpu_hours']:,.0f} GPU-hours" in out[1]
    floor = "  FLOOR (the executed schedule KEDA's plan trigger holds)"
    assert any(line.startswith(floor) for line in out)


def test_grafana_shows_the_expected_fleet_when_asked(planned: TestClient) -> None:
    plan = _plan(planned)
    first, last = plan["hours"][0]["hour"], plan["hours"][-1]["hour"]
    payload = {"series": SERIES, "profile": "l4-small"}

    def query(target: str, extra: dict) -> list[dict]:
        body = {
            "range": {"from": first, "to": last},
            "targets": [{"refId": "A", "target": target, "payload": payload | extra}],
        }
        response = planned.post("/grafana/query", json=body)
        assert response.status_code == 200, response.text
        return response.json()

    floor_only = query("gpus", {})
    assert len(floor_only) == 1  # one series unless asked: the floor
    both = query("gpus", {"expected_fleet": "true"})
    by_name = {s["target"]: [v for v, _ in s["datapoints"]] for s in both}
    p90 = next(v for k, v in by_name.items() if "expected_gpus_p90" in k)
    assert p90 == [h["expected_gpus_p90"] for h in plan["hours"]][: len(p90)] and len(p90) > 0
    cost = query("cost", {"expected_fleet": "true"})
    expected_cost = next(s for s in cost if "expected fleet" in s["target"])
    floor_cost = next(s for s in cost if "expected fleet" not in s["target"])
    # the expected fleet runs at or above the floor every hour, so costs at least as much
    assert sum(v for v, _ in expected_cost["datapoints"]) >= sum(
        v for v, _ in floor_cost["datapoints"]
    )


def test_the_overview_card_leads_with_the_expected_fleet(planned: TestClient) -> None:
    plan = _plan(planned)  # calibrates band auto and stores its choice, as the cron does
    expected = plan["expected_fleet"]
    assert expected["measured"] is True
    page = planned.get("/", params={"profile": "l4-small"})
    assert page.status_code == 200, page.text
    card = page.text.split(f'data-series="{SERIES}"', 1)[1].split("</section>", 1)[0]
    fleet = card.split("<dt>expected fleet</dt><dd>", 1)[1].split("</dd>", 1)[0]
    # the page reads the stored choice (never calibrates) and shows the same fleet as the plan
    assert f"{expected['gpu_hours']:,.0f} GPU-hours, ${expected['cost']['total_usd']:,.0f}" in (
        fleet
    )
    assert f"{expected['peak_gpus_p90']} GPUs at P90" in fleet
    # the floor is still shown, under its own name, after the fleet
    assert card.index("<dt>expected fleet</dt>") < card.index("<dt>floor peak</dt>")
    assert f"{plan['peak_gpus']} GPU" in card.split("<dt>floor peak</dt><dd>", 1)[1]


def test_the_overview_card_says_when_the_fleet_is_not_measured(client: TestClient) -> None:
    planned = _load(client, history_rows(settled_hour()))
    # no band auto choice stored yet (nothing calibrated it): the page shows why, not a number
    page = planned.get("/", params={"profile": "l4-small"})
    assert page.status_code == 200, page.text
    fleet = page.text.split("<dt>expected fleet</dt><dd>", 1)[1].split("</dd>", 1)[0]
    assert "GPU-hours" not in fleet and "floor" in fleet


def test_the_nightly_recalibration_measures_every_deployment(
    planned: TestClient, database: Database
) -> None:
    from sqlalchemy import delete, func, select

    from app.db.models import PlanCalibration
    from app.plans import auto_band

    def stored() -> int:
        with database.transaction() as session:
            return int(session.scalar(select(func.count()).select_from(PlanCalibration)) or 0)

    deployed = planned.put(f"/v1/series/{SERIES}/deployment", json={"profile": "l4-small"})
    assert deployed.status_code in (200, 201), deployed.text
    # the choice the deploy stored has aged out (retention), and no read asked for the
    # deployment's plan since: the night measures it all the same
    with database.transaction() as session:
        session.execute(delete(PlanCalibration))
    assert stored() == 0
    assert auto_band.recalibrate(database) == 1
    assert stored() == 1
    assert auto_band.recalibrate(database) == 0  # and only once per forecast run
    # the first read after the night finds the choice (no new calibration) and its fleet
    plan = planned.get(f"/v1/series/{SERIES}/capacity")
    assert plan.status_code == 200, plan.text
    assert plan.json()["expected_fleet"]["measured"] is True
    assert stored() == 1
