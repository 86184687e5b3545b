"""One bad series never stops the nightly job: whatever fails inside one series x metric
(loading its history, the fit, its worker, storing the run, an unstorable refresh state, a
real history of 1e300 values, band auto's recalibration) becomes that item's failed run with
its error recorded, every other series gets its complete run, and the summary is printed
(exit code 1). On SQLite and PostgreSQL, in-process and with a process pool."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import func, insert, select

from app import ingest
from app.cli import main
from app.db import Database, repository
from app.db.models import ForecastPoint, ForecastRun, JobRun, Observation, PlanCalibration, Series
from app.forecasts.work import ItemResult, run_item
from tests.app.test_jobs import daily_load

GOOD = ("prod/a", "prod/c", "prod/d")
BAD = "prod/b-bad"
MARK = "injected failure"
BAD_LEVEL = 777.0


def bad_history(history: pd.Series) -> bool:
    """Whether a history handed to a fit is the bad series' (identified by its level: the
    fit sees values, not names)."""
    return bool(abs(history.iloc[0] - daily_load(level=BAD_LEVEL, seed=9)["requests"][0]) < 1e-6)


def load_series(database: Database) -> None:
    with database.transaction() as session:
        for seed, name in enumerate(GOOD):
            ingest.store(session, daily_load(seed=seed).assign(series=name), create_series=True)
        bad = daily_load(level=BAD_LEVEL, seed=9).assign(series=BAD)
        ingest.store(session, bad, create_series=True)


def load_series_with_huge_values(database: Database, scale: float) -> None:
    """The bad series written straight into the table, as a history stored before ingest
    bounded values would be (ingest may refuse them now)."""
    with database.transaction() as session:
        for seed, name in enumerate(GOOD):
            ingest.store(session, daily_load(seed=seed).assign(series=name), create_series=True)
        series_id = session.execute(
            insert(Series).returning(Series.id), [{"name": BAD, "labels": {}}]
        ).scalar_one()
        frame = daily_load(seed=9)
        session.execute(
            insert(Observation),
            [
                {
                    "series_id": series_id,
                    "hour": hour.to_pydatetime(),
                    "requests": float(value) * scale,
                    "total_tokens": float(value) * scale * 600,
                }
                for hour, value in zip(frame["hour"], frame["requests"], strict=True)
            ],
        )


def raise_on_bad_load(monkeypatch: pytest.MonkeyPatch) -> None:
    real = repository.observations_frame

    def observations_frame(session: Any, *, series_id: int) -> pd.DataFrame:
        name = session.scalar(select(Series.name).where(Series.id == series_id))
        if name == BAD:
            raise RuntimeError(f"{MARK}: reading the history")
        return real(session, series_id=series_id)

    monkeypatch.setattr(repository, "observations_frame", observations_frame)


def raise_on_bad_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    import forecasting

    real = forecasting.auto_forecast

    def auto_forecast(history: pd.Series, **kwargs: Any) -> Any:
        if bad_history(history):
            raise FloatingPointError(f"{MARK}: the fit exploded")
        return real(history, **kwargs)

    monkeypatch.setattr(forecasting, "auto_forecast", auto_forecast)


def unstorable_state(monkeypatch: pytest.MonkeyPatch) -> None:
    import forecasting

    real = forecasting.auto_forecast

    def auto_forecast(history: pd.Series, **kwargs: Any) -> Any:
        fit = real(history, **kwargs)
        if bad_history(history):
            return dataclasses.replace(fit, state={"level": object()})  # not JSON
        return fit

    monkeypatch.setattr(forecasting, "auto_forecast", auto_forecast)


def raise_on_bad_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.jobs import nightly

    real = nightly.save_run

    def save_run(session: Any, *, series_id: int, result: ItemResult) -> ForecastRun:
        if result.series == BAD and result.status == "complete":
            raise ValueError(f"{MARK}: storing the run")
        return real(session, series_id=series_id, result=result)

    monkeypatch.setattr(nightly, "save_run", save_run)


def worker_raises(item: Any) -> ItemResult:
    """Module level, so a process pool can pickle it by name (a fork inherits the patch)."""
    if item.series == BAD:
        raise MemoryError(f"{MARK}: the worker ran out of memory")
    return run_item(item)


def worker_dies(item: Any) -> ItemResult:
    if item.series == BAD:
        os._exit(17)  # the worker process dies without a word
    return run_item(item)


def raise_in_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.jobs import executors

    monkeypatch.setattr(executors, "run_item", worker_raises)


def kill_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.jobs import executors

    monkeypatch.setattr(executors, "run_item", worker_dies)


Injector = Callable[[pytest.MonkeyPatch], None]
INJECTED: dict[str, tuple[Injector, str]] = {
    "load": (raise_on_bad_load, f"failed loading its history: RuntimeError: {MARK}"),
    "fit": (raise_on_bad_fit, f"FloatingPointError: {MARK}"),
    "worker": (raise_in_worker, f"failed in its worker: MemoryError: {MARK}"),
    "store": (raise_on_bad_store, f"failed storing its run: ValueError: {MARK}"),
    "refresh state": (unstorable_state, "failed storing its run: TypeError: Object of type"),
}


def forecast_all(
    database_url: str,
    workers: int,
    *,
    metrics: tuple[str, ...] = ("requests",),
    models: str = "seasonal_naive",
) -> list[str]:
    argv = ["--database-url", database_url, "forecast", "--all"]
    argv += [option for metric in metrics for option in ("--metric", metric)]
    return [*argv, "--workers", str(workers), "--models", models]


def assert_isolated(
    database: Database,
    out: str,
    code: int,
    *,
    error_part: str | None,
    bad_may_complete: bool = False,
    metrics: tuple[str, ...] = ("requests",),
) -> None:
    """Every good series has its complete run; the bad one a failed run recording
    ``error_part`` (or, with ``bad_may_complete``, a complete one); the summary says so."""
    with database.transaction() as session:
        runs = session.execute(
            select(
                Series.name,
                ForecastRun.metric,
                ForecastRun.status,
                ForecastRun.error,
                ForecastRun.id,
            ).join(Series, Series.id == ForecastRun.series_id)
        ).all()
        by_item = {(name, metric): (status, error, i) for name, metric, status, error, i in runs}
        items = [(name, metric) for name in (*GOOD, BAD) for metric in metrics]
        assert sorted(by_item) == sorted(items) and len(runs) == len(items), runs
        for name in GOOD:
            for metric in metrics:
                status, _, run_id = by_item[(name, metric)]
                points = session.scalar(
                    select(func.count())
                    .select_from(ForecastPoint)
                    .where(ForecastPoint.run_id == run_id)
                )
                assert (status, points) == ("complete", 24), (name, metric, status, points)
        bad = {metric: by_item[(BAD, metric)] for metric in metrics}
        job = session.scalar(select(JobRun).order_by(JobRun.id.desc()).limit(1))
    assert f"{len(items)} forecasts in" in out, out
    failed = [m for m, (status, _, _) in bad.items() if status != "complete"]
    assert bad_may_complete or failed == list(metrics), bad
    assert code == (1 if failed else 0) and f", {len(failed)} failed" in out, out
    for metric in failed:
        status, error, _ = bad[metric]
        assert status == "failed" and error and (error_part or "") in error, (status, error)
        lines = [line for line in out.splitlines() if line.startswith(f"  FAILED {BAD} {metric}")]
        assert len(lines) == 1 and error in lines[0], out
    assert job is not None and (job.items, job.failed) == (len(items), len(failed))
    assert job.status == ("failed" if failed else "complete")
    assert job.failed_series == [f"{BAD} {metric}" for metric in sorted(failed)]


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "process-pool"])
@pytest.mark.parametrize("stage", sorted(INJECTED))
def test_a_failure_at_any_stage_fails_only_its_item(
    database: Database,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stage: str,
    workers: int,
) -> None:
    load_series(database)
    inject, error_part = INJECTED[stage]
    inject(monkeypatch)
    code = main(forecast_all(database_url, workers))
    assert_isolated(database, capsys.readouterr().out, code, error_part=error_part)


def test_a_worker_that_dies_fails_only_its_item(
    database: Database,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    load_series(database)
    kill_the_worker(monkeypatch)
    code = main(forecast_all(database_url, workers=2))
    assert_isolated(
        database, capsys.readouterr().out, code, error_part="failed in its worker: Broken"
    )


@pytest.mark.parametrize("scale", [1e300, 1e307 / 3600], ids=["1e300", "near-1e307"])
@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "process-pool"])
def test_a_real_history_of_huge_values_fails_only_its_item(
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    scale: float,
    workers: int,
) -> None:
    load_series_with_huge_values(database, scale)
    both = ("requests", "tokens")
    models = "seasonal_naive,seasonal_ma"
    code = main(forecast_all(database_url, workers, metrics=both, models=models))
    out = capsys.readouterr().out
    # Whatever rejects it (the fit, its hygiene checks, the store), the others are complete;
    # if it is rejected, that is a recorded failure.
    assert_isolated(database, out, code, error_part="Error", bad_may_complete=True, metrics=both)


def test_a_failing_band_recalibration_skips_only_its_series(
    database: Database,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from fastapi.testclient import TestClient

    from app.api import create_app
    from app.plans import auto_band
    from app.settings import get_settings

    load_series(database)
    assert main(forecast_all(database_url, workers=1)) == 0
    profile = {"name": "h100", "gpu_type": "H100-80G", "model": "m", "tokens_per_s_per_gpu": 2400}
    settings = get_settings(database_url=database_url, auto_migrate=False, read_cache_ttl_s=0)
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/gpu-profiles", json=profile).status_code == 201
        for name in (*GOOD, BAD):
            params = {"profile": "h100", "band": "auto"}
            read = client.get(f"/v1/series/{name}/capacity", params=params)
            assert read.status_code == 200, read.text
    with database.transaction() as session:
        first = session.scalar(select(func.count()).select_from(PlanCalibration))
    assert first == len(GOOD) + 1, "each band=auto read stores its choice"

    real = auto_band.band_choice

    def band_choice(session: Any, *, series_name: str, **kwargs: Any) -> Any:
        if series_name == BAD:
            raise ArithmeticError(f"{MARK}: replaying the plan")
        return real(session, series_name=series_name, **kwargs)

    monkeypatch.setattr(auto_band, "band_choice", band_choice)
    capsys.readouterr()
    code = main(forecast_all(database_url, workers=1))
    out = capsys.readouterr().out
    assert code == 0, out  # every forecast is complete; the bad choice is computed on read
    assert f"band auto recalibrated for {len(GOOD)} series" in out, out
    with database.transaction() as session:
        names = session.scalars(
            select(Series.name)
            .join(PlanCalibration, PlanCalibration.series_id == Series.id)
            .where(PlanCalibration.id > first)
        ).all()
    assert sorted(names) == sorted(GOOD)


def test_a_failing_recalibration_pass_still_prints_the_summary(
    database: Database,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from app.cli import forecast_commands

    load_series(database)

    def recalibrate(_database: Any) -> int:
        raise KeyError(f"{MARK}: the calibration rows")

    monkeypatch.setattr(forecast_commands, "_recalibrate", recalibrate)
    code = main(forecast_all(database_url, workers=1))
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"{len(GOOD) + 1} forecasts in" in out and ", 0 failed" in out, out
    assert f"FAILED band auto not recalibrated: KeyError: '{MARK}" in out, out
