"""What every sub-command needs to reach the database, and the flags several of them share
(one module the command modules all import, so they never import each other)."""

from __future__ import annotations

import argparse
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

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
    database.ensure_schema(
        auto_migrate=settings.should_auto_migrate if migrate is None else migrate
    )
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


def add_slo_arguments(parser: argparse.ArgumentParser, *, overrides: str = "") -> None:
    """``--ttft-p95-s`` and ``--tpot-p95-s``: a p95 latency SLO (both or neither)."""
    parser.add_argument(
        "--ttft-p95-s",
        metavar="S",
        help=f"p95 time-to-first-token limit in seconds{overrides} (with --tpot-p95-s)",
    )
    parser.add_argument(
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
