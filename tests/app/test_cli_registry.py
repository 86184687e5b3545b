"""The lazy command registry: every command listed once, ``gpucast --help`` imports no command
module (the start-up the operator waits for), each command still parses in full."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from app.cli import build_parser, registry


def _commands(parser: argparse.ArgumentParser) -> dict[str, str]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {choice.dest: str(choice.help) for choice in action._choices_actions}


def test_every_registered_command_is_in_the_registry_with_its_help() -> None:
    full = _commands(build_parser())
    assert full == {name: command.help for name, command in registry.COMMANDS.items()}


@pytest.mark.parametrize("name", sorted(registry.COMMANDS))
def test_each_command_builds_alone_with_its_options(name: str) -> None:
    lazy = build_parser([name])
    action = next(a for a in lazy._actions if isinstance(a, argparse._SubParsersAction))
    full = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert action.choices[name].format_help() == full.choices[name].format_help()


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["--help"], None),
        (["-v", "plan", "x"], "plan"),
        (["--database-url", "sqlite:///x.db", "series", "list"], "series"),
        (["--database-url=sqlite:///x.db", "db", "upgrade"], "db"),
        (["--database", "sqlite:///x.db", "pool", "list"], "pool"),
    ],
)
def test_the_chosen_command_is_found_past_top_level_options(
    argv: list[str], command: str | None
) -> None:
    assert registry.chosen_command(argv) == command


def test_help_imports_no_heavy_module() -> None:
    code = (
        "import sys\n"
        "from app.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('pandas', 'numpy', 'sqlalchemy', 'pydantic', 'fastapi',"
        " 'statsmodels', 'matplotlib', 'capacity', 'forecasting') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout
