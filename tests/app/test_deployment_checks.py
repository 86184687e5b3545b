"""A deployment whose plans cannot be made is refused when it is saved, naming the limit, and
nothing is stored: an SLO on a one-number profile, an SLO the profile misses at the lowest
load at the series' mixes — on REST and the CLI, on SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.db import Database
from tests.app import test_deployments
from tests.app.test_deployments import SERIES, deploy, deployments_stored
from tests.app.test_jobs import daily_load, load

profiles, measured = test_deployments.profiles, test_deployments.measured  # the fixtures

URL = "/v1/series/{}/deployment"
# the toy table's lowest load at 500/100: p95 TTFT 0.077 s, p95 TPOT 0.0102 s
TOO_FAST_TPOT = {"ttft_p95_s": 2.0, "tpot_p95_s": 0.005}
TOO_FAST_TTFT = {"ttft_p95_s": 0.05, "tpot_p95_s": 0.05}


def test_an_slo_on_a_one_number_profile_is_a_422(measured: TestClient, database: Database) -> None:
    deploy(measured, SERIES, "a-l4")
    response = measured.put(
        URL.format(SERIES), json={"profile": "b-h100", "ttft_p95_s": 2.0, "tpot_p95_s": 0.05}
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "profile 'b-h100' cannot apply a latency SLO" in detail
    assert "no load-test table" in detail and "4000 tokens/s per GPU" in detail
    # nothing is written: the deployment before stays
    assert measured.get(URL.format(SERIES)).json()["profile"] == "a-l4"
    assert deployments_stored(database) == 1


@pytest.mark.parametrize(("slo", "limit"), [(TOO_FAST_TPOT, "TPOT"), (TOO_FAST_TTFT, "TTFT")])
def test_an_slo_unreachable_at_the_series_mix_is_a_422_naming_the_limit(
    measured: TestClient, database: Database, slo: dict[str, float], limit: str
) -> None:
    response = measured.put(URL.format(SERIES), json={"profile": "c-toy", **slo})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert f"series '{SERIES}' cannot be served on profile 'c-toy'" in detail
    assert f"p95 {limit} is" in detail and "at the lowest load" in detail
    assert "24 of 24 hours" in detail  # tomorrow's plan hours, each at the 500/100 mix
    assert deployments_stored(database) == 0
    # the same profile at an SLO it meets is served: desired-replicas answers at once
    deploy(measured, SERIES, "c-toy", ttft_p95_s=2.0, tpot_p95_s=0.05)
    answer = measured.get(f"/v1/series/{SERIES}/desired-replicas", params={"band": "hi_80"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["profile"] == "c-toy"


def test_without_a_forecast_the_recent_mix_is_checked(
    measured: TestClient, database: Database
) -> None:
    load(database, "fresh", daily_load(days=3, seed=5))
    response = measured.put(URL.format("fresh"), json={"profile": "c-toy", **TOO_FAST_TPOT})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert "the last 28 days: mix 500 prompt / 100 completion tokens cannot meet" in detail
    assert "hour 0" not in detail and "of 1 hours" not in detail  # no forecast hours to name
    assert "p95 TPOT is 0.0102 s at the lowest load (measured), above the 0.005 s limit" in detail
    deploy(measured, "fresh", "c-toy", ttft_p95_s=2.0, tpot_p95_s=0.05)


def test_a_series_without_hours_is_checked_on_the_measured_mixes(
    measured: TestClient, database: Database
) -> None:
    assert measured.post("/v1/series", json={"name": "empty"}).status_code == 201
    response = measured.put(URL.format("empty"), json={"profile": "c-toy", **TOO_FAST_TPOT})
    assert response.status_code == 422
    assert "no measured mix of its load test meets it" in response.json()["detail"]
    assert deployments_stored(database) == 0
    # both measured mixes have 500-token prompts: p95 TTFT 0.077 s at the lowest load
    refused = measured.put(URL.format("empty"), json={"profile": "c-toy", **TOO_FAST_TTFT})
    assert refused.status_code == 422 and "p95 TTFT is 0.077 s" in refused.json()["detail"]
    deploy(measured, "empty", "c-toy", ttft_p95_s=2.0, tpot_p95_s=0.05)


def test_a_series_storing_no_prompt_completion_mix_cannot_take_an_slo(
    measured: TestClient, database: Database
) -> None:
    frame = daily_load(days=3, seed=7).assign(prompt_tokens=np.nan, completion_tokens=np.nan)
    load(database, "totals", frame)
    response = measured.put(
        URL.format("totals"), json={"profile": "c-toy", "ttft_p95_s": 2.0, "tpot_p95_s": 0.05}
    )
    assert response.status_code == 422
    assert "needs the prompt/completion mix" in response.json()["detail"]
    assert deployments_stored(database) == 0


def test_cli_deploy_refuses_an_slo_it_cannot_serve_in_one_line(
    measured: TestClient,
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = ["--database-url", database_url, "series", "deploy", SERIES]
    slo = ["--ttft-p95-s", "2", "--tpot-p95-s", "0.05"]
    assert main([*db, "--profile", "b-h100", *slo]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "cannot apply a latency SLO" in error
    assert main([*db, "--profile", "c-toy", "--ttft-p95-s", "2", "--tpot-p95-s", "0.005"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "p95 TPOT is 0.0102 s at the lowest load" in error
    assert deployments_stored(database) == 0
    assert main([*db, "--profile", "c-toy", *slo]) == 0
    assert "c-toy at p95 TTFT ≤ 2 s, p95 TPOT ≤ 0.05 s" in capsys.readouterr().out
