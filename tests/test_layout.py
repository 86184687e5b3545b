"""The floor plan holds (docs/architecture.md): modules live in rooms named for what they hold.

- a module at the root of ``capacity/`` or ``app/`` needs a stated reason (``ROOT_MODULES``);
  ``capacity/`` holds exactly the documented families, each with a docstring and ``__all__``;
- no module in ``capacity/`` or ``app/`` is above 400 lines, except ``LONG_MODULES`` (each
  with its reason, and never above 500);
- no import circle between modules of ``forecasting``, ``capacity`` and ``app``;
- imports run one way: ``app -> capacity -> forecasting``; inside ``capacity`` each family
  imports only the families ``FAMILY_IMPORTS`` allows (and the root's ``errors`` and
  ``_checks``); inside ``app`` each unit imports only units of a lower ``APP_RANK``;
- the CLI's command modules import shared helpers from ``app.cli.shared`` only, never each
  other (a command registers its own actions' modules: ``SUBCOMMAND_MODULES``).

Every import is found by walking the syntax tree (function-level and TYPE_CHECKING imports
included), so a lazy import cannot hide an arrow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("forecasting", "capacity", "app")
MAX_LINES = 400
MAX_LINES_LISTED = 500

#: Modules allowed at a package root, with the reason they are not in a family.
ROOT_MODULES = {
    "capacity/__init__.py": "the library's stable public face: every family's names",
    "capacity/errors.py": "the exception tree every family raises",
    "capacity/_checks.py": "the parameter checks every family uses",
    "capacity/_words.py": "counted nouns (1 GPU, 2 GPUs) in the messages of every family",
    "app/__init__.py": "the service package and its version",
    "app/settings.py": "the app's face: the GPUCAST_* settings every entry point reads",
    "app/errors.py": "the app's face: the AppError tree every layer raises and the API maps",
}

#: capacity's families and the families each may import (besides errors and _checks).
FAMILY_IMPORTS: dict[str, set[str]] = {
    "sizing": set(),
    "measured": {"sizing"},
    "pools": {"sizing"},
    "kubernetes": {"sizing"},
    "simulation": {"sizing", "kubernetes"},
}
CAPACITY_SHARED = {"capacity.errors", "capacity._checks", "capacity._words"}

#: app's units (sub-packages and root modules) bottom up: a unit imports only lower ranks.
APP_RANK = {
    "app": 0,
    "app.data": 0,
    "app.errors": 0,
    "app.common": 1,
    "app.db": 2,
    "app.settings": 3,
    "app.forecasts": 3,
    "app.ingest": 3,
    "app.profiles": 3,
    "app.sources": 4,
    "app.jobs": 5,
    "app.plans": 6,
    "app.pools": 7,
    "app.views": 8,
    "app.grafana": 8,
    "app.api": 9,
    "app.cli": 10,
}

#: Modules above MAX_LINES lines, with the reason (each still at most MAX_LINES_LISTED).
LONG_MODULES = {
    "app/plans/service.py": "the served plan's one read path (the plan and its JSON, the cached "
    "read, the build); the cache and its key query live in plan_cache",
    "app/views/overview.py": "one HTML page as small render functions; its cards' parts "
    "already live in overview_status, overview_compare and overview_pools",
    "app/api/schemas.py": "the REST API's pydantic schemas, one small class per resource",
    "app/ingest/hourly.py": "the hourly-file parser: CSV and JSON share one set of row rules",
    "app/plans/auto_band.py": "band auto's stored choice: read, store, recalibrate",
}

#: A command module may register the modules of its own actions (and nothing else of app.cli).
SUBCOMMAND_MODULES = {
    "app.cli.commands": {
        "app.cli.source_commands",
        "app.cli.deploy_commands",
        "app.cli.serving_commands",
    },
    "app.cli.pool_commands": {"app.cli.pool_plan_commands"},
    "app.cli.profile_commands": {"app.cli.profile_observe_commands"},
}
CLI_SHARED = "app.cli.shared"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }


MODULES = _modules()


def _resolve(target: str) -> str | None:
    """The module an import refers to (``from a.b import c`` is a.b.c when that is a module)."""
    parts = target.split(".")
    while parts:
        name = ".".join(parts)
        if name in MODULES:
            return name
        parts.pop()
    return None


def _imports(name: str) -> set[str]:
    tree = ast.parse(MODULES[name].read_text(), filename=str(MODULES[name]))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(t for t in map(_resolve, targets) if t is not None and t != name)
    return found


EDGES = {name: _imports(name) for name in MODULES}


def _edges(prefix: str) -> Iterator[tuple[str, str]]:
    for source, targets in EDGES.items():
        if source == prefix or source.startswith(prefix + "."):
            for target in sorted(targets):
                yield source, target


def _unit(name: str, depth: int) -> str:
    return ".".join(name.split(".")[:depth])


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("package", ["capacity", "app"])
def test_no_module_at_a_package_root_without_a_reason(package: str) -> None:
    loose = sorted(_relative(p) for p in (ROOT / package).glob("*.py"))
    unlisted = [path for path in loose if path not in ROOT_MODULES]
    assert not unlisted, (
        f"{unlisted} sit at the root of {package}/: move them into the sub-package that holds "
        "their kind, or list them in ROOT_MODULES with the reason (and in docs/architecture.md)"
    )
    for folder in (ROOT / package).iterdir():
        if folder.is_dir() and any(folder.glob("*.py")):
            assert (folder / "__init__.py").is_file(), f"{_relative(folder)} is not a package"


def test_the_listed_root_modules_exist() -> None:
    missing = [path for path in ROOT_MODULES if not (ROOT / path).is_file()]
    assert not missing, f"ROOT_MODULES lists {missing}, which no longer exist"


def test_capacity_holds_exactly_its_documented_families() -> None:
    families = {p.name for p in (ROOT / "capacity").iterdir() if (p / "__init__.py").is_file()}
    assert families == set(FAMILY_IMPORTS), (
        "capacity's sub-packages and FAMILY_IMPORTS differ: a new family needs its place in "
        "the import order (FAMILY_IMPORTS and docs/architecture.md)"
    )
    for family in sorted(families):
        init = ROOT / "capacity" / family / "__init__.py"
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{_relative(init)} needs a docstring saying what it holds"
        assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets}
        assert "__all__" in assigned, f"{_relative(init)} needs __all__ (its public names)"


def test_every_app_sub_package_says_what_it_holds() -> None:
    for init in sorted((ROOT / "app").glob("*/__init__.py")):
        if init.parent.name == "data":  # the bundled sample files, no code
            continue
        assert ast.get_docstring(ast.parse(init.read_text())), f"{_relative(init)}: no docstring"


def test_no_module_is_above_400_lines_without_a_reason() -> None:
    too_long = {}
    for package in ("capacity", "app"):
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            limit = MAX_LINES_LISTED if _relative(path) in LONG_MODULES else MAX_LINES
            if lines > limit:
                too_long[_relative(path)] = lines
    assert not too_long, (
        f"modules above {MAX_LINES} lines: {too_long}; split them along their seams (or list "
        f"one in LONG_MODULES with the reason, never above {MAX_LINES_LISTED})"
    )


def test_every_listed_long_module_is_still_long() -> None:
    short = [
        path
        for path in LONG_MODULES
        if not (ROOT / path).is_file() or len((ROOT / path).read_text().splitlines()) <= MAX_LINES
    ]
    assert not short, f"{short} are no longer above {MAX_LINES} lines: drop them from the list"


def test_no_import_circle_between_modules() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in EDGES[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in sorted(MODULES):
        if name not in index:
            visit(name)
    assert not circles, f"import circles: {circles}"


def test_the_packages_import_one_way() -> None:
    allowed = {"forecasting": {"forecasting"}, "capacity": {"capacity", "forecasting"}}
    for package, may_import in allowed.items():
        back = [(s, t) for s, t in _edges(package) if _unit(t, 1) not in may_import]
        assert not back, f"arrows back up (app -> capacity -> forecasting only): {back}"


def test_capacity_families_import_in_the_documented_direction() -> None:
    wrong = []
    for source, target in _edges("capacity"):
        if target in CAPACITY_SHARED or _unit(target, 1) != "capacity" or source == "capacity":
            continue
        if target == "capacity":
            wrong.append((source, target))  # the face: a family never imports it
            continue
        here, there = _unit(source, 2), _unit(target, 2)
        if here in CAPACITY_SHARED:
            wrong.append((source, target))  # errors and _checks import no family
        elif here != there and there.split(".")[1] not in FAMILY_IMPORTS[here.split(".")[1]]:
            wrong.append((source, target))
    assert not wrong, f"imports against capacity's family order (FAMILY_IMPORTS): {wrong}"


def test_app_units_import_only_lower_ranks() -> None:
    units = {_unit(name, 2) for name in MODULES if name.startswith("app")}
    assert units <= set(APP_RANK), f"place {sorted(units - set(APP_RANK))} in APP_RANK"
    wrong = [
        (source, target)
        for source, target in _edges("app")
        if _unit(target, 1) == "app"
        and _unit(source, 2) != _unit(target, 2)
        and APP_RANK[_unit(target, 2)] >= APP_RANK[_unit(source, 2)]
    ]
    assert not wrong, f"arrows back up inside app (APP_RANK): {wrong}"


def test_cli_command_modules_import_only_the_shared_helpers() -> None:
    from app.cli import registry

    commands = {command.module for command in registry.COMMANDS.values()}
    commands |= {m for modules in SUBCOMMAND_MODULES.values() for m in modules}
    wrong = []
    for source in sorted(commands):
        for target in sorted(EDGES[source]):
            if _unit(target, 2) != "app.cli" or target in (CLI_SHARED, source):
                continue
            if target not in SUBCOMMAND_MODULES.get(source, set()):
                wrong.append((source, target))
    assert not wrong, f"CLI command modules importing each other (use {CLI_SHARED}): {wrong}"
