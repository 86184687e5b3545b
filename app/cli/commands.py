"""Sub-commands: db, ingest, series, serve."""

from __future__ import annotations

import argparse
import io
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.cli.shared import finite_float, listening, open_db, serve, settings_from, whole_number
from app.errors import InputError


def validate_timezone(name: str | None) -> str | None:
    from app.ingest.timestamps import validate_timezone as validate

    return validate(name)


def register(sub: Any) -> None:
    _register_db(sub)
    _register_ingest(sub)
    _register_series(sub)
    _register_serve(sub)


# -- db ---------------------------------------------------------------------------------------


def _register_db(sub: Any) -> None:
    db = sub.add_parser("db", help="database administration")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_sub.add_parser("upgrade", help="apply migrations up to the latest revision")
    upgrade.set_defaults(handler=cmd_db_upgrade)


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from app.db import migrate

    database = open_db(args, migrate=True)
    print(f"database at revision {migrate.current_revision(database.engine)}")
    database.dispose()
    return 0


# -- ingest -----------------------------------------------------------------------------------


def _register_ingest(sub: Any) -> None:
    ingest = sub.add_parser("ingest", help="load history into the database")
    ingest_sub = ingest.add_subparsers(dest="ingest_command", required=True, metavar="FORMAT")

    hourly = ingest_sub.add_parser("hourly", help="hourly aggregates (CSV or JSON)")
    hourly.add_argument("file", help="CSV or JSON file")
    hourly.add_argument("--series", help="series name when the file has no 'series' column")
    hourly.add_argument("--timezone", help="IANA zone of naive timestamps (default UTC)")
    hourly.add_argument(
        "--format",
        choices=("auto", "csv", "json"),
        default="auto",
        help="file format (default %(default)s: from the file name, .json/.jsonl are JSON)",
    )
    hourly.set_defaults(handler=cmd_ingest_hourly)

    requests = ingest_sub.add_parser("requests", help="per-request logs, aggregated hourly")
    requests.add_argument("file", help="CSV with one row per request")
    requests.add_argument("--series", required=True, help="series the hours are stored under")
    requests.add_argument("--timestamp-column", help="default: detected (TIMESTAMP, timestamp_ms…)")
    requests.add_argument("--input-column", help="default: detected (ContextTokens, input_length…)")
    requests.add_argument(
        "--output-column", help="default: detected (GeneratedTokens, output_length…)"
    )
    requests.add_argument("--origin", help="start time for relative numeric timestamps (ISO 8601)")
    requests.add_argument(
        "--time-unit",
        choices=("s", "ms", "us", "ns"),
        help="unit of numeric timestamps (default: from the column name, else s)",
    )
    requests.add_argument("--timezone", help="IANA zone of naive timestamps (default UTC)")
    requests.add_argument(
        "--chunk-rows", type=whole_number, default=250_000, help=argparse.SUPPRESS
    )
    requests.set_defaults(handler=cmd_ingest_requests)
    _register_ingest_prometheus(ingest_sub)


def _parse_origin(text: str | None) -> datetime | None:
    from app.common.timebounds import parse_datetime

    return None if text is None else parse_datetime(text, what="--origin")


def _input_path(name: str) -> Path:
    path = Path(name)
    if not path.exists():
        raise InputError(f"file not found: {name}")
    if path.is_dir():
        raise InputError(f"{name} is a directory, not a file")
    return path


def _refresh_ingested(database: Any, summary: Any) -> None:
    """Condition the stored forecasts of the ingested series on their new hours."""
    from app.jobs.refresh import refresh_after_ingest

    summary.notes.extend(refresh_after_ingest(database, [s.series for s in summary.series]))


def cmd_ingest_hourly(args: argparse.Namespace) -> int:
    from app import ingest

    path = _input_path(args.file)
    options = ingest.HourlyOptions(series=args.series, timezone=validate_timezone(args.timezone))
    fmt = args.format
    if fmt == "auto":
        fmt = "json" if path.suffix.lower() in {".json", ".jsonl"} else "csv"
    if fmt == "json":
        frame = ingest.read_hourly_json(path.read_bytes(), options)
    elif path.is_file():
        with path.open("rb") as handle:
            frame = ingest.read_hourly_csv(handle, options)
    else:  # a pipe (/dev/stdin, <(…)): read once, then parsed like a file
        frame = ingest.read_hourly_csv(io.BytesIO(path.read_bytes()), options)
    database = open_db(args)
    try:
        with database.transaction() as session:
            summary = ingest.store(session, frame, create_series=True)
        _refresh_ingested(database, summary)
    finally:
        database.dispose()  # on a failure too: no connection left open behind the exit code
    print("\n".join(summary.lines()))
    return 0


