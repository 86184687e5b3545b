"""Database access: engine, sessions, migrations."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker

from app.db import migrate
from app.db.engine import make_engine, make_session_factory
from app.db.timeouts import DatabaseTimeouts
from app.errors import AppError

__all__ = ["Database", "DatabaseTimeouts", "is_unavailable", "open_database"]


class SchemaOutdatedError(AppError):
    status_code = 503


@dataclass
class Database:
    engine: Engine
    sessions: sessionmaker[Session]

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """One unit of work: commit on success, roll back on any error."""
        with self.sessions() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def ping(self) -> None:
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    def upgrade(self) -> None:
        migrate.upgrade(self.engine)

    def ensure_schema(self, *, auto_migrate: bool) -> None:
        """Migrate when allowed; otherwise fail clearly if the schema is behind."""
        if auto_migrate:
            self.upgrade()
        elif not migrate.is_up_to_date(self.engine):
            raise SchemaOutdatedError(
                "the database schema is not up to date; run 'gpucast db upgrade'"
            )

    def dispose(self) -> None:
        self.engine.dispose()


def is_unavailable(error: BaseException) -> bool:
    """Whether ``error`` means the database cannot be reached (rather than that one statement
    failed): a connection failure or lost connection, a bound that expired, no free pooled
    connection."""
    if isinstance(error, OperationalError | PoolTimeoutError):
        return True
    return isinstance(error, DBAPIError) and error.connection_invalidated


def open_database(database_url: str, *, timeouts: DatabaseTimeouts | None = None) -> Database:
    """The database at ``database_url``; on PostgreSQL every round trip is bounded by
    ``timeouts`` (default :class:`DatabaseTimeouts`: the bounds of batch jobs)."""
    engine = make_engine(database_url, timeouts)
    return Database(engine=engine, sessions=make_session_factory(engine))
