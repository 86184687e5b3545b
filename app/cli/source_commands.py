"""``gpucast series source``: set, show or clear where the hourly loop imports a series from."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.shared import finite_float, open_db, whole_number
from app.common.options import SOURCE_LOOKBACK_HOURS as DEFAULT_LOOKBACK_HOURS
from app.common.options import SOURCE_TIMEOUT_S as DEFAULT_TIMEOUT_S
from app.errors import InputError

if TYPE_CHECKING:
    from app.sources.spec import SourceSpec

SETTINGS = ("url", "requests_query", "prompt_tokens_query", "completion_tokens_query")


def register(series_sub: Any) -> None:
    source = series_sub.add_parser(
        "source",
        help="set, show or clear the Prometheus source of a series (the hourly import)",
        description="With --url and --requests-query: set the source (replacing any previous "
        "one; the series is created if needed). With no options: show it, credentials "
        "redacted. With --clear: remove it. The queries are what 'gpucast ingest prometheus "
        "--query' takes: the quantity of each hour as one series.",
    )
    source.add_argument("series", help="series name")
    source.add_argument("--url", help="Prometheus base URL, e.g. http://prometheus:9090")
    source.add_argument("--requests-query", help="PromQL: requests per hour")
    source.add_argument("--prompt-tokens-query", help="PromQL: prompt tokens per hour")
    source.add_argument("--completion-tokens-query", help="PromQL: completion tokens per hour")
    token = source.add_mutually_exclusive_group()
    token.add_argument(
        "--bearer-token-env", metavar="VAR", help="environment variable holding a bearer token"
    )
    token.add_argument(
        "--bearer-token-file", metavar="FILE", help="file holding a bearer token (one line)"
    )
    source.add_argument(
        "--no-shift",
        action="store_true",
        help="store the sample at t as hour t (default: as hour t-1h, the hour it covers)",
    )
    source.add_argument(
        "--timeout",
        type=finite_float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds per HTTP request (default {DEFAULT_TIMEOUT_S:g})",
    )
    source.add_argument(
        "--lookback",
        type=whole_number,
        default=DEFAULT_LOOKBACK_HOURS,
        metavar="HOURS",
        help=f"how far back an import looks for missing hours (default {DEFAULT_LOOKBACK_HOURS})",
    )
    source.add_argument("--clear", action="store_true", help="remove the source")
    source.set_defaults(handler=cmd_series_source)


def cmd_series_source(args: argparse.Namespace) -> int:
    given = [name for name in SETTINGS if getattr(args, name) is not None]
    if args.clear:
        if given or args.bearer_token_env or args.bearer_token_file:
            raise InputError("--clear takes no other source options")
        return _clear(args)
    if not given and not (args.bearer_token_env or args.bearer_token_file):
        return _show(args)
    if args.url is None or args.requests_query is None:
        raise InputError("setting a source needs --url and --requests-query (it is replaced whole)")
    from app.sources.spec import SourceSpec

    spec = SourceSpec(
        url=args.url,
        requests_query=args.requests_query,
        prompt_tokens_query=args.prompt_tokens_query,
        completion_tokens_query=args.completion_tokens_query,
        bearer_token=_token(args),
        shift=not args.no_shift,
        timeout_s=args.timeout,
        lookback_hours=args.lookback,
    ).validate()
    return _set(args, spec)


def _token(args: argparse.Namespace) -> str | None:
    if args.bearer_token_env:
        token = os.environ.get(args.bearer_token_env, "").strip()
        if not token:
            raise InputError(f"environment variable {args.bearer_token_env} is not set or empty")
        return token
    if args.bearer_token_file:
        path = Path(args.bearer_token_file)
        if not path.is_file():
            raise InputError(f"bearer token file not found: {args.bearer_token_file}")
        token = path.read_text(encoding="utf-8", errors="replace").strip()
        if not token:
            raise InputError(f"bearer token file {args.bearer_token_file} is empty")
        return token
    return None


def _set(args: argparse.Namespace, spec: SourceSpec) -> int:
    from app import sources
    from app.common.names import validate_series_name
    from app.db import repository
    from app.ingest.writer import resolve_series_ids

    validate_series_name(args.series)
    database = open_db(args)
    try:
        with database.transaction() as session:
            resolve_series_ids(session, [args.series], create=True)
            series = repository.get_series(session, name=args.series)
            source = sources.set_source(session, series=series, spec=spec)
            shown = sources.describe(args.series, source)
    finally:
        database.dispose()
    print(f"source of {args.series} set; the hourly loop imports it ('gpucast schedule')")
    print("\n".join(_lines(shown)))
    return 0


def _show(args: argparse.Namespace) -> int:
    from app import sources
    from app.db import repository
    from app.db.models import SeriesSource

    database = open_db(args)
    try:
        with database.transaction() as session:
            series = repository.get_series(session, name=args.series)
            source = session.get(SeriesSource, series.id)
            shown = sources.describe(args.series, source) if source is not None else None
    finally:
        database.dispose()
    if shown is None:
        print(
            f"series {args.series} has no source; set one with 'gpucast series source "
            f"{args.series} --url URL --requests-query PROMQL'"
        )
        return 0
    print("\n".join(_lines(shown)))
    return 0


def _clear(args: argparse.Namespace) -> int:
    from app import sources

    database = open_db(args)
    try:
        with database.transaction() as session:
            sources.delete_source(session, name=args.series)
    finally:
        database.dispose()
    print(f"source of {args.series} removed; its stored hours stay")
    return 0


def _lines(shown: dict[str, Any]) -> list[str]:
    width = max(len(key) for key in shown)
    lines = []
    for key, value in shown.items():
        if hasattr(value, "strftime"):
            value = f"{value:%Y-%m-%d %H:%M:%S}Z"
        lines.append(f"  {key:<{width}}  {'-' if value is None else value}")
    return lines
