"""Database fixtures: a fresh SQLite file per test, and the same tests on PostgreSQL when
``GPUCAST_TEST_POSTGRES_URL`` is set (CI sets it, so there they never skip)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.api import create_app
from app.db import Database, open_database
from app.db.models import Base
from app.settings import Settings, get_settings, normalize_database_url
from tests.support.prometheus import prometheus_server  # noqa: F401 - a shared fixture

POSTGRES_URL = os.environ.get("GPUCAST_TEST_POSTGRES_URL")
BACKENDS = ["sqlite", "postgres"]
TABLES = tuple(table.name for table in reversed(Base.metadata.sorted_tables))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each test (migrating per test is slow)."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    database = open_database(f"sqlite:///{path}")
    database.upgrade()
    database.dispose()
    return path


@pytest.fixture(scope="session")
def postgres_migrated() -> str:
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL tests need GPUCAST_TEST_POSTGRES_URL (CI sets it)")
    url = normalize_database_url(POSTGRES_URL)
    database = open_database(url)
    with database.engine.begin() as connection:
        connection.execute(text("DROP SCHEMA public CASCADE"))
        connection.execute(text("CREATE SCHEMA public"))
    database.upgrade()
    database.dispose()
    return url


def _truncate_postgres(url: str) -> None:
    database = open_database(url)
    with database.engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
    database.dispose()


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        target = tmp_path / "gpucast.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), target)
        return f"sqlite:///{target}"
    url = request.getfixturevalue("postgres_migrated")
    _truncate_postgres(url)
    return url


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    database = open_database(database_url)
    yield database
    database.dispose()


@pytest.fixture
def settings(database_url: str) -> Settings:
    return get_settings(database_url=database_url, auto_migrate=False)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A CLI user's home of their own: no GPUCAST_DATABASE_URL, no .env of the developer's."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("GPUCAST_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path
