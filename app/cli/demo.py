"""``gpucast demo``: load the bundled real sample, forecast it and print tomorrow's GPU plan,
then serve the API on it. Heavy modules are imported when the command runs, not while the
parser is built."""

from __future__ import annotations

import argparse
import shlex
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any

from app.cli.shared import listening, open_configured, serve, settings_from, whole_number
from app.common.urls import redact_url, without_password
from app.errors import AppError

if TYPE_CHECKING:
    import pandas as pd

    from app.db import Database
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


def register(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="load a real sample, forecast it, plan GPUs, serve the API",
        description="Loads into its own SQLite file (~/.local/share/gpucast/demo.db) unless "
        "--database-url names a database; GPUCAST_DATABASE_URL is left alone, so the demo "
        "series never mix with your own. Exit codes: 1 the port is taken (--port), 2 bad "
        "input, 3 database unavailable.",
    )
    demo.add_argument("--no-serve", action="store_true", help="load and report, then exit")
    demo.add_argument("--no-forecast", action="store_true", help="only load the sample")
    demo.add_argument(
        "--workers",
        type=whole_number,
        default=1,
        help="worker processes for the fit (default %(default)s)",
    )
    demo.add_argument("--host", help="bind address (default 127.0.0.1 or GPUCAST_HOST)")
    demo.add_argument("--port", type=whole_number, help="port (default 8000 or GPUCAST_PORT)")
    demo.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from app.settings import demo_database_url

    settings = settings_from(args)
    note = None
    if not args.database_url:
        # Only --database-url moves the demo: an exported GPUCAST_DATABASE_URL is the user's
        # own database, which the demo's series must never land in.
        if "database_url" in settings.model_fields_set:
            note = (
                f"  (GPUCAST_DATABASE_URL is set: the demo leaves "
                f"{redact_url(settings.database_url)} alone; --database-url loads it elsewhere)"
            )
        settings = settings.model_copy(update={"database_url": demo_database_url()})
    sock = None
    if not args.no_serve:  # the port first: a taken one is said before minutes of work
        sock = listening(args.host or settings.host, args.port or settings.port, command="demo")
    try:
        run_demo(settings, forecast=not args.no_forecast, workers=max(1, args.workers), note=note)
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    if sock is not None:
        host, port = sock.getsockname()[:2]
        print(f"\noverview page: http://{host}:{port}/   API docs: http://{host}:{port}/docs")
        serve(settings, sock)
    return 0


def load_sample(*, now: datetime | None = None) -> pd.DataFrame:
    """The bundled ServeGen sample as a canonical frame, shifted to end at the last full hour."""
    import pandas as pd

    from app import ingest

    with resources.files("app.data").joinpath(SAMPLE_FILE).open("rb") as handle:
        frame = ingest.read_hourly_csv(handle, ingest.HourlyOptions(series=DEMO_SERIES))
    last_full_hour = pd.Timestamp(now or datetime.now(UTC)).floor("h") - pd.Timedelta(hours=1)
    frame["hour"] = frame["hour"] + (last_full_hour - frame["hour"].max())
    return frame


def run_demo(
    settings: Settings, *, forecast: bool = True, workers: int = 1, note: str | None = None
) -> None:
    """Load, forecast and plan on the database of ``settings``, opened as every other command
    opens it (the same ``GPUCAST_DB_*`` bounds and migration rule); ``note`` is printed under
    the database's name."""
    database = open_configured(settings)
    try:
        _load_and_show(database, settings, forecast=forecast, workers=workers, note=note)
    finally:
        database.dispose()


def _load_and_show(
    database: Database, settings: Settings, *, forecast: bool, workers: int, note: str | None
) -> None:
    from sqlalchemy import select

    from app import ingest
    from app.db.models import GpuProfile

    frame = load_sample()
    with database.transaction() as session:
        summary = ingest.store(session, frame, create_series=True)
        if (
            session.scalar(select(GpuProfile).where(GpuProfile.name == DEMO_PROFILE["name"]))
            is None
        ):
            session.add(GpuProfile(**DEMO_PROFILE))
    # The database as it can be pasted (as below): its password left out, never shown as ***.
    print(f"gpucast demo — database: {without_password(settings.database_url)[0]}")
    if note:
        print(note)
    print(
        "loaded 14 days of real LLM traffic (ServeGen m-small, Apache-2.0; see "
        "app/data/SOURCES.md), shifted to end at the last full hour"
    )
    print("\n".join(summary.lines()))
    # Commands that read what the demo wrote must name its database (it is not the default).
    # The URL is printed as it can be pasted: a password is left out (libpq, which connects
    # to PostgreSQL, takes it from PGPASSWORD or ~/.pgpass), never shown as ***.
    url, had_password = without_password(settings.database_url)
    command = f"gpucast --database-url {shlex.quote(url)}"
    print(f"  (look at it with: {command} series list)")
    if had_password:
        print(
            "  (the password is not shown: export PGPASSWORD=<password> first, or keep it in "
            "~/.pgpass; PostgreSQL's client reads either when the URL has none)"
        )
    if forecast:
        _forecast_and_plan(database, workers=workers, command=command)


def _forecast_and_plan(database: Database, *, workers: int, command: str) -> None:
    from app import plans
    from app.jobs import ForecastOptions, run_forecasts
    from app.plans.backtest import run_backtest
    from app.plans.summary import replay_summary
    from app.plans.text import plan_lines

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
