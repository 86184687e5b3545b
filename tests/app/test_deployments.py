"""A series' deployment: stored, replaced, cleared, kept consistent with series and profiles
(no orphans, a deployed profile is a 409), and used by every plan surface that is not told a
profile — on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.cli import main
from app.db import Database
from app.db.models import SeriesDeployment
from app.grafana.plan_targets import STALE_SUFFIX
from app.jobs import ForecastOptions, run_forecasts
from tests.app.test_grafana import query_body
from tests.app.test_jobs import daily_load, load
from tests.capacity.loadtest_fixtures import synthetic_csv

SERIES = "prod-us/llama-3.1-70b"
OTHER = "prod-eu/mistral-7b"
SMALL = {
    "name": "a-l4",
    "gpu_type": "L4",
    "model": "mistral-7b",
    "tokens_per_s_per_gpu": 1000.0,
    "gpus_per_replica": 1,
    "usd_per_hour_on_demand": 0.8,
}
LARGE = {
    "name": "b-h100",
    "gpu_type": "H100-80G",
    "model": "llama-3.1-70b",
    "tokens_per_s_per_gpu": 4000.0,
    "gpus_per_replica": 2,
    "usd_per_hour_on_demand": 4.0,
}
FAST = ForecastOptions(models=("seasonal_naive", "seasonal_ma"), workers=1)


@pytest.fixture
def profiles(client: TestClient, database: Database) -> TestClient:
    """Two forecasted series and two profiles; no deployment yet."""
    load(database, SERIES, daily_load())
    load(database, OTHER, daily_load(seed=3, level=600.0))
    assert not run_forecasts(database, FAST).failed
    for body in (SMALL, LARGE):
        assert client.post("/v1/gpu-profiles", json=body).status_code == 201
    return client


@pytest.fixture
def measured(profiles: TestClient) -> TestClient:
    """Besides: ``c-toy``, a profile measured by a (synthetic) load test, which can apply an
    SLO (its lowest load: p95 TTFT 0.077 s, TPOT 0.0102 s at the series' 500/100 mix)."""
    body = {
        "gpu_type": "TOY-GPU",
        "model": "llama-3.1-70b",
        "gpus_per_replica": 2,
        "usd_per_hour_on_demand": 3.0,
        "files": [{"name": "toy.csv", "content": synthetic_csv()}],
    }
    response = profiles.put("/v1/gpu-profiles/c-toy/loadtest", json=body)
    assert response.status_code == 201, response.text
    return profiles


def deploy(client: TestClient, series: str, profile: str, **slo: float) -> dict[str, Any]:
    response = client.put(f"/v1/series/{series}/deployment", json={"profile": profile, **slo})
    assert response.status_code == 200, response.text
    return response.json()


def deployments_stored(database: Database) -> int:
    with database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(SeriesDeployment)) or 0)


# -- storage ----------------------------------------------------------------------------------


def test_deployment_is_set_read_replaced_and_cleared(measured: TestClient) -> None:
    url = f"/v1/series/{SERIES}/deployment"
    missing = measured.get(url)
    assert missing.status_code == 404 and "no deployment" in missing.json()["detail"]
    first = deploy(measured, SERIES, "a-l4")
    assert (first["profile"], first["ttft_p95_s"], first["tpot_p95_s"]) == ("a-l4", None, None)
    second = deploy(measured, SERIES, "c-toy", ttft_p95_s=2.0, tpot_p95_s=0.05)
    assert measured.get(url).json() == second
    assert (second["profile"], second["ttft_p95_s"], second["tpot_p95_s"]) == ("c-toy", 2, 0.05)
    assert second["created_at"] == first["created_at"]
    assert measured.delete(url).status_code == 204
    assert measured.get(url).status_code == 404
    assert measured.delete(url).status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"profile": "nope"}, 404, "GPU profile 'nope' not found"),
        ({"profile": "a-l4", "ttft_p95_s": 2.0}, 422, "tpot_p95_s is missing"),
        ({"profile": "a-l4", "tpot_p95_s": 0.05}, 422, "ttft_p95_s is missing"),
        ({"profile": "a-l4", "ttft_p95_s": "2", "tpot_p95_s": 0.05}, 422, "number"),
        ({"profile": "a-l4", "ttft_p95_s": -1.0, "tpot_p95_s": 0.05}, 422, "greater than 0"),
        ({"profile": "a-l4", "ttft_p95_s": 2.0, "tpot_p95_s": 1e9}, 422, "less than or equal"),
        ({"profile": "a-l4", "ttft_p95_s": True, "tpot_p95_s": 0.05}, 422, "number"),
        ({"profile": "a-l4", "replicas": 3}, 422, "xtra"),
        ({}, 422, "profile"),
    ],
)
def test_bad_deployments_are_4xx_and_store_nothing(
    profiles: TestClient, database: Database, body: dict[str, Any], status: int, says: str
) -> None:
    response = profiles.put(f"/v1/series/{SERIES}/deployment", json=body)
    assert response.status_code == status, response.text
    assert says in str(response.json()["detail"])
    assert deployments_stored(database) == 0


