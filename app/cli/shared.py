"""What every sub-command needs to reach the database, the flags several of them share, and the
plan parameters of every command that serves a plan (one module the command modules all import,
so they never import each other)."""

from __future__ import annotations

import argparse
import errno
import os
import socket
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.common import options
from app.common.numbers import bounded_number
from app.errors import InputError

if TYPE_CHECKING:
    from pydantic import ValidationError

    from app.db import Database
    from app.settings import Settings


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings of a command: ``GPUCAST_*`` (and ``.env``) with ``--database-url`` on top.

    An invalid value is an :class:`InputError` naming the setting (one line, exit 2), never a
    traceback.
    """
    # imported when a command runs, not while the parser is built (start-up time)
    from pydantic import ValidationError

    from app.settings import get_settings

    overrides = {"database_url": args.database_url} if args.database_url else {}
    try:
        return get_settings(**overrides)
    except ValidationError as exc:
        raise InputError(_invalid_settings(exc, overridden=tuple(overrides))) from None
    except UnicodeDecodeError as exc:  # only the .env file is decoded here; os.environ is text
        raise InputError(
            f"invalid settings file .env: byte {exc.start} is not UTF-8; save it as UTF-8"
        ) from None


def open_db(args: argparse.Namespace, *, migrate: bool | None = None) -> Database:
    """Open the database; SQLite is migrated automatically on first use."""
    return open_configured(settings_from(args), migrate=migrate)


def open_configured(settings: Settings, *, migrate: bool | None = None) -> Database:
    """The database of ``settings``, every round trip under the bounds of CLI commands and jobs
    (``GPUCAST_DB_*``); migrated as ``GPUCAST_AUTO_MIGRATE`` says unless ``migrate`` is given."""
    from app.db import open_database

    database = open_database(settings.database_url, timeouts=settings.database_timeouts(jobs=True))
    try:
        database.ensure_schema(
            auto_migrate=settings.should_auto_migrate if migrate is None else migrate
        )
    except BaseException:
        database.dispose()  # no pooled connection left open behind the error
        raise
    return database


def _invalid_settings(exc: ValidationError, *, overridden: Collection[str]) -> str:
    """One line for every invalid setting. The value is never shown: it may be a password."""
    problems: dict[str, str] = {}
    for error in exc.errors(include_url=False, include_input=False):
        field = str(error["loc"][0]) if error["loc"] else ""
        if field in overridden:
            name = f"--{field.replace('_', '-')}"
        else:
            name = f"GPUCAST_{field.upper()}" if field else "GPUCAST_* settings"
        reason = str(error["msg"]).removeprefix("Value error, ")
        problems.setdefault(name, reason[:1].lower() + reason[1:])
    return "; ".join(f"invalid setting {name}: {reason}" for name, reason in problems.items())


class CommandFailed(Exception):
    """A command that cannot do its work for a reason outside its input (a port already in
    use): one line, exit code 1."""


def listening(host: str, port: int, *, command: str) -> socket.socket:
    """A socket bound to ``host:port`` before any work is done, so a taken port is said at
    once (exit 1, with the option that changes it) and nothing can take it meanwhile."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise InputError(f"--host {host!r} is not an address this machine has: {exc}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CommandFailed(
                f"port {port} on {host} is already in use (another gpucast or server?); "
                f"choose another with --port, e.g. gpucast {command} --port {port + 1}"
            ) from None
        raise CommandFailed(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


def serve(settings: Settings, sock: socket.socket) -> None:
    """Serve the API on the bound socket ``sock`` (:func:`listening`)."""
    import uvicorn

    from app.api import create_app
    from app.db import open_database

    with sock:  # closed however serving ends, also when the app cannot be built
        # the database the app's start-up opens, checked here first: an unreachable server,
        # a file that is not a database or an outdated schema is one line and its exit code
        # (app.cli.main), not uvicorn's traceback of a failed start-up
        database = open_database(settings.database_url, timeouts=settings.database_timeouts())
        try:
            database.ensure_schema(auto_migrate=settings.should_auto_migrate)
        finally:
            database.dispose()
        app = create_app(settings)
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        base = f"http://{shown}:{port}"
        print(f"gpucast API on {base}  (docs: {base}/docs)", flush=True)
        config = uvicorn.Config(app, log_level="warning")
        uvicorn.Server(config).run(sockets=[sock])


# -- flags shared by several command modules --------------------------------------------------


def number(text: str | None, flag: str, *, whole: bool = False) -> Any:
    """The number a flag was given as text (None stays None); an InputError names the flag."""
    if text is None:
        return None
    if whole:
        return bounded_number(text, what=flag, whole=True)
    try:
        return float(text)  # nan and inf go on to the caller's own range rule, which names it
    except ValueError:
        raise InputError(f"{flag} must be a number, not {text!r}") from None


def finite_float(text: str) -> float:
    """argparse ``type`` for a number flag: finite and of a size gpucast can compute with
    (the flag's own range is checked where it is used); beyond that argparse exits 2."""
    try:
        return float(bounded_number(text, what="the value"))
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def whole_number(text: str) -> int:
    """argparse ``type`` for a count flag: like :func:`finite_float`, and whole."""
    try:
        return int(bounded_number(text, what="the value", whole=True))
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_slo_arguments(
    parser: argparse.ArgumentParser, *, overrides: str = "", required: bool = False
) -> None:
    """``--ttft-p95-s`` and ``--tpot-p95-s``: a p95 latency SLO (both or neither). With
    ``required`` the help lists them as required (the command checks them: one line, exit 2);
    the command's usage line states them without brackets."""
    target: Any = parser.add_argument_group("the SLO (required)") if required else parser
    target.add_argument(
        "--ttft-p95-s",
        metavar="S",
        help=f"p95 time-to-first-token limit in seconds{overrides} (with --tpot-p95-s)",
    )
    target.add_argument(
        "--tpot-p95-s",
        metavar="S",
        help=f"p95 time-per-output-token limit in seconds{overrides} (with --ttft-p95-s)",
    )


def slo_from(args: argparse.Namespace) -> Any:
    """The SLO of ``--ttft-p95-s`` / ``--tpot-p95-s`` (an ``app.profiles.Slo``), or None."""
    from app.profiles import slo_of

    return slo_of(
        number(args.ttft_p95_s, "--ttft-p95-s"), number(args.tpot_p95_s, "--tpot-p95-s"), what="--"
    )


# -- the plan parameters of every command that serves a plan ---------------------------------

HPA_TOLERANCE_HELP_CLI = (
    "the HPA's tolerance on the plan trigger: written into the ScaledObject and modelled by "
    "band auto and the replay (default 0; needs KEDA >= 2.18 and Kubernetes >= 1.35, or "
    "1.33-1.34 with the HPAConfigurableTolerance gate); 'none' for older KEDA (writes none, "
    "plans for Kubernetes' 10 %%), 0.1 for a cluster that keeps the 10 %% band"
)
BANDS = ("auto", "yhat", "hi_80", "hi_95", "q50", "q60", "q70", "q80", "q90", "q95", "q99")


def add_plan_parameters(parser: argparse.ArgumentParser) -> None:
    """The plan parameter flags (band, risk target, formula, schedule rules) of every command
    that serves a plan; :func:`plan_params` reads them back."""
    parser.add_argument(
        "--band",
        choices=BANDS,
        default="auto",
        help="forecast column sized for; " + options.band_auto_help("--max-over-capacity"),
    )
    parser.add_argument(
        "--max-over-capacity",
        type=finite_float,
        default=options.MAX_OVER_CAPACITY,
        help="band auto's risk target: share of time over capacity (default %(default)s)",
    )
    parser.add_argument(
        "--no-reactive-backstop",
        dest="reactive_backstop",
        action="store_false",
        help="calibrate band auto for the plan trigger alone (default: for a fleet that also "
        "runs the reactive trigger, --reactive-query)",
    )
    parser.add_argument(
        "--utilization-target",
        type=finite_float,
        default=options.UTILIZATION_TARGET,
        help="share of a GPU's measured throughput planned for, in (0, 1] (default %(default)s)",
    )
    parser.add_argument(
        "--safety-factor",
        type=finite_float,
        default=None,
        help="multiplies the sized load (default: 1.0 with band auto, whose calibrated "
        "headroom is the margin; "
        f"{options.SAFETY_FACTOR:g} with an explicit band); given with auto it stacks",
    )
    parser.add_argument(
        "--min-gpus", type=whole_number, default=1, help="floor in every hour (>= 1)"
    )
    parser.add_argument("--max-gpus", type=whole_number, default=None, help="GPU quota")
    parser.add_argument(
        "--cold-start-s",
        type=whole_number,
        default=300,
        help="seconds from ordering to serving (300)",
    )
    parser.add_argument(
        "--scale-down-hold-s",
        type=whole_number,
        default=1800,
        help="sustained lower demand before scaling down (1800)",
    )
    parser.add_argument("--hpa-tolerance", default="0", help=HPA_TOLERANCE_HELP_CLI)


@contextmanager
def flags_named(flags: dict[str, str]) -> Iterator[None]:
    """An InputError that opens with an API field's name opens with its flag instead."""
    try:
        yield
    except InputError as exc:
        message = str(exc)
        for field, flag in flags.items():
            if message.startswith(f"{field} "):
                raise InputError(flag + message[len(field) :]) from None
        raise


def plan_params(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from app.plans import PlanParams
    from app.plans.params import check_max_over_capacity, parse_hpa_tolerance

    with flags_named({"max_over_capacity": "--max-over-capacity"}):
        check_max_over_capacity(args.max_over_capacity)
    if not 0 < args.utilization_target <= 1:
        raise InputError("--utilization-target must be in (0, 1]")
    if args.safety_factor is not None and not 1 <= args.safety_factor <= 10:
        raise InputError("--safety-factor must be between 1 and 10")
    if args.min_gpus < 1:
        raise InputError("--min-gpus must be >= 1 (a serving fleet never has zero GPUs)")
    if args.max_gpus is not None and args.max_gpus < args.min_gpus:
        raise InputError(f"--max-gpus {args.max_gpus} is below --min-gpus {args.min_gpus}")
    for flag, value in (
        ("--cold-start-s", args.cold_start_s),
        ("--scale-down-hold-s", args.scale_down_hold_s),
    ):
        if not 0 <= value <= 3600:
            raise InputError(f"{flag} must be between 0 and 3600, got {value}")
    return PlanParams(
        band=args.band,
        utilization_target=args.utilization_target,
        safety_factor=args.safety_factor,
        min_gpus=args.min_gpus,
        max_gpus=args.max_gpus,
        cold_start_s=args.cold_start_s,
        scale_down_hold_s=args.scale_down_hold_s,
        max_over_capacity=args.max_over_capacity,
        reactive_backstop=args.reactive_backstop,
        hpa_tolerance=parse_hpa_tolerance(args.hpa_tolerance),
    )


#: A profile's figures for the physical ceilings of its SLO capacity, by field: the flag
#: (default: the catalog's figure for the model and GPU names)
PHYSICS_FLAGS = {
    "parameters": "--parameters",
    "context_length_tokens": "--context-length",
    "peak_tflops": "--peak-tflops",
    "memory_bandwidth_gb_per_s": "--memory-bandwidth-gb-per-s",
}
_PHYSICS_HELP = {
    "parameters": "the model's parameter count (default: known by the model name)",
    "context_length_tokens": "the model's context length in tokens (default: known by name)",
    "peak_tflops": "one GPU's peak dense TFLOPS (default: the GPU catalog)",
    "memory_bandwidth_gb_per_s": "one GPU's memory bandwidth, GB/s (default: the GPU catalog)",
}


def add_physics_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of a profile's physical ceilings."""
    for dest, flag in PHYSICS_FLAGS.items():
        parser.add_argument(flag, dest=dest, metavar="X", help=_PHYSICS_HELP[dest])


def physics_values(args: argparse.Namespace) -> dict[str, Any]:
    """The physical ceilings' figures the flags give (None where not given)."""
    return {
        dest: number(getattr(args, dest), flag, whole=dest == "context_length_tokens")
        for dest, flag in PHYSICS_FLAGS.items()
    }


def add_token_arguments(parser: argparse.ArgumentParser) -> None:
    """A Prometheus source's bearer token, from an environment variable or a file."""
    token = parser.add_mutually_exclusive_group()
    token.add_argument(
        "--bearer-token-env", metavar="VAR", help="environment variable holding a bearer token"
    )
    token.add_argument(
        "--bearer-token-file", metavar="FILE", help="file holding a bearer token (one line)"
    )


def add_connection_arguments(parser: argparse.ArgumentParser, *, lookback: str) -> None:
    """A Prometheus source's --timeout and --lookback (``lookback``: what it means here)."""
    parser.add_argument(
        "--timeout",
        type=finite_float,
        default=options.SOURCE_TIMEOUT_S,
        help=f"seconds per HTTP request (default {options.SOURCE_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--lookback",
        type=whole_number,
        default=options.SOURCE_LOOKBACK_HOURS,
        metavar="HOURS",
        help=f"{lookback} (default {options.SOURCE_LOOKBACK_HOURS})",
    )


def bearer_token_from(args: argparse.Namespace) -> str | None:
    """The token --bearer-token-env or --bearer-token-file names, None without either."""
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


def shown_lines(shown: dict[str, Any]) -> list[str]:
    """A source as shown by the API, one ``key  value`` line each (times in UTC)."""
    width = max(len(key) for key in shown)
    lines = []
    for key, value in shown.items():
        if hasattr(value, "strftime"):
            value = f"{value:%Y-%m-%d %H:%M:%S}Z"
        lines.append(f"  {key:<{width}}  {'-' if value is None else value}")
    return lines
