"""Which module registers each top-level command, so that ``gpucast`` imports only what the
command it runs needs (``gpucast --help`` imports none of them).

A command module keeps its ``register(sub)`` function; adding a top-level command means adding
one row here (tests/app/test_cli_registry.py checks every module's commands are listed, with
the same help).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any, NamedTuple


class Command(NamedTuple):
    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "db": Command("app.cli.commands", "database administration"),
    "ingest": Command("app.cli.commands", "load history into the database"),
    "series": Command(
        "app.cli.commands", "list, show and delete series; set their sources and deployments"
    ),
    "events": Command("app.cli.event_commands", "business calendar: list, add, delete events"),
    "serve": Command("app.cli.commands", "run the HTTP API"),
    "demo": Command("app.cli.demo", "load a real sample, forecast it, plan GPUs, serve the API"),
    "forecast": Command(
        "app.cli.forecast_commands", "backtest, select and forecast series (the nightly job)"
    ),
    "schedule": Command(
        "app.cli.forecast_commands",
        "run the nightly forecast and the hourly import + refresh in-process (UTC)",
    ),
    "plan": Command("app.cli.plan_commands", "tomorrow's hourly GPU plan from the latest forecast"),
    "backtest": Command(
        "app.cli.plan_commands",
        "replay gpucast's plans (and four other policies) against the real load",
    ),
    "plot": Command(
        "app.cli.plot_commands",
        "chart a series as PNG: history, forecast with 80/95 %% bands, GPU plan",
    ),
    "pool": Command(
        "app.cli.pool_commands", "shared GPU pools: several series packed onto one fleet of nodes"
    ),
    "profile": Command(
        "app.cli.profile_commands",
        "GPU profiles: one tokens/s figure or a measured load-test table",
    ),
}

_VALUED_OPTIONS = ("--database-url",)


def chosen_command(argv: Sequence[str]) -> str | None:
    """The top-level command named in ``argv`` (None for ``--help`` alone or no command)."""
    skip_next = False
    for token in argv:
        if skip_next:
            skip_next = False
            continue
        if token == "--":
            return None
        if token.startswith("--"):
            option = token.split("=", 1)[0]
            # argparse accepts unambiguous prefixes (--database for --database-url).
            if len(option) > 2 and any(o.startswith(option) for o in _VALUED_OPTIONS):
                skip_next = "=" not in token
            continue
        if token.startswith("-"):
            continue
        return token
    return None


def register(sub: Any, argv: Sequence[str]) -> None:
    """Add every command to ``sub``: the one ``argv`` runs in full (its module imported), the
    others as one-line entries for ``--help``."""
    wanted = chosen_command(argv)
    for name, command in COMMANDS.items():
        if name != wanted:
            sub.add_parser(name, help=command.help, add_help=False)
    if wanted in COMMANDS:
        module = importlib.import_module(COMMANDS[wanted].module)
        module.register(_OnlyCommand(sub, wanted))


def register_all(sub: Any) -> None:
    """Every command in full (tests, documentation checks)."""
    for module_name in dict.fromkeys(c.module for c in COMMANDS.values()):
        importlib.import_module(module_name).register(sub)


class _OnlyCommand:
    """A sub-parsers action that keeps one command and drops the ones a module also registers."""

    def __init__(self, sub: Any, wanted: str) -> None:
        self._sub = sub
        self._wanted = wanted
        self._scratch = argparse.ArgumentParser(add_help=False).add_subparsers()

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        target = self._sub if name == self._wanted else self._scratch
        parser: argparse.ArgumentParser = target.add_parser(name, **kwargs)
        return parser
