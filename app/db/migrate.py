"""Apply Alembic migrations programmatically (``gpucast db upgrade`` and auto-migrate)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

import migrations

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option(
        "sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%")
    )
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database behind ``engine`` to ``revision`` in one transaction."""
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision(engine: Engine) -> str | None:
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def is_up_to_date(engine: Engine) -> bool:
    return current_revision(engine) == head_revision(engine)
