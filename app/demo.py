"""``gpucast demo``: load the bundled real sample, forecast it and print tomorrow's GPU plan."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources

import pandas as pd
from sqlalchemy import select

from app import ingest, plans
from app.cli.database import open_configured
from app.common.urls import redact_url
from app.db import Database
from app.db.models import GpuProfile
from app.errors import AppError
from app.settings import Settings

DEMO_SERIES = "demo/servegen-m-small"
SAMPLE_FILE = "servegen_m_small_hourly.csv"
# Stated assumption for the demo: a small model served at 10,000 tokens/s per H100-class GPU,
# one GPU per replica, at typical cloud prices. Replace with your own measured profile.
DEMO_PROFILE = {
    "name": "demo-small-h100",
    "gpu_type": "H100-80G",
    "model": "small LLM (ServeGen m-small)",
    "tokens_per_s_per_gpu": 10_000.0,
    "gpus_per_replica": 1,
    "usd_per_hour_on_demand": 2.5,
    "usd_per_hour_reserved": 1.6,
    "usd_per_hour_spot": 1.1,
}


def load_sample(*, now: datetime | None = None) -> pd.DataFrame:
    """The bundled ServeGen sample as a canonical frame, shifted to end at the last full hour."""
    with resources.files("app.data").joinpath(SAMPLE_FILE).open("rb") as handle:
        frame = ingest.read_hourly_csv(handle, ingest.HourlyOptions(series=DEMO_SERIES))
    last_full_hour = pd.Timestamp(now or datetime.now(UTC)).floor("h") - pd.Timedelta(hours=1)
    frame["hour"] = frame["hour"] + (last_full_hour - frame["hour"].max())
    return frame


def run_demo(settings: Settings, *, forecast: bool = True, workers: int = 1) -> None:
    """Load, forecast and plan on the database of ``settings``, opened as every other command
    opens it (the same ``GPUCAST_DB_*`` bounds and migration rule)."""
    database = open_configured(settings)
    frame = load_sample()
    with database.transaction() as session:
        summary = ingest.store(session, frame, create_series=True)
        if (
            session.scalar(select(GpuProfile).where(GpuProfile.name == DEMO_PROFILE["name"]))
            is None
        ):
            session.add(GpuProfile(**DEMO_PROFILE))
    print(f"gpucast demo — database: {redact_url(settings.database_url)}")
    print(
        "loaded 14 days of real LLM traffic (ServeGen m-small, Apache-2.0; see "
        "app/data/SOURCES.md), shifted to end at the last full hour"
    )
    print("\n".join(summary.lines()))
    # Commands that read what the demo wrote must name its database (it is not the default).
    command = f"gpucast --database-url {redact_url(settings.database_url)}"
    print(f"  (look at it with: {command} series list)")
    if forecast:
        _forecast_and_plan(database, workers=workers, command=command)
    database.dispose()


def _forecast_and_plan(database: Database, *, workers: int, command: str) -> None:
    from app.cli.plan_text import plan_lines
    from app.jobs import ForecastOptions, run_forecasts
    from app.plans.backtest import run_backtest
    from app.plans.summary import replay_summary

    print("\nforecasting the next 24 h (backtesting every candidate model)…", flush=True)
    report = run_forecasts(
        database, ForecastOptions(series=(DEMO_SERIES,), workers=workers), lock=False
    )
    print("\n".join(report.table()))
    params = plans.PlanParams()  # band auto, as every plan surface serves it
    with database.transaction() as session:
        plan = plans.series_plan(
            session, series_name=DEMO_SERIES, profile_name=str(DEMO_PROFILE["name"]), params=params
        )
    print()
    print("\n".join(plan_lines(plan)))
    print("\nreplaying the last 7 days of hourly plans against the real load…", flush=True)
    try:
        result = run_backtest(
            database, series_name=DEMO_SERIES, profile_name=str(DEMO_PROFILE["name"]), params=params
        )
    except AppError as exc:  # the demo still serves; the replay says why it could not run
        print(f"  replay not possible: {exc}")
        return
    print("  " + replay_summary(result))
    print(f"  (the full table: {command} backtest {DEMO_SERIES} --profile {DEMO_PROFILE['name']})")
