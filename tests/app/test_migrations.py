"""Migrations run on SQLite and PostgreSQL, and the ORM models match the migrated schema."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from app.db import migrate, open_database
from app.db.models import Base
from app.errors import AppError
from app.settings import normalize_database_url


def _fresh_postgres_schema() -> str:
    url = os.environ.get("GPUCAST_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("PostgreSQL tests need GPUCAST_TEST_POSTGRES_URL (CI sets it)")
    return normalize_database_url(url)


@pytest.fixture(params=["sqlite", "postgres"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.db'}"
    url = _fresh_postgres_schema()
    database = open_database(url)
    with database.engine.begin() as connection:
        connection.execute(text("DROP SCHEMA IF EXISTS gpucast_migration_test CASCADE"))
        connection.execute(text("CREATE SCHEMA gpucast_migration_test"))
    database.dispose()
    request.addfinalizer(lambda: _drop_schema(url))
    return url + "?options=-csearch_path%3Dgpucast_migration_test"


def _drop_schema(url: str) -> None:
    database = open_database(url)
    with database.engine.begin() as connection:
        connection.execute(text("DROP SCHEMA IF EXISTS gpucast_migration_test CASCADE"))
    database.dispose()


def test_upgrade_creates_tables_and_models_match(empty_database_url: str) -> None:
    database = open_database(empty_database_url)
    assert migrate.current_revision(database.engine) is None
    database.upgrade()
    assert migrate.is_up_to_date(database.engine)
    tables = set(inspect(database.engine).get_table_names())
    assert {"series", "observations", "events", "gpu_profiles", "alembic_version"} <= tables
    assert {"series_sources", "pools", "pool_members"} <= tables
    with database.engine.connect() as connection:
        diff = compare_metadata(
            MigrationContext.configure(connection, opts={"compare_type": True}), Base.metadata
        )
    database.dispose()
    assert diff == []


def test_downgrade_to_base_and_upgrade_again(empty_database_url: str) -> None:
    from alembic import command

    database = open_database(empty_database_url)
    database.upgrade()
    config = migrate.alembic_config(database.engine)
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "base")
    assert "observations" not in inspect(database.engine).get_table_names()
    database.upgrade()
    assert "observations" in inspect(database.engine).get_table_names()
    database.dispose()


def test_pools_revision_downgrades_with_pools_stored_and_upgrades_again(
    empty_database_url: str,
) -> None:
    from alembic import command

    from app import pools
    from app.db import repository

    database = open_database(empty_database_url)
    database.upgrade()
    body = {
        "node_prices": {"on_demand_usd_per_hour": 98.0},
        "members": [{"series": "prod/chat", "profile": "h100"}],
    }
    with database.transaction() as session:
        repository.create_series(session, name="prod/chat")
        repository.create_gpu_profile(
            session, name="h100", gpu_type="H100", model="m", tokens_per_s_per_gpu=2400.0
        )
        pools.create_pool(session, name="fleet", fields=pools.PoolFields.model_validate(body))
    config = migrate.alembic_config(database.engine)
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0006")
    tables = set(inspect(database.engine).get_table_names())
    assert not {"pools", "pool_members"} & tables and {"series", "gpu_profiles"} <= tables
    assert migrate.current_revision(database.engine) == "0006"
    database.upgrade()
    assert {"pools", "pool_members"} <= set(inspect(database.engine).get_table_names())
    with database.transaction() as session:
        assert pools.list_pools(session) == []
        assert [s.name for s in repository.list_series(session)] == ["prod/chat"]
    database.dispose()


def test_outdated_schema_without_auto_migrate_is_reported(tmp_path: Path) -> None:
    database = open_database(f"sqlite:///{tmp_path / 'old.db'}")
    with pytest.raises(AppError, match=r"run 'gpucast db upgrade'"):
        database.ensure_schema(auto_migrate=False)
    database.dispose()