def test_unknown_series_is_404(profiles: TestClient) -> None:
    response = profiles.put("/v1/series/nope/deployment", json={"profile": "a-l4"})
    assert response.status_code == 404 and "series 'nope' not found" in response.json()["detail"]


def test_a_series_named_like_the_route_is_refused(profiles: TestClient) -> None:
    response = profiles.post("/v1/series", json={"name": "prod/deployment"})
    assert response.status_code == 422 and "reserved" in response.json()["detail"]


def test_deleting_a_series_deletes_its_deployment(profiles: TestClient, database: Database) -> None:
    deploy(profiles, SERIES, "b-h100")
    assert profiles.delete(f"/v1/series/{SERIES}").status_code == 204
    assert deployments_stored(database) == 0
    assert profiles.post("/v1/series", json={"name": SERIES}).status_code == 201
    assert profiles.get(f"/v1/series/{SERIES}/deployment").status_code == 404
    assert profiles.delete("/v1/gpu-profiles/b-h100").status_code == 204


def test_a_deployed_profile_cannot_be_deleted(profiles: TestClient, database: Database) -> None:
    deploy(profiles, SERIES, "b-h100")
    deploy(profiles, OTHER, "b-h100")
    response = profiles.delete("/v1/gpu-profiles/b-h100")
    assert response.status_code == 409
    detail = response.json()["detail"]
    assert f"{OTHER!r}" in detail and f"{SERIES!r}" in detail and "deployment" in detail
    assert profiles.get("/v1/gpu-profiles/b-h100").status_code == 200
    assert deployments_stored(database) == 2
    assert profiles.delete(f"/v1/series/{SERIES}/deployment").status_code == 204
    assert profiles.delete(f"/v1/series/{OTHER}/deployment").status_code == 204
    assert profiles.delete("/v1/gpu-profiles/b-h100").status_code == 204


# -- the binding on every surface -------------------------------------------------------------


