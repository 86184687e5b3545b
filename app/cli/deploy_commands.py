"""``gpucast series deploy``: set, show or clear the GPU profile (and p95 latency SLO) that
serves a series, which every plan surface then uses without being told the profile."""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.shared import add_slo_arguments, open_db, slo_from
from app.errors import InputError


def register(series_sub: Any) -> None:
    deploy = series_sub.add_parser(
        "deploy",
        help="set, show or clear the GPU profile and latency SLO that serve a series",
        description="With --profile: serve the series with that GPU profile (and, with "
        "--ttft-p95-s and --tpot-p95-s, that p95 latency SLO), replacing its deployment. "
        "'gpucast plan', capacity, desired-replicas, KEDA, Grafana, the overview, accuracy and "
        "pools then use it without --profile. An SLO needs a load-test profile that meets it at "
        "the series' mixes at the lowest load (else exit 2, nothing stored). With no options: "
        "show it. With --clear: remove it. Exit codes: 0 ok, 2 bad input or unknown "
        "series/profile, 3 database unavailable.",
    )
    deploy.add_argument("series", help="series name")
    deploy.add_argument("--profile", help="GPU profile that serves the series")
    add_slo_arguments(deploy)
    deploy.add_argument("--clear", action="store_true", help="remove the series' deployment")
    deploy.set_defaults(handler=cmd_series_deploy)


def cmd_series_deploy(args: argparse.Namespace) -> int:
    slo = slo_from(args)
    if args.clear:
        if args.profile is not None or slo is not None:
            raise InputError("--clear takes no --profile or SLO options")
        return _clear(args)
    if args.profile is None:
        if slo is not None:
            raise InputError("setting a deployment needs --profile (it is replaced whole)")
        return _show(args)
    from app.plans.deployment import deploy

    database = open_db(args)
    try:
        with database.transaction() as session:
            deployment = deploy(
                session, series_name=args.series, profile_name=args.profile, slo=slo
            )
    finally:
        database.dispose()
    print(f"{args.series} is served by {deployment_text(deployment)}")
    return 0


def deployment_text(deployment: Any) -> str:
    """``h100-70b`` or ``h100-70b at p95 TTFT ≤ 2 s, p95 TPOT ≤ 0.05 s``."""
    slo = deployment.slo
    if slo is None:
        return f"GPU profile {deployment.profile} (no latency SLO)"
    return (
        f"GPU profile {deployment.profile} at p95 TTFT ≤ {slo.ttft_p95_s:g} s, "
        f"p95 TPOT ≤ {slo.tpot_p95_s:g} s"
    )


def _show(args: argparse.Namespace) -> int:
    from app import profiles

    database = open_db(args)
    try:
        with database.transaction() as session:
            deployment = profiles.find_deployment(session, series_name=args.series)
    finally:
        database.dispose()
    if deployment is None:
        print(
            f"series {args.series} has no deployment; set one with 'gpucast series deploy "
            f"{args.series} --profile P [--ttft-p95-s S --tpot-p95-s S]'"
        )
        return 0
    print(f"{args.series} is served by {deployment_text(deployment)}")
    return 0


def _clear(args: argparse.Namespace) -> int:
    from app import profiles

    database = open_db(args)
    try:
        with database.transaction() as session:
            profiles.clear_deployment(session, series_name=args.series)
    finally:
        database.dispose()
    print(f"deployment of {args.series} removed; the series and the profile stay")
    return 0
