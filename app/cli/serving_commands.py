"""``gpucast series serving-source``: set, show or clear where the hourly cycle measures a
deployment's production hours (the engine's serving metrics in Prometheus)."""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.shared import (
    add_connection_arguments,
    add_token_arguments,
    bearer_token_from,
    open_db,
    shown_lines,
)
from app.errors import InputError

NAMES = (
    ("ttft_histogram", "time-to-first-token histogram"),
    ("tpot_histogram", "time-per-output-token histogram"),
    ("requests_counter", "finished-requests counter"),
    ("prompt_tokens_counter", "prompt-tokens counter"),
    ("completion_tokens_counter", "generation-tokens counter"),
    ("running_gauge", "running-requests gauge, one series per replica"),
)
SETTINGS = ("url", *(name for name, _ in NAMES), "selector", "kube_deployment", "replicas_query")


def register(series_sub: Any) -> None:
    from app.sources.serving_spec import ENGINES

    serving = series_sub.add_parser(
        "serving-source",
        help="set, show or clear the serving metrics the hourly cycle measures a deployment by",
        description="With --url: set the deployed series' serving source (replacing any "
        "previous one); every hourly cycle then stores the closed hours its profile lacks as "
        "production hours: p95 TTFT and TPOT from the engine's histograms, tokens and "
        "requests from its counters, the hour's average replicas. Names not given take the "
        "engine's (--engine, default vllm). With no options: show it and its PromQL, "
        "credentials redacted. With --clear: remove it (the stored hours stay).",
    )
    serving.add_argument("series", help="series name (deployed on a profile)")
    serving.add_argument("--url", help="Prometheus base URL, e.g. http://prometheus:9090")
    serving.add_argument(
        "--engine",
        choices=ENGINES,
        default="vllm",
        help="whose series names are the defaults (default vllm)",
    )
    for name, what in NAMES:
        serving.add_argument(f"--{name.replace('_', '-')}", metavar="NAME", help=f"the {what}")
    serving.add_argument(
        "--selector",
        metavar="MATCHERS",
        help='label matchers added to every engine series, e.g. model_name="llama-3.1-70b"',
    )
    replicas = serving.add_mutually_exclusive_group()
    replicas.add_argument(
        "--kube-deployment",
        metavar="NAME",
        help="count replicas with kube-state-metrics (default: count the running gauges)",
    )
    replicas.add_argument(
        "--replicas-query", metavar="PROMQL", help="PromQL of the hour's average replicas"
    )
    add_token_arguments(serving)
    add_connection_arguments(
        serving, lookback="how far back an import looks for hours the profile lacks"
    )
    serving.add_argument("--clear", action="store_true", help="remove the serving source")
    serving.set_defaults(handler=cmd_serving_source)


def cmd_serving_source(args: argparse.Namespace) -> int:
    given = [name for name in SETTINGS if getattr(args, name) is not None]
    token = args.bearer_token_env or args.bearer_token_file
    if args.clear:
        if given or token:
            raise InputError("--clear takes no other serving-source options")
        return _clear(args)
    if not given and not token:
        return _show(args)
    if args.url is None:
        raise InputError("setting a serving source needs --url (it is replaced whole)")
    from app.sources.serving_spec import ServingSpec

    values = {name: getattr(args, name) for name in SETTINGS if getattr(args, name) is not None}
    spec = ServingSpec(
        **values,
        engine=args.engine,
        bearer_token=bearer_token_from(args),
        timeout_s=args.timeout,
        lookback_hours=args.lookback,
    ).validate()
    from app import sources

    database = open_db(args)
    try:
        with database.transaction() as session:
            source = sources.set_serving_source(session, series_name=args.series, spec=spec)
            shown = sources.describe_serving(args.series, source)
    finally:
        database.dispose()
    print(f"serving source of {args.series} set; the hourly cycle imports it ('gpucast schedule')")
    print("\n".join(_lines(shown)))
    return 0


def _show(args: argparse.Namespace) -> int:
    from app import sources

    database = open_db(args)
    try:
        with database.transaction() as session:
            shown = sources.describe_serving(
                args.series, sources.get_serving_source(session, series_name=args.series)
            )
    finally:
        database.dispose()
    print("\n".join(_lines(shown)))
    return 0


def _clear(args: argparse.Namespace) -> int:
    from app import sources

    database = open_db(args)
    try:
        with database.transaction() as session:
            sources.delete_serving_source(session, series_name=args.series)
    finally:
        database.dispose()
    print(f"serving source of {args.series} removed; its production hours stay")
    return 0


def _lines(shown: dict[str, Any]) -> list[str]:
    queries = shown.pop("queries")
    return shown_lines(shown) + [f"  {name}: {promql}" for name, promql in queries.items()]
