"""One source for each default and limit (app.common.options): every CLI option has help, the help
states the default the parser really uses, and the REST API and README say the same."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import forecasting
from app.cli import build_parser
from app.common import options
from app.plans import PlanParams

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def parsers(
    parser: argparse.ArgumentParser, path: str = "gpucast"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, f"{path} {name}")


def options_of(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            yield action


ALL = [(path, action) for path, parser in parsers(build_parser()) for action in options_of(parser)]


def label(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest


@pytest.mark.parametrize(("path", "action"), ALL, ids=[f"{p} {label(a)}" for p, a in ALL])
def test_every_option_has_help(path: str, action: argparse.Action) -> None:
    assert action.help, f"{path} {label(action)} has no help"


def _stated_default(action: argparse.Action) -> bool:
    text = str(action.help) % {**vars(action), "prog": "gpucast"}
    default = action.default
    shown = {str(default)} | ({f"{default:g}"} if isinstance(default, float) else set())
    return any(value in text for value in shown)


VALUED = [
    (path, action)
    for path, action in ALL
    if action.option_strings
    and action.nargs != 0  # flags: their default is their absence
    and action.help is not argparse.SUPPRESS
    and action.default not in (None, [], argparse.SUPPRESS)
]


@pytest.mark.parametrize(("path", "action"), VALUED, ids=[f"{p} {label(a)}" for p, a in VALUED])
def test_the_help_states_the_default_the_parser_uses(path: str, action: argparse.Action) -> None:
    assert _stated_default(action), f"{path} {label(action)}: help omits {action.default!r}"


def test_a_help_claiming_a_number_the_parser_does_not_use_is_caught() -> None:
    parser = argparse.ArgumentParser()
    wrong = parser.add_argument("--windows", type=int, default=5, help="windows (default 3)")
    assert not _stated_default(wrong)


@pytest.mark.parametrize("path", [path for path, _ in parsers(build_parser())])
def test_help_pages_print_no_doubled_percent(path: str) -> None:
    parser = dict(parsers(build_parser()))[path]
    assert "%%" not in parser.format_help()


def test_library_and_plan_defaults_are_the_options() -> None:
    assert forecasting.DEFAULT_WINDOWS == options.FORECAST_WINDOWS
    assert PlanParams().utilization_target == options.UTILIZATION_TARGET
    assert PlanParams(band="hi_80").sizing_safety_factor == options.SAFETY_FACTOR
    assert PlanParams().band == options.PLOT_BAND


def _query(openapi: dict, path: str, name: str) -> dict:  # type: ignore[type-arg]
    parameters = openapi["paths"][path]["post" if "forecast" in path else "get"]["parameters"]
    schema = next(p["schema"] for p in parameters if p["name"] == name)
    return next((s for s in schema.get("anyOf", [schema]) if s.get("type") == "integer"), schema)


def test_rest_limits_are_the_options(client: TestClient) -> None:
    openapi = client.get("/openapi.json").json()
    days = _query(openapi, "/v1/series/{name}/plot.png", "days")
    assert (days["minimum"], days["maximum"]) == (options.PLOT_DAYS_MIN, options.PLOT_DAYS_MAX)
    windows = _query(openapi, "/v1/series/{name}/forecast", "windows")
    assert windows["maximum"] == options.FORECAST_WINDOWS_MAX


def test_the_cli_refuses_the_days_the_api_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    db = ["--database-url", f"sqlite:///{tmp_path / 'x.db'}"]
    out = tmp_path / "c.png"
    assert main([*db, "plot", "s", "-o", str(out), "--days", str(options.PLOT_DAYS_MAX + 1)]) == 2
    limits = f"between {options.PLOT_DAYS_MIN} and {options.PLOT_DAYS_MAX}"
    assert f"--days must be {limits}" in capsys.readouterr().err


NUMBERS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}


def test_the_readme_states_the_options() -> None:
    plot_days = f"| `days` | {options.PLOT_DAYS} | days of history, "
    assert f"{plot_days}{options.PLOT_DAYS_MIN}–{options.PLOT_DAYS_MAX} |" in README
    assert f"| `band` | `{options.PLOT_BAND}` |" in README
    assert f"on {NUMBERS[options.FORECAST_WINDOWS]} daily folds" in README
    assert f"| `GPUCAST_PUBLIC_URL` | `{options.DEFAULT_PUBLIC_URL}` |" in README
    stated = re.search(
        r"`utilization_target` \(([\d.]+)\), `safety_factor` \(1.0 with auto, else ([\d.]+)\)",
        README,
    )
    assert stated
    assert (float(stated[1]), float(stated[2])) == (
        options.UTILIZATION_TARGET,
        options.SAFETY_FACTOR,
    )