def cmd_ingest_requests(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from app import ingest

    path = _input_path(args.file)
    if not path.is_file():
        raise InputError(
            f"{args.file} is not a regular file: a request log is read twice (its header, then "
            "in chunks); save the stream to a file first"
        )
    if args.chunk_rows < 1:
        raise InputError("--chunk-rows must be positive")
    options = ingest.RequestLogOptions(
        timestamp_column=args.timestamp_column,
        input_column=args.input_column,
        output_column=args.output_column,
        origin=_parse_origin(args.origin),
        time_unit=args.time_unit,
        timezone=validate_timezone(args.timezone),
        chunk_rows=args.chunk_rows,
    )
    with tqdm(
        desc=f"reading {path.name}",
        unit=" requests",
        unit_scale=True,
        file=sys.stderr,
        disable=None,
        leave=False,
    ) as bar:
        hourly = ingest.aggregate_request_log(str(path), options, on_chunk=bar.update)
    frame, notes = ingest.request_log_frame(hourly, args.series)
    database = open_db(args)
    try:
        with database.transaction() as session:
            summary = ingest.store(session, frame, create_series=True, notes=notes)
        _refresh_ingested(database, summary)
    finally:
        database.dispose()  # on a failure too: no connection left open behind the exit code
    print("\n".join(summary.lines()))
    return 0


def _register_ingest_prometheus(ingest_sub: Any) -> None:
    prom = ingest_sub.add_parser(
        "prometheus", help="hourly values of one metric from Prometheus query_range"
    )
    prom.add_argument("--url", required=True, help="Prometheus base URL, e.g. http://prom:9090")
    prom.add_argument(
        "--query", required=True, help="PromQL giving the per-hour value as one series"
    )
    prom.add_argument("--series", required=True, help="series the hours are stored under")
    prom.add_argument(
        "--metric",
        required=True,
        choices=("requests", "prompt_tokens", "completion_tokens"),
        help="which column of the series the query fills",
    )
    prom.add_argument("--start", required=True, help="ISO 8601, or 30d/12h/2w before now")
    prom.add_argument("--end", default="now", help="exclusive; default now (last full hour)")
    prom.add_argument(
        "--no-shift",
        action="store_true",
        help="store the sample at t as hour t (default: as hour t-1h, the hour it covers)",
    )
    prom.add_argument(
        "--timeout",
        type=finite_float,
        default=30.0,
        help="seconds per HTTP request (default %(default)s)",
    )
    prom.set_defaults(handler=cmd_ingest_prometheus)


def cmd_ingest_prometheus(args: argparse.Namespace) -> int:
    from app import ingest
    from app.ingest import prometheus

    if args.timeout <= 0:
        raise InputError("--timeout must be positive")
    now = datetime.now(UTC)
    current_hour = prometheus.parse_time("now", now=now)
    end = prometheus.parse_time(args.end, now=now)
    notes = []
    if end > current_hour:
        notes.append(f"--end moved back to {current_hour:%Y-%m-%dT%H:%MZ}: the last full hour")
        end = current_hour
    query = prometheus.RangeQuery(
        url=args.url,
        query=args.query,
        start=prometheus.parse_time(args.start, now=now),
        end=end,
        shift=not args.no_shift,
        timeout_s=args.timeout,
    )
    values, warnings = prometheus.fetch_hourly(query)
    database = open_db(args)
    try:
        with database.transaction() as session:
            frame, kept = prometheus.merge_metric(
                session, series=args.series, metric=args.metric, values=values
            )
            notes += warnings + kept
            summary = ingest.store(session, frame, create_series=True, notes=notes)
        _refresh_ingested(database, summary)
    finally:
        database.dispose()
    print("\n".join(summary.lines()))
    return 0


# -- series -----------------------------------------------------------------------------------


def _register_series(sub: Any) -> None:
    series = sub.add_parser(
        "series", help="list, show and delete series; set their sources and deployments"
    )
    series_sub = series.add_subparsers(dest="series_command", required=True, metavar="ACTION")
    listing = series_sub.add_parser("list", help="list series with their coverage")
    listing.set_defaults(handler=cmd_series_list)
    show = series_sub.add_parser("show", help="a series' coverage, labels and deployment")
    show.add_argument("series", help="series name")
    show.add_argument("--json", action="store_true", help="print the API's JSON")
    show.set_defaults(handler=cmd_series_show)
    delete = series_sub.add_parser(
        "delete", help="delete a series and all that is stored for it (as the REST DELETE)"
    )
    delete.add_argument("series", help="series name")
    delete.set_defaults(handler=cmd_series_delete)
    from app.cli import deploy_commands, serving_commands, source_commands

    source_commands.register(series_sub)
    deploy_commands.register(series_sub)
    serving_commands.register(series_sub)


def cmd_series_list(args: argparse.Namespace) -> int:
    from app.db import repository

    database = open_db(args)
    try:
        with database.read_transaction() as session:
            series = repository.list_series(session)
            by_id = repository.series_stats_many(session, series_ids=[s.id for s in series])
            rows = [(s.name, by_id[s.id]) for s in series]
    finally:
        database.dispose()
    if not rows:
        print("no series yet; load some with 'gpucast ingest hourly FILE --series NAME'")
        return 0
    width = max(len("SERIES"), *(len(name) for name, _ in rows))
    print(f"{'SERIES':<{width}}  {'HOURS':>7}  FIRST HOUR (UTC)   LAST HOUR (UTC)")
    for name, stats in rows:
        first = f"{stats['first_hour']:%Y-%m-%d %H:%M}" if stats["first_hour"] else "-"
        last = f"{stats['last_hour']:%Y-%m-%d %H:%M}" if stats["last_hour"] else "-"
        print(f"{name:<{width}}  {stats['observations']:>7}  {first:<17}  {last}")
    return 0


def cmd_series_show(args: argparse.Namespace) -> int:
    import json

    from app.api.schemas import SeriesOut
    from app.db import repository

    database = open_db(args)
    try:
        with database.transaction() as session:
            series = repository.get_series(session, name=args.series)
            stats = repository.series_stats(session, series_id=series.id)
            shown = SeriesOut(
                name=series.name, labels=series.labels, created_at=series.created_at, **stats
            )
    finally:
        database.dispose()
    if args.json:
        print(json.dumps(shown.model_dump(mode="json"), indent=2))
        return 0
    first = f"{shown.first_hour:%Y-%m-%d %H:%M} UTC" if shown.first_hour else "-"
    last = f"{shown.last_hour:%Y-%m-%d %H:%M} UTC" if shown.last_hour else "-"
    print(f"series       {shown.name}")
    print(f"hours        {shown.observations}  ({first} to {last})")
    print(f"labels       {json.dumps(shown.labels) if shown.labels else '-'}")
    print(f"created      {shown.created_at:%Y-%m-%d %H:%M} UTC")
    return 0


def cmd_series_delete(args: argparse.Namespace) -> int:
    from app.db import repository

    database = open_db(args)
    try:
        with database.transaction() as session:
            repository.delete_series(session, name=args.series)
    finally:
        database.dispose()
    print(f"series {args.series} deleted")
    return 0


# -- serve ----------------------------------------------------------------------------------


def _register_serve(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the HTTP API",
        description="Exit codes: 1 the address is taken or cannot be bound (--host, --port), "
        "2 bad input, 3 database unavailable.",
    )
    serve.add_argument("--host", help="bind address (default 127.0.0.1 or GPUCAST_HOST)")
    serve.add_argument("--port", type=whole_number, help="port (default 8000 or GPUCAST_PORT)")
    serve.add_argument(
        "--workers",
        type=whole_number,
        default=1,
        help="must be 1 (default); for more, run uvicorn --factory app.api:create_app --workers N",
    )
    serve.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if args.workers > 1:
        raise InputError(
            "--workers > 1: run uvicorn --factory app.api:create_app --workers N instead"
        )
    host, port = args.host or settings.host, args.port or settings.port
    serve(settings, listening(host, port, command="serve"))
    return 0
