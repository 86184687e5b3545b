"""Database access: engine, sessions, migrations, and the repository functions over the core
tables (series, observations, events, GPU profiles; ``repository``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import Engine, event, text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from app.db import migrate, serving_models  # noqa: F401  (its table joins Base.metadata)
from app.db.engine import READ_ONLY, make_engine, make_session_factory
from app.db.timeouts import DatabaseTimeouts
from app.errors import AppError

__all__ = [
    "BIND_BATCH",
    "Database",
    "DatabaseTimeouts",
    "batches",
    "is_unavailable",
    "open_database",
]

# Values per IN (...) list or multi-row statement: PostgreSQL's protocol carries at most 65,535
# bind parameters per statement and SQLite's default limit is 32,766; a list longer than this
# is sent in several statements.
BIND_BATCH = 10_000


def batches(values: Sequence[T], size: int = BIND_BATCH) -> Iterator[Sequence[T]]:
    """``values`` in consecutive slices of at most ``size``."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


T = TypeVar("T")


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

    @contextmanager
    def read_transaction(self) -> Iterator[Session]:
        """A unit of work that reads: on SQLite it begins deferred (no write lock; WAL gives it
        a snapshot), elsewhere it is :meth:`transaction`. A write inside it still works on
        SQLite unless another writer committed since it began ("database is locked")."""
        engine = self.engine.execution_options(**{READ_ONLY: True})
        with self.sessions(bind=engine) as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def ping(self) -> None:
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    def reachable(self) -> bool:
        """Whether a fresh round trip succeeds now (bounded by the engine's timeouts)."""
        try:
            self.ping()
        except Exception:
            return False
        return True

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
        """Close the pooled connections. A connection still checked out (a worker finishing
        an abandoned read or a write past its deadline when the server stops) is closed when
        it comes back: SQLAlchemy would otherwise keep it open in the discarded pool until the
        garbage collector finds it."""
        discarded = self.engine.pool
        self.engine.dispose()  # a new pool (it copies the listeners the old one has now)
        event.listen(discarded, "checkin", _close_on_return)
        discarded.dispose()  # what came back between the two


def _close_on_return(_dbapi_connection: object, record: ConnectionPoolEntry) -> None:
    record.close()


def is_unavailable(error: BaseException, database: Database | None = None) -> bool:
    """Whether ``error`` means the database cannot be reached (rather than that one statement
    failed): a connection failure or lost connection, a bound that expired, no free pooled
    connection. With ``database``, an error that did not break its connection counts only if
    a fresh round trip fails too: a statement the driver refuses on a healthy connection (too
    many bind parameters, say) is a bug to report, not an outage."""
    if isinstance(error, PoolTimeoutError):
        return True
    if not isinstance(error, DBAPIError):
        return False
    if error.connection_invalidated:
        return True
    if not isinstance(error, OperationalError):
        return False
    if _is_statement_limit(error):
        return False
    if isinstance(error.orig, sqlite3.Error):
        return True  # locked, busy, I/O: the file cannot be used now
    return database is None or not database.reachable()


def _is_statement_limit(error: DBAPIError) -> bool:
    # SQLite reports its bind-parameter and expression-depth limits as OperationalError.
    text = str(error.orig).lower()
    return "too many sql variables" in text or "too many terms" in text


def open_database(database_url: str, *, timeouts: DatabaseTimeouts | None = None) -> Database:
    """The database at ``database_url``; on PostgreSQL every round trip is bounded by
    ``timeouts`` (default :class:`DatabaseTimeouts`: the bounds of batch jobs)."""
    engine = make_engine(database_url, timeouts)
    return Database(engine=engine, sessions=make_session_factory(engine))
