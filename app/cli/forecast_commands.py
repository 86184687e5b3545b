"""Sub-commands: forecast (the nightly job) and schedule (in-process cron: the nightly job and
the hourly import + refresh cycle)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

from app.cli.shared import finite_float, whole_number
from app.common import options
from app.errors import InputError

EXIT_SOME_FAILED = 1
EXIT_LOCKED = 4


def register(sub: Any) -> None:
    forecast = sub.add_parser(
        "forecast",
        help="backtest, select and forecast series (the nightly job)",
        description="Fit every candidate model per series x metric, keep the best by backtest "
        "error and store a 24 h forecast. Exit codes: 0 all ok, 1 some series "
        "failed, 2 bad input, 3 database unavailable, 4 another run holds the lock.",
    )
    forecast.add_argument("series", nargs="*", help="series names (or --all)")
    forecast.add_argument(
        "--refresh",
        action="store_true",
        help="condition the fitted models on the hours that arrived since their latest run, "
        "without refitting (every series unless named; what 'gpucast schedule' runs hourly)",
    )
    _add_job_options(forecast)
    forecast.set_defaults(handler=cmd_forecast)

    _register_schedule(sub)


def _register_schedule(sub: Any) -> None:
    schedule = sub.add_parser(
        "schedule",
        help="run the nightly forecast and the hourly import + refresh in-process (UTC)",
        description="Every day at --cron: the nightly forecast of every series. Every hour at "
        "--hourly-minute: import the last complete hours of every series with a source "
        "('gpucast series source'), refresh the forecasts whose history grew, apply retention. "
        "Runs never overlap; a failed run is reported and the scheduler carries on. "
        "--hourly-once runs one hourly cycle and exits: 0 ok, 1 a source, refresh or step "
        "failed, 3 database unavailable, 4 another hourly cycle is running.",
    )
    schedule.add_argument(
        "--cron", default="0 2 * * *", help="nightly forecast, cron in UTC (default: '0 2 * * *')"
    )
    schedule.add_argument("--run-now", action="store_true", help="also run the nightly at start")
    schedule.add_argument(
        "--hourly-minute",
        type=whole_number,
        default=5,
        metavar="M",
        help="minute of every hour for the import + refresh cycle (default 5)",
    )
    hourly = schedule.add_mutually_exclusive_group()
    hourly.add_argument("--no-hourly", action="store_true", help="only the nightly forecast")
    hourly.add_argument(
        "--hourly-once", action="store_true", help="run one hourly cycle now and exit (cron)"
    )
    schedule.add_argument(
        "--refresh-retention-days",
        type=finite_float,
        default=15.0,
        metavar="DAYS",
        help="delete refresh runs older than this (default 15)",
    )
    schedule.add_argument(
        "--nightly-retention-days",
        type=finite_float,
        default=None,
        metavar="DAYS",
        help="also delete nightly runs older than this (default: keep them)",
    )
    schedule.add_argument("--max-runs", type=whole_number, default=None, help=argparse.SUPPRESS)
    schedule.add_argument("--now", default=None, help=argparse.SUPPRESS)  # --hourly-once clock
    _add_job_options(schedule, with_all=False)
    schedule.set_defaults(handler=cmd_schedule)


def _add_job_options(parser: argparse.ArgumentParser, *, with_all: bool = True) -> None:
    if with_all:
        parser.add_argument("--all", action="store_true", help="every series")
    parser.add_argument(
        "--metric",
        action="append",
        choices=("requests", "tokens", "prompt_tokens", "completion_tokens"),
        help="metric to forecast (repeatable; default requests and tokens, and the "
        "prompt/completion mix of a series deployed at an SLO on a load-test profile)",
    )
    parser.add_argument(
        "--workers",
        type=whole_number,
        default=os.cpu_count() or 1,
        help="worker processes (default: number of cores, here %(default)s)",
    )
    parser.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://host:8786")
    parser.add_argument("--horizon", type=whole_number, default=24, help="hours ahead (default 24)")
    parser.add_argument("--models", help="comma-separated candidate models (default: all)")
    parser.add_argument(
        "--windows",
        type=whole_number,
        default=options.FORECAST_WINDOWS,
        help=f"backtest windows, 1-{options.FORECAST_WINDOWS_MAX} (default %(default)s)",
    )


def _options(args: argparse.Namespace, series: tuple[str, ...] | None):  # type: ignore[no-untyped-def]
    from app.jobs import ForecastOptions

    models = tuple(m.strip() for m in args.models.split(",") if m.strip()) if args.models else None
    return ForecastOptions(
        series=series,
        metrics=tuple(args.metric) if args.metric else ("requests", "tokens"),
        horizon=args.horizon,
        models=models,
        windows=args.windows,
        workers=args.workers,
        scheduler=args.scheduler,
    )


def cmd_forecast(args: argparse.Namespace) -> int:
    if args.refresh:
        return _refresh(args)
    if args.all and args.series:
        raise InputError("give series names or --all, not both")
    if not args.all and not args.series:
        raise InputError("name at least one series, or pass --all")
    options = _options(args, None if args.all else tuple(args.series))
    return _run_once(args, options)


def _refresh(args: argparse.Namespace) -> int:
    from app.cli.shared import open_db
    from app.jobs.refresh import refresh_forecasts

    if args.all and args.series:
        raise InputError("give series names or --all, not both")
    database = open_db(args)
    try:
        if args.series:
            from app.db import repository

            with database.transaction() as session:
                for name in args.series:
                    repository.get_series(session, name=name)
        report = refresh_forecasts(database, series=tuple(args.series) or None)
    finally:
        database.dispose()
    print("\n".join(report.lines()))
    return EXIT_SOME_FAILED if report.failed else 0


def _run_once(args: argparse.Namespace, options: Any) -> int:
    """The nightly job: every series is forecast and stored or recorded as failed, then band
    auto is recalibrated; the summary is printed even when the database went away (exit 3)."""
    from app.cli.shared import open_db
    from app.db import is_unavailable
    from app.forecasts.work import describe
    from app.jobs import JobAbortedError, LockHeldError, progress_printer, run_forecasts

    options.validate()
    database = open_db(args)
    try:
        try:
            report = run_forecasts(database, options, progress=progress_printer)
        except LockHeldError as exc:
            print(f"gpucast: {exc}", file=sys.stderr)
            return EXIT_LOCKED
        except JobAbortedError as exc:
            if exc.report is not None:
                print("\n".join(exc.report.table()), flush=True)
            raise
        try:
            recalibrated, note = _recalibrate(database), None
        except Exception as exc:
            if is_unavailable(exc):
                print("\n".join(report.table()), flush=True)
                raise
            recalibrated, note = 0, f"band auto not recalibrated: {describe(exc)}"
    finally:
        database.dispose()
    print("\n".join(report.table()))
    if recalibrated:
        print(f"band auto recalibrated for {recalibrated} series x profile x parameters in use")
    if note:
        print(f"  FAILED {note} (the first plan read with band auto computes it)")
    return EXIT_SOME_FAILED if report.failed or note else 0


def _recalibrate(database: Any) -> int:
    from app.plans.auto_band import recalibrate

    return recalibrate(database)


def _check_cron(expression: str) -> None:
    """Five standard fields whose ranges run forwards and that name a time that comes: croniter
    also reads a sixth field (seconds), wraps a range like 5-1, and fails at its first
    ``get_next`` on a date that never is (0 2 31 2 *)."""
    from croniter import CroniterBadDateError, croniter

    fields = expression.split()
    if len(fields) != 5 or not croniter.is_valid(expression):
        raise InputError(f"invalid cron expression {expression!r} (five fields, e.g. '0 2 * * *')")
    for field in fields:
        for part in field.split(","):
            bounds = part.split("/")[0].split("-")
            if (
                len(bounds) == 2
                and all(b.isdigit() for b in bounds)
                and int(bounds[0]) > int(bounds[1])
            ):
                raise InputError(
                    f"invalid cron expression {expression!r}: the range {'-'.join(bounds)} "
                    "runs backwards"
                )
    try:
        croniter(expression, _now()).get_next(datetime)
    except CroniterBadDateError:
        raise InputError(f"cron expression {expression!r} never fires: no such date") from None


def cmd_schedule(args: argparse.Namespace) -> int:
    from croniter import croniter

    _check_cron(args.cron)
    if not 0 <= args.hourly_minute <= 59:
        raise InputError(f"--hourly-minute must be 0..59, got {args.hourly_minute}")
    for flag, days in (
        ("--refresh-retention-days", args.refresh_retention_days),
        ("--nightly-retention-days", args.nightly_retention_days),
    ):
        if days is not None and not days > 0:
            raise InputError(f"{flag} must be positive")
    if args.hourly_once:
        return _hourly_once(args)
    options = _options(args, None)
    options.validate()
    runs = 0
    if args.run_now:
        _run_logged(args, options)
        runs += 1
    crons = {"nightly forecast": args.cron}
    if not args.no_hourly:
        crons["hourly cycle"] = f"{args.hourly_minute} * * * *"
    due = {kind: croniter(cron, _now()).get_next(datetime) for kind, cron in crons.items()}
    while args.max_runs is None or runs < args.max_runs:
        kind = min(due, key=lambda k: due[k])
        print(f"gpucast schedule: next {kind} at {due[kind]:%Y-%m-%d %H:%M}Z", flush=True)
        while (wait := (due[kind] - _now()).total_seconds()) > 0:
            _sleep(min(wait, 60))
        # Nightly first when both are due: the hourly cycle then refreshes the new fits. A
        # cycle missed while the other ran is run once, late; the import catches up anyway.
        for ready in [k for k in crons if due[k] <= _now()]:
            if ready == "nightly forecast":
                _run_logged(args, options)
            else:
                _hourly_logged(args, now=_now())
            runs += 1
            due[ready] = croniter(crons[ready], _now()).get_next(datetime)
    return 0


def _now() -> datetime:
    return datetime.now(UTC)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _hourly_once(args: argparse.Namespace, *, now: datetime | None = None) -> int:
    from app.cli.shared import open_db
    from app.ingest.prometheus import parse_time
    from app.jobs import LockHeldError
    from app.jobs.hourly import run_hourly

    if now is None and args.now:
        now = parse_time(args.now)
    database = open_db(args)
    try:
        report = run_hourly(
            database,
            now=now,
            refresh_days=args.refresh_retention_days,
            nightly_days=args.nightly_retention_days,
        )
    except LockHeldError as exc:
        print(f"gpucast: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    finally:
        database.dispose()
    print("\n".join(report.lines()), flush=True)
    return EXIT_SOME_FAILED if report.failed else 0


def _hourly_logged(args: argparse.Namespace, *, now: datetime) -> None:
    """One scheduled hourly cycle; its failures are reported, never fatal to the scheduler."""
    try:
        code = _hourly_once(args, now=now)
    except Exception as exc:  # keep the scheduler alive through database outages
        message = f"hourly cycle failed: {type(exc).__name__}: {exc}"
        print(f"gpucast schedule: {message}", file=sys.stderr)
        return
    print(f"gpucast schedule: hourly cycle finished with exit code {code}", flush=True)


def _run_logged(args: argparse.Namespace, options: Any) -> None:
    """One scheduled run; its failures are reported, never fatal to the scheduler."""
    try:
        code = _run_once(args, options)
    except Exception as exc:  # keep the scheduler alive through database outages
        print(f"gpucast schedule: run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return
    print(f"gpucast schedule: run finished with exit code {code}", flush=True)
