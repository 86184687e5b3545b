"""``gpucast series source``: set, show or clear where the hourly loop imports a series from."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from app.cli.shared import (
    add_connection_arguments,
    add_token_arguments,
    bearer_token_from,
    open_db,
    shown_lines,
)
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
    add_token_arguments(source)
    source.add_argument(
        "--no-shift",
        action="store_true",
        help="store the sample at t as hour t (default: as hour t-1h, the hour it covers)",
    )
    add_connection_arguments(source, lookback="how far back an import looks for missing hours")
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
        bearer_token=bearer_token_from(args),
        shift=not args.no_shift,
        timeout_s=args.timeout,
        lookback_hours=args.lookback,
    ).validate()
    return _set(args, spec)


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
    print("\n".join(shown_lines(shown)))
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
    print("\n".join(shown_lines(shown)))
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
