"""The nightly forecast job: storage of runs, failure isolation, the lock, the Dask path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, select

from app import ingest
from app.db import Database, repository
from app.db.models import ForecastPoint, ForecastRun
from app.forecasts import store as forecast_store
from app.forecasts.work import WorkItem, run_item
from app.jobs import ForecastOptions, LockHeldError, job_lock, run_forecasts

FAST = ("seasonal_naive", "seasonal_ma")


def daily_load(days: int = 21, *, level: float = 3600.0, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    hours = pd.date_range("2026-10-01T00:00Z", periods=days * 24, freq="h")
    shape = 1.0 + 0.6 * np.sin(2 * np.pi * (hours.hour.to_numpy() - 6) / 24)
    requests = level * shape * rng.lognormal(0, 0.05, len(hours))
    return pd.DataFrame(
        {
            "hour": hours,
            "requests": requests,
            "prompt_tokens": requests * 500,
            "completion_tokens": requests * 100,
            "total_tokens": requests * 600,
            "peak_rps": requests / 1800,
        }
    )


def load(database: Database, name: str, frame: pd.DataFrame) -> None:
    canonical = frame.assign(series=name)
    with database.transaction() as session:
        ingest.store(session, canonical, create_series=True)


def test_run_item_never_raises() -> None:
    item = WorkItem(
        series="s",
        metric="requests",
        hours_ns=np.array([], dtype="int64"),
        values=np.array([], dtype="float64"),
    )
    result = run_item(item)
    assert result.status == "failed"
    assert result.error and "Error" in result.error


def test_forecast_all_stores_complete_runs(database: Database) -> None:
    load(database, "prod/chat", daily_load())
    load(database, "prod/code", daily_load(seed=2, level=900.0))
    report = run_forecasts(database, ForecastOptions(models=FAST, workers=1))
    assert {(r.series, r.metric) for r in report.results} == {
        ("prod/chat", "requests"),
        ("prod/chat", "tokens"),
        ("prod/code", "requests"),
        ("prod/code", "tokens"),
    }
    assert not report.failed
    with database.transaction() as session:
        series = repository.get_series(session, name="prod/chat")
        run = forecast_store.latest_run(session, series_id=series.id, metric="tokens")
        assert run is not None and run.model in FAST
        assert run.trained_until == pd.Timestamp("2026-10-21T23:00Z")
        assert {s["model"] for s in run.scores} >= set(FAST)
        points = forecast_store.run_points(session, run_id=run.id)
    assert len(points) == 24
    assert points["ds"].iloc[0] == pd.Timestamp("2026-10-22T00:00Z")
    assert (points["lo_80"] <= points["yhat"]).all() and (points["yhat"] <= points["hi_80"]).all()
    assert points["yhat"].mean() == pytest.approx(3600 * 600, rel=0.15)
    table = "\n".join(report.table())
    assert "prod/chat" in table and "4 forecasts" in table and "0 failed" in table


def test_one_failing_series_does_not_stop_the_others(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import forecasting

    real = forecasting.auto_forecast

    def flaky(y: pd.Series, *args: object, **kwargs: object) -> object:
        if len(y) == 24 * 20:  # only the "broken" series has 20 days
            raise RuntimeError("model blew up")
        return real(y, *args, **kwargs)

    monkeypatch.setattr(forecasting, "auto_forecast", flaky)
    load(database, "good", daily_load())
    load(database, "broken", daily_load(days=20))
    report = run_forecasts(database, ForecastOptions(models=FAST, workers=1, metrics=("requests",)))
    by_series = {r.series: r for r in report.results}
    assert by_series["good"].status == "complete"
    assert by_series["broken"].status == "failed"
    assert by_series["broken"].error == "RuntimeError: model blew up"
    with database.transaction() as session:
        statuses = dict(
            session.execute(
                select(ForecastRun.status, func.count()).group_by(ForecastRun.status)
            ).all()
        )
        assert statuses == {"complete": 1, "failed": 1}
        failed = session.scalars(select(ForecastRun).where(ForecastRun.status == "failed")).one()
        points = session.scalar(
            select(func.count()).select_from(ForecastPoint).where(ForecastPoint.run_id == failed.id)
        )
    assert points == 0
    assert "FAILED broken requests" in "\n".join(report.table())


def test_series_without_tokens_skips_the_token_metric(database: Database) -> None:
    frame = daily_load()
    frame[["prompt_tokens", "completion_tokens", "total_tokens"]] = np.nan
    load(database, "requests-only", frame)
    report = run_forecasts(database, ForecastOptions(models=FAST, workers=1))
    assert [(r.metric, r.status) for r in report.results] == [("requests", "complete")]
    assert report.skipped == ["requests-only tokens: no tokens data"]


def test_second_run_is_refused_while_the_lock_is_held(database: Database) -> None:
    load(database, "prod/chat", daily_load())
    with job_lock(database), pytest.raises(LockHeldError, match="holds the database lock"):
        run_forecasts(database, ForecastOptions(models=FAST, workers=1))
    # released afterwards
    report = run_forecasts(database, ForecastOptions(models=FAST, workers=1, metrics=("requests",)))
    assert len(report.results) == 1


def test_process_pool_gives_the_same_models(database: Database) -> None:
    load(database, "a", daily_load(seed=3))
    load(database, "b", daily_load(seed=4))
    options = ForecastOptions(models=FAST, metrics=("requests",))
    serial = run_forecasts(database, ForecastOptions(models=FAST, metrics=("requests",), workers=1))
    pooled = run_forecasts(database, options.__class__(**{**options.__dict__, "workers": 2}))
    assert sorted((r.series, r.model) for r in serial.results) == sorted(
        (r.series, r.model) for r in pooled.results
    )


def test_dask_local_cluster_path(database: Database) -> None:
    distributed = pytest.importorskip("distributed")
    load(database, "a", daily_load(seed=5))
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        report = run_forecasts(
            database, ForecastOptions(models=FAST, metrics=("requests",), scheduler=cluster)
        )
    assert [(r.series, r.status) for r in report.results] == [("a", "complete")]


def test_metrics_endpoint_reports_jobs_and_forecast_age(database: Database, client) -> None:
    load(database, "prod/chat", daily_load())
    run_forecasts(database, ForecastOptions(models=FAST, workers=1, metrics=("requests",)))
    assert client.get("/healthz").status_code == 200
    text = client.get("/metrics").text
    assert 'gpucast_http_requests_total{method="GET",route="/healthz",status="200"} 1.0' in text
    assert "gpucast_nightly_last_run_failures 0.0" in text
    assert 'gpucast_forecast_age_seconds{metric="requests",series="prod/chat"}' in text
    assert "gpucast_nightly_last_run_duration_seconds" in text


def test_job_run_is_recorded(database: Database) -> None:
    from app.db.models import JobRun

    load(database, "prod/chat", daily_load())
    run_forecasts(database, ForecastOptions(models=FAST, workers=1, metrics=("requests",)))
    with database.transaction() as session:
        job = session.scalars(select(JobRun)).one()
    assert job.status == "complete" and job.items == 1 and job.failed == 0
    assert job.finished_at is not None and job.duration_s is not None