def capacity(client: TestClient, series: str = SERIES, **params: Any) -> dict[str, Any]:
    response = client.get(f"/v1/series/{series}/capacity", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_capacity_without_a_profile_needs_a_deployment_when_several_exist(
    profiles: TestClient,
) -> None:
    for path in ("capacity", "desired-replicas", "kubernetes", "capacity/backtest"):
        response = profiles.get(f"/v1/series/{SERIES}/{path}")
        assert response.status_code == 422, (path, response.text)
        detail = response.json()["detail"]
        assert "no deployment and 2 GPU profiles exist (a-l4, b-h100)" in detail
        assert "gpucast series deploy" in detail


def test_one_profile_still_needs_a_deployment_on_rest_but_not_in_grafana(
    client: TestClient, database: Database
) -> None:
    load(database, SERIES, daily_load())
    assert not run_forecasts(database, FAST).failed
    assert client.post("/v1/gpu-profiles", json=LARGE).status_code == 201
    response = client.get(f"/v1/series/{SERIES}/capacity")
    assert response.status_code == 422
    assert "no deployment and 1 GPU profile exists (b-h100)" in response.json()["detail"]
    targets = [{"refId": "A", "target": "gpus", "payload": {"series": SERIES}}]
    (series,) = client.post("/grafana/query", json=query_body(*targets)).json()
    assert f"{SERIES} gpus (b-h100" in series["target"]  # the only profile, as before


def test_capacity_desired_replicas_and_kubernetes_use_the_deployment(
    profiles: TestClient,
) -> None:
    deploy(profiles, SERIES, "b-h100")
    plan = capacity(profiles)
    assert (plan["profile"], plan["profile_source"]) == ("b-h100", "deployment")
    assert plan["per_gpu_tokens_per_s"] == 4000 and plan["gpus_per_replica"] == 2
    explicit = capacity(profiles, profile="b-h100")
    assert explicit["hours"] == plan["hours"] and explicit["profile_source"] == "given"
    override = capacity(profiles, profile="a-l4")
    assert override["profile"] == "a-l4" and override["per_gpu_tokens_per_s"] == 1000
    # on the same explicit band (band auto calibrates a margin per profile) the slower
    # profile needs more GPUs
    on_band = capacity(profiles, band="hi_95")
    assert capacity(profiles, profile="a-l4", band="hi_95")["peak_gpus"] > on_band["peak_gpus"]

    desired = profiles.get(f"/v1/series/{SERIES}/desired-replicas").json()
    pinned = profiles.get(f"/v1/series/{SERIES}/desired-replicas", params={"profile": "b-h100"})
    desired.pop("at"), pinned.json().pop("at")
    assert desired == {k: v for k, v in pinned.json().items() if k != "at"}

    followed = yaml.safe_load(profiles.get(f"/v1/series/{SERIES}/kubernetes").text)
    url = _metrics_api_url(followed)
    assert url.endswith("/desired-replicas") and "profile=" not in url  # follows the deployment
    other = profiles.get(f"/v1/series/{SERIES}/kubernetes", params={"profile": "a-l4"})
    assert "profile=a-l4" in _metrics_api_url(yaml.safe_load(other.text))


def _metrics_api_url(document: dict[str, Any]) -> str:
    (trigger,) = [t for t in document["spec"]["triggers"] if t["type"] == "metrics-api"]
    return str(trigger["metadata"]["url"])


def test_a_redeployment_is_seen_at_once(profiles: TestClient) -> None:
    deploy(profiles, SERIES, "b-h100")
    assert capacity(profiles)["profile"] == "b-h100"
    deploy(profiles, SERIES, "a-l4")
    assert capacity(profiles)["profile"] == "a-l4"


def test_the_backtest_replays_the_deployed_profile(profiles: TestClient) -> None:
    deploy(profiles, SERIES, "b-h100")
    params = {"days": 1, "models": "seasonal_naive", "band": "hi_80"}
    response = profiles.get(f"/v1/series/{SERIES}/capacity/backtest", params=params)
    assert response.status_code == 200, response.text
    assert response.json()["profile"] == "b-h100"


def test_grafana_plans_each_series_on_its_own_deployment(profiles: TestClient) -> None:
    deploy(profiles, SERIES, "b-h100")
    deploy(profiles, OTHER, "a-l4")
    targets = [{"refId": "A", "target": "gpus", "payload": {"band": "hi_80"}}]
    window = {"from": "2026-10-01T00:00:00Z", "to": "2026-11-01T00:00:00Z"}
    body = query_body(*targets, range=window)
    response = profiles.post("/grafana/query", json=body)
    assert response.status_code == 200, response.text
    names = sorted(series["target"].removesuffix(STALE_SUFFIX) for series in response.json())
    assert names == [f"{OTHER} gpus (a-l4)", f"{SERIES} gpus (b-h100)"]
    status = {"refId": "B", "target": "plan_status", "payload": {"band": "hi_80"}}
    (table,) = profiles.post("/grafana/query", json=query_body(status)).json()
    profile_at = [c["text"] for c in table["columns"]].index("profile")
    assert sorted(row[profile_at] for row in table["rows"]) == ["a-l4", "b-h100"]


def test_grafana_without_a_deployment_or_profile_is_a_clear_4xx(profiles: TestClient) -> None:
    deploy(profiles, SERIES, "b-h100")
    targets = [{"refId": "A", "target": "gpus", "payload": {"series": OTHER}}]
    response = profiles.post("/grafana/query", json=query_body(*targets))
    assert response.status_code == 400
    assert "payload.profile is required" in response.text and "deploy" in response.text


def test_the_overview_card_plans_on_the_deployment(profiles: TestClient) -> None:
    deploy(profiles, SERIES, "b-h100")
    page = profiles.get("/").text
    card = page[page.index(f'data-series="{SERIES}"') :]
    card = card[: card.index("</section>")]
    assert "GPUs</span> (b-h100)" in card and "profile=b-h100" in card
    other = page[page.index(f'data-series="{OTHER}"') :]
    assert "(a-l4)" in other[: other.index("</section>")]  # no deployment: the first by name
    chart = profiles.get(f"/v1/series/{SERIES}/plot.png")
    assert chart.status_code == 200 and chart.headers["content-type"] == "image/png"


def test_accuracy_scores_capacity_on_the_deployment(profiles: TestClient) -> None:
    url = f"/v1/series/{SERIES}/forecast/accuracy"
    assert profiles.get(url).json()["profile"] is None
    deploy(profiles, SERIES, "b-h100")
    assert profiles.get(url).json()["profile"] == "b-h100"
    assert profiles.get(url, params={"profile": "a-l4"}).json()["profile"] == "a-l4"


def test_a_pool_member_without_a_profile_takes_its_deployment(profiles: TestClient) -> None:
    body = {
        "name": "fleet",
        "node_prices": {"on_demand_usd_per_hour": 32.0},
        "members": [{"series": SERIES}, {"series": OTHER, "profile": "a-l4"}],
    }
    refused = profiles.post("/v1/pools", json=body)
    assert refused.status_code == 422
    assert "no profile given and the series has no deployment" in refused.json()["detail"]
    assert profiles.get("/v1/pools").json() == []
    deploy(profiles, SERIES, "b-h100")
    created = profiles.post("/v1/pools", json=body)
    assert created.status_code == 201, created.text
    members = {m["series"]: m["profile"] for m in created.json()["members"]}
    assert members == {SERIES: "b-h100", OTHER: "a-l4"}


# -- the CLI ----------------------------------------------------------------------------------


def test_cli_deploy_then_plan_and_plot_without_a_profile(
    profiles: TestClient, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--database-url", database_url]
    assert main([*db, "plan", SERIES, "--band", "hi_80"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no deployment and 2 GPU profiles" in error
    assert main([*db, "series", "deploy", SERIES]) == 0
    assert "has no deployment" in capsys.readouterr().out
    args = [*db, "series", "deploy", SERIES, "--profile", "b-h100"]
    assert main(args) == 0
    assert "b-h100 (no latency SLO)" in capsys.readouterr().out
    assert main([*db, "plan", SERIES, "--band", "hi_80", "--json"]) == 0
    plan = capsys.readouterr().out
    assert '"profile":"b-h100"' in plan and '"profile_source":"deployment"' in plan
    out = tmp_path / "chart.png"
    assert main([*db, "plot", SERIES, "-o", str(out)]) == 0
    assert "(b-h100)" in capsys.readouterr().out and out.stat().st_size > 1000
    assert main([*db, "series", "deploy", SERIES, "--clear"]) == 0
    assert main([*db, "series", "deploy", SERIES]) == 0
    assert "has no deployment" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--profile", "nope"], "GPU profile 'nope' not found"),
        (["--profile", "a-l4", "--ttft-p95-s", "2"], "--tpot-p95-s is missing"),
        (["--profile", "a-l4", "--ttft-p95-s", "x", "--tpot-p95-s", "1"], "must be a number"),
        (["--profile", "a-l4", "--ttft-p95-s", "nan", "--tpot-p95-s", "1"], "seconds in (0"),
        (["--clear", "--profile", "a-l4"], "--clear takes no"),
        (["--ttft-p95-s", "1", "--tpot-p95-s", "1"], "needs --profile"),
    ],
)
def test_cli_deploy_refuses_bad_input_in_one_line(
    profiles: TestClient,
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    says: str,
) -> None:
    assert main(["--database-url", database_url, "series", "deploy", SERIES, *args]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and says in error
    assert deployments_stored(database) == 0
