"""Apply Alembic migrations programmatically (``gpucast db upgrade`` and auto-migrate)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

import migrations
from app.db.bounded import reply_timeout

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
    # A migration may rewrite a large table: no statement bound inside its transaction (the
    # TCP keepalives still end it if the path to the server dies; the COMMIT is bounded).
    with (
        engine.begin() as connection,
        reply_timeout(connection.connection.dbapi_connection, None),
    ):
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
            connection.exec_driver_sql("SET LOCAL idle_in_transaction_session_timeout = 0")
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision(engine: Engine) -> str | None:
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def is_up_to_date(engine: Engine) -> bool:
    return current_revision(engine) == head_revision(engine)
