"""Sub-commands: plan (tomorrow's GPU plan, or the KEDA object that carries it out) and
backtest (the plan replay)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.cli.shared import (
    add_plan_parameters,
    finite_float,
    flags_named,
    plan_params,
    whole_number,
)
from app.common.options import DEFAULT_PUBLIC_URL, FALLBACK_BEHAVIOR, FALLBACK_BEHAVIORS
from app.errors import InputError


def _add_plan_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("series", help="series name")
    parser.add_argument(
        "--profile",
        help="GPU profile name (default: the series' deployment, else the only profile)",
    )
    add_plan_parameters(parser)


def register(sub: Any) -> None:
    plan = sub.add_parser(
        "plan",
        help="tomorrow's hourly GPU plan from the latest forecast",
        description="The executed GPU schedule of a series (peak factor, formula, cold-start "
        "lead, scale-down hold, floor and quota), its cost against a static fleet priced the "
        "same way, or with --kubernetes a KEDA ScaledObject that carries it out.",
    )
    _add_plan_options(plan)
    plan.add_argument(
        "--ttft-p95-s",
        type=finite_float,
        help="p95 time-to-first-token SLO in seconds (with --tpot-p95-s; default: the "
        "deployment's): a load-test profile is sized at the SLO capacity of each hour's mix",
    )
    plan.add_argument("--tpot-p95-s", type=finite_float, help="p95 time-per-output-token SLO (s)")
    plan.add_argument(
        "--compare-profiles",
        metavar="P1,P2,...",
        help="plan the series on each profile and mark the cheapest that meets the SLO",
    )
    plan.add_argument("--json", action="store_true", help="print the capacity API's JSON")
    plan.add_argument(
        "--kubernetes", action="store_true", help="print a KEDA ScaledObject instead of the table"
    )
    plan.add_argument(
        "--mode",
        choices=("live", "cron"),
        default="live",
        help="live: a trigger polling desired-replicas; cron: daily cron triggers "
        "(default %(default)s)",
    )
    plan.add_argument(
        "--namespace", default="default", help="namespace of the object (default %(default)s)"
    )
    plan.add_argument("--deployment", help="Deployment to scale (default: from the series name)")
    plan.add_argument(
        "--gpucast-url",
        help="base URL at which KEDA reaches gpucast (default: GPUCAST_PUBLIC_URL, "
        f"else {DEFAULT_PUBLIC_URL})",
    )
    plan.add_argument("--auth-secret", help="TriggerAuthentication holding a gpucast API key")
    plan.add_argument("--reactive-query", help="PromQL of a live serving metric (fleet total)")
    plan.add_argument("--reactive-target", type=finite_float, help="that metric per replica")
    plan.add_argument("--prometheus-url", help="Prometheus for the reactive trigger")
    plan.add_argument(
        "--timezone", default="UTC", help="time zone of cron triggers (default %(default)s)"
    )
    _add_fallback_behavior(plan)
    plan.set_defaults(handler=cmd_plan)

    backtest = sub.add_parser(
        "backtest",
        help="replay gpucast's plans (and four other policies) against the real load",
        description="At every nightly run of the last DAYS days, rebuild the forecast and the "
        "plan gpucast would have served from data strictly before it; replay the actual load "
        "against the capacity each policy would have provided (cold start included). Load: "
        "the stored hours, or --load FILE (CSV: timestamp, requests_per_s or tokens_per_s, "
        "one regular step of 1 s to 1 h). Exit codes: 0 ok, 2 bad input, 3 database unavailable.",
    )
    _add_plan_options(backtest)
    backtest.add_argument("--days", type=whole_number, default=7, help="days replayed (default 7)")
    backtest.add_argument("--load", help="CSV of the actual load at a finer step")
    backtest.add_argument(
        "--nightly-hour",
        type=whole_number,
        default=2,
        help="UTC hour of the nightly run (default %(default)s)",
    )
    backtest.add_argument("--models", help="comma-separated candidate models (default: all)")
    backtest.add_argument("--json", action="store_true", help="print the backtest object")
    backtest.add_argument(
        "--tradeoff",
        action="store_true",
        help="band auto: also replay risk targets 0.1/0.5/1/2/5 %% and print what each costs",
    )
    _add_fallback_behavior(backtest)
    backtest.set_defaults(handler=cmd_backtest)


def _add_fallback_behavior(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fallback-behavior",
        choices=FALLBACK_BEHAVIORS,
        default=FALLBACK_BEHAVIOR,
        help="the ScaledObject's fallback.behavior, and what the replay runs: what a trigger "
        "whose source fails (an empty reactive query, gpucast unreachable) answers from its "
        "4th failed poll: static (the fallback replicas: the expected P99 peak), "
        "currentReplicas (the fleet holds where it is; KEDA >= 2.17) or "
        "currentReplicasIfHigher; auto: currentReplicas beside a reactive trigger, else "
        "static (default %(default)s)",
    )


def cmd_plan(args: argparse.Namespace) -> int:
    import capacity
    from app import plans
    from app.cli.shared import open_db, settings_from
    from app.common.options import resolved_fallback_behavior
    from app.ingest.timestamps import validate_timezone
    from app.plans.auto_band import OPERATOR
    from app.plans.kubernetes import (
        backstop_warning,
        desired_replicas_url,
        k8s_name,
        max_replicas,
        pinned,
        reactive_trigger,
        scaled_object_error,
    )
    from app.plans.text import plan_lines
    from app.profiles.deployments import slo_of

    params = plan_params(args)
    slo = slo_of(args.ttft_p95_s, args.tpot_p95_s, what="--")
    if args.compare_profiles is not None:
        return _compare(args, params, slo)
    reactive = reactive_trigger(args.reactive_query, args.reactive_target, args.prometheus_url)
    timezone = validate_timezone(args.timezone) or "UTC"
    database = open_db(args)
    try:
        # a read transaction: a band auto replay takes no write lock (its choice is stored
        # in a short write of its own); the operator's calibrations are not bounded
        with database.read_transaction() as session:
            plan = plans.series_plan(
                session,
                series_name=args.series,
                profile_name=args.profile,
                params=params,
                slo=slo,
                calibrated_by=OPERATOR,
            )
    finally:
        database.dispose()
    if args.kubernetes:
        name = k8s_name(args.series)
        try:
            text = capacity.keda_scaled_object(
                plan.plan,
                name=name,
                namespace=args.namespace,
                deployment=args.deployment or name,
                mode=args.mode,
                desired_replicas_url=desired_replicas_url(
                    args.gpucast_url or settings_from(args).public_url,
                    args.series,
                    pinned(plan),
                    params,
                    slo=slo,
                ),
                auth_ref=args.auth_secret,
                reactive=reactive,
                timezone=timezone,
                hpa_tolerance=params.hpa_tolerance,
                max_replicas=max_replicas(plan),
                fallback_replicas=plans.fallback_replicas(plan),
                fallback_behavior=resolved_fallback_behavior(
                    args.fallback_behavior, reactive=reactive is not None
                ),
            )
        except capacity.CapacityError as exc:
            raise scaled_object_error(exc, params, reactive) from exc
        warning = backstop_warning(params, reactive)
        if warning:
            print(f"gpucast: warning: {warning}", file=sys.stderr)
        print(text, end="")
        return 0
    if args.json:
        print(plan.as_json().decode())
        return 0
    print("\n".join(plan_lines(plan)))
    return 0


def _compare(args: argparse.Namespace, params: Any, slo: Any) -> int:
    from app.cli.shared import open_db
    from app.plans.compare import compare_profiles, profile_names
    from app.plans.text import compare_lines

    if args.profile is not None or args.kubernetes:
        raise InputError("--compare-profiles plans on each profile; drop --profile/--kubernetes")
    names = profile_names(args.compare_profiles)
    database = open_db(args)
    try:
        with database.transaction() as session:
            result = compare_profiles(
                session, series_name=args.series, profiles=names, params=params, slo=slo
            )
    finally:
        database.dispose()
    if args.json:
        print(json.dumps(result, default=_json_default, allow_nan=False))
    else:
        print("\n".join(compare_lines(result)))
    return 0


def cmd_backtest(args: argparse.Namespace) -> int:
    from app.cli.shared import open_db
    from app.plans.backtest import read_load_csv, run_backtest
    from app.plans.replay import ReplayOptions, candidate_models
    from app.plans.text import backtest_lines

    params = plan_params(args)
    options = ReplayOptions(
        days=args.days,
        nightly_hour_utc=args.nightly_hour,
        models=candidate_models(args.models),
        tradeoff=args.tradeoff,
        fallback_behavior=args.fallback_behavior,
    )
    with flags_named(
        {
            "days": "--days",
            "nightly_hour_utc": "--nightly-hour",
            "fallback_behavior": "--fallback-behavior",
        }
    ):
        options.validate()
    load = None
    if args.load:
        path = Path(args.load)
        if not path.is_file():
            raise InputError(f"file not found: {args.load}")
        load = read_load_csv(path.read_bytes(), name=path.name)
    database = open_db(args)
    try:
        result = run_backtest(
            database,
            series_name=args.series,
            profile_name=args.profile,
            params=params,
            options=options,
            load=load,
        )
    finally:
        database.dispose()
    if args.json:
        print(json.dumps(result, default=_json_default, allow_nan=False))
    else:
        print("\n".join(backtest_lines(result)))
    return 0


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(type(value).__name__)
