"""/metrics gauges a Prometheus alert can use: how old each latest forecast's training data
is, and whether the plans built from it are stale (trained more than 36 h ago)."""

from __future__ import annotations

import pandas as pd
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.db import Database
from app.db.models import ForecastRun, Series
from app.jobs import ForecastOptions, run_forecasts
from tests.app.test_jobs import FAST, daily_load, load

OLD = "prod/october"  # daily_load's history ends 2026-10-21 23:00
FRESH = "prod/fresh"


def scrape(client: TestClient, name: str) -> dict[tuple[str, str], float]:
    """``{(series, metric): value}`` of one gauge in the scrape."""
    response = client.get("/metrics")
    assert response.status_code == 200
    values = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == name:
                values[(sample.labels["series"], sample.labels["metric"])] = sample.value
    return values


def fresh_history(last: pd.Timestamp) -> pd.DataFrame:
    frame = daily_load(days=10, seed=4)
    return frame.assign(hour=frame["hour"] + (last - frame["hour"].max()))


@pytest.fixture
def forecasted(database: Database) -> Database:
    load(database, OLD, daily_load())
    last = pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=1)
    load(database, FRESH, fresh_history(last))
    assert not run_forecasts(database, ForecastOptions(models=FAST, workers=1)).failed
    return database


def test_trained_age_and_staleness_of_every_latest_forecast(
    forecasted: Database, client: TestClient
) -> None:
    before = pd.Timestamp.now(tz="UTC")
    age = scrape(client, "gpucast_forecast_trained_age_seconds")
    stale = scrape(client, "gpucast_plan_stale")
    after = pd.Timestamp.now(tz="UTC")
    keys = {(s, m) for s in (OLD, FRESH) for m in ("requests", "tokens")}
    assert set(age) == set(stale) == keys
    trained_old = pd.Timestamp("2026-10-21T23:00Z")
    for metric in ("requests", "tokens"):
        low, high = (before - trained_old).total_seconds(), (after - trained_old).total_seconds()
        assert low - 1 <= age[(OLD, metric)] <= high + 1
        assert 3600 <= age[(FRESH, metric)] <= 2 * 3600 + 60
        assert stale[(OLD, metric)] == 1 and stale[(FRESH, metric)] == 0


def test_staleness_follows_the_latest_complete_run(
    forecasted: Database, client: TestClient
) -> None:
    with forecasted.transaction() as session:
        series = session.query(Series).filter_by(name=OLD).one()
        # A newer run that failed does not make the old forecast fresh.
        session.add(
            ForecastRun(
                series_id=series.id,
                metric="requests",
                status="failed",
                trained_until=pd.Timestamp.now(tz="UTC").to_pydatetime(),
                horizon=24,
                error="boom",
            )
        )
    assert scrape(client, "gpucast_plan_stale")[(OLD, "requests")] == 1
    # New history and a refit: the latest complete run is fresh now.
    last = pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=2)
    load(forecasted, OLD, fresh_history(last))
    options = ForecastOptions(series=(OLD,), metrics=("requests",), models=FAST, workers=1)
    assert not run_forecasts(forecasted, options).failed
    stale = scrape(client, "gpucast_plan_stale")
    assert stale[(OLD, "requests")] == 0 and stale[(OLD, "tokens")] == 1
    age = scrape(client, "gpucast_forecast_trained_age_seconds")
    assert 2 * 3600 <= age[(OLD, "requests")] <= 3 * 3600 + 60


def test_the_stale_boundary_is_36_hours(database: Database, client: TestClient) -> None:
    now = pd.Timestamp.now(tz="UTC")
    with database.transaction() as session:
        for name, hours in (("a/inside", 35.5), ("a/outside", 36.5)):
            series = Series(name=name, labels={})
            session.add(series)
            session.flush()
            session.add(
                ForecastRun(
                    series_id=series.id,
                    metric="tokens",
                    status="complete",
                    trained_until=(now - pd.Timedelta(hours=hours)).to_pydatetime(),
                    horizon=24,
                )
            )
    stale = scrape(client, "gpucast_plan_stale")
    assert stale == {("a/inside", "tokens"): 0, ("a/outside", "tokens"): 1}
