"""The ``gpucast`` command line. Errors print one line; bad input exits with code 2."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from app.errors import AppError, InputError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_BROKEN_PIPE = 128 + 13  # as a command ended by SIGPIPE (``yes | head -1``)

Handler = Callable[[argparse.Namespace], int]


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``argv``, only the command it names is built in full (and its module
    imported), so that start-up stays fast. Without, every command is built."""
    from app.cli import registry

    parser = argparse.ArgumentParser(
        prog="gpucast",
        description="Forecast LLM inference load and turn it into GPU counts and costs.",
        epilog="--database-url and -v may also follow the command "
        "(gpucast demo --no-serve --database-url URL).",
    )
    parser.add_argument("--database-url", help="override GPUCAST_DATABASE_URL")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug output")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if argv is None:
        registry.register_all(sub)
    else:
        registry.register(sub, argv)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        _check_arguments(argv)
    except InputError as exc:
        return _fail(exc, EXIT_USAGE)
    argv = global_options_first(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    handler: Handler = args.handler
    from sqlalchemy.exc import DBAPIError, OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeoutError

    from app.cli.shared import CommandFailed

    try:
        code = handler(args)
        sys.stdout.flush()  # a reader gone (| head -1) shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except CommandFailed as exc:
        return _fail(exc, EXIT_FAILURE)
    except KeyboardInterrupt:
        print("gpucast: interrupted", file=sys.stderr)
        return 130
    except (InputError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        return _fail(exc, EXIT_USAGE)
    except OverflowError:  # the net under app.common.numbers: a number too large to compute with
        return _fail(ValueError("a number given is too large; use values below 1e15"), EXIT_USAGE)
    except AppError as exc:
        code = EXIT_UNAVAILABLE if exc.status_code == 503 else EXIT_USAGE
        return _fail(exc, code)
    except PoolTimeoutError as exc:
        return _unavailable(str(exc))
    except DBAPIError as exc:
        # OperationalError, or any error that broke the connection (the server ended the
        # session, e.g. its idle-in-transaction timeout) - if the database is unreachable now.
        reason = str(exc.orig) if exc.orig else type(exc).__name__
        if "file is not a database" in reason:  # SQLite's answer for a --database-url mistake
            return _fail(
                InputError(f"--database-url names a file that is not a SQLite database ({reason})"),
                EXIT_USAGE,
            )
        if not isinstance(exc, OperationalError) and not exc.connection_invalidated:
            raise
        if not _unreachable(args, exc):
            first_line = reason.strip().splitlines()[0] if reason.strip() else "no reason given"
            print(f"gpucast: error: internal database error: {first_line}", file=sys.stderr)
            return EXIT_FAILURE
        return _unavailable(reason)


GLOBAL_VALUED = ("--database-url",)
GLOBAL_FLAGS = ("-v", "--verbose")


def global_options_first(argv: Sequence[str]) -> list[str]:
    """``argv`` with the global options that follow the command moved before it, so they
    work wherever a user types them (``gpucast demo --no-serve --database-url URL``). No
    command has options of these names; everything after ``--`` stays where it is."""
    from app.cli.registry import chosen_command

    command = chosen_command(argv)
    if command is None:
        return list(argv)
    at = list(argv).index(command)
    moved: list[str] = []
    kept: list[str] = list(argv[: at + 1])
    rest = list(argv[at + 1 :])
    while rest:
        token = rest.pop(0)
        if token == "--":
            kept += [token, *rest]
            break
        if token in GLOBAL_FLAGS or token.split("=", 1)[0] in GLOBAL_VALUED and "=" in token:
            moved.append(token)
        elif token in GLOBAL_VALUED and rest:
            moved += [token, rest.pop(0)]
        else:
            kept.append(token)
    return moved + kept


def _reader_gone() -> int:
    """The output's reader closed the pipe (``gpucast series list | head -1``): stop quietly,
    as command-line tools do, with stdout pointed at /dev/null so that the final flush at
    exit cannot fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (captured)
        pass
    return EXIT_BROKEN_PIPE


def _unreachable(args: argparse.Namespace, error: BaseException) -> bool:
    """Exit 3 means the database cannot be reached: checked with a fresh round trip."""
    from app.cli.shared import settings_from
    from app.db import is_unavailable, open_database

    settings = settings_from(args)
    database = open_database(settings.database_url, timeouts=settings.database_timeouts(jobs=True))
    try:
        return is_unavailable(error, database)
    finally:
        database.dispose()


def _unavailable(reason: str) -> int:
    first_line = reason.strip().splitlines()[0] if reason.strip() else "no reason given"
    print(f"gpucast: error: database unavailable: {first_line}", file=sys.stderr)
    return EXIT_UNAVAILABLE


def _check_arguments(argv: Sequence[str]) -> None:
    """Every argument passes the text rules (app.common.names) before any command runs: invalid
    UTF-8 in argv arrives as unpaired surrogates, which no database can store."""
    if all(argument.isascii() and argument.isprintable() for argument in argv):
        return  # printable ASCII passes every text rule; spares importing pydantic at start-up
    from app.common.names import check_text

    # The argument itself is not shown: it may be a URL with a password.
    for position, argument in enumerate(argv, start=1):
        check_text(argument, what=f"command-line argument {position}")


def _fail(exc: BaseException, code: int) -> int:
    message = str(exc)
    if isinstance(exc, OSError) and exc.filename:
        message = f"{exc.strerror}: {exc.filename}"
    print(f"gpucast: error: {message}", file=sys.stderr)
    return code
