"""The libraries stay pure: app -> capacity -> forecasting, never the reverse."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_LIBRARIES = {
    "fastapi",
    "starlette",
    "sqlalchemy",
    "alembic",
    "pydantic_settings",
    "uvicorn",
    "app",
    "psycopg",
}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def _uses_environ(path: Path) -> bool:
    text = path.read_text()
    return "os.environ" in text or "os.getenv" in text


@pytest.mark.parametrize("package", ["forecasting", "capacity"])
def test_library_imports_no_service_code(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package} has no modules"
    for path in files:
        bad = _imported_roots(path) & FORBIDDEN_IN_LIBRARIES
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
        assert not _uses_environ(path), f"{path.relative_to(ROOT)} reads the environment"


def test_forecasting_does_not_import_capacity() -> None:
    for path in sorted((ROOT / "forecasting").rglob("*.py")):
        assert "capacity" not in _imported_roots(path), f"{path.relative_to(ROOT)} imports capacity"
