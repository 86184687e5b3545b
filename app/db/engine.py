"""Engine and session factory. Built from settings at startup, never at import."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
from sqlalchemy import URL, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import InvalidatePoolError
from sqlalchemy.orm import Session, sessionmaker

from app.db.bounded import BoundedConnection, reply_timeout
from app.db.timeouts import DatabaseTimeouts


def make_engine(database_url: str, timeouts: DatabaseTimeouts | None = None) -> Engine:
    """Create an engine; for SQLite, create the file's folder and enable foreign keys; for
    PostgreSQL, bound every round trip by ``timeouts`` (default :class:`DatabaseTimeouts`)."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            # Let SQLAlchemy, not the sqlite3 module, decide when transactions begin.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(connection):  # type: ignore[no-untyped-def]
            # A deferred transaction that reads and then writes fails at once with "database
            # is locked" when another writer committed meanwhile; taking the write lock at
            # BEGIN makes concurrent writers queue (up to busy_timeout) instead. A read
            # transaction (Database.read_transaction) takes no lock at all: in WAL mode it
            # reads a snapshot while writers go on, so a slow read never stalls a write.
            if connection.get_execution_options().get(READ_ONLY):
                connection.exec_driver_sql("BEGIN")
            else:
                connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    if url.get_backend_name() == "postgresql" and url.get_driver_name() == "psycopg":
        return _postgres_engine(url, timeouts or DatabaseTimeouts())
    return create_engine(url, pool_pre_ping=True)


def _postgres_engine(url: URL, timeouts: DatabaseTimeouts) -> Engine:
    """A pool whose every wait is bounded (see :mod:`app.db.timeouts`)."""
    url_options = url.query.get("options")
    engine = create_engine(
        url.difference_update_query(["options"]),
        # As many connections as the server's thread pool has threads (anyio's default 40), so a
        # burst of sync requests waits on the database, not on the pool (which answers 503).
        pool_size=20,
        max_overflow=20,
        pool_timeout=timeouts.pool_s,
        connect_args=timeouts.connect_args(url_options if isinstance(url_options, str) else None),
    )

    @event.listens_for(engine, "do_connect")
    def _bounded_connect(_dialect, _record, cargs, cparams):  # type: ignore[no-untyped-def]
        connection = BoundedConnection.connect(*cargs, **cparams)
        connection.reply_timeout_s = timeouts.reply_s
        return connection

    @event.listens_for(engine, "connect")
    def _mark_fresh(_dbapi_connection, record):  # type: ignore[no-untyped-def]
        record.info[_FRESH] = True

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_connection, record, _proxy):  # type: ignore[no-untyped-def]
        # SQLAlchemy's pool_pre_ping, with its own deadline: a pooled connection whose path went
        # silent must fail here within the ping bound, not the (longer) statement bound.
        if record.info.pop(_FRESH, False):
            return
        try:
            with reply_timeout(dbapi_connection, timeouts.ping_s):
                engine.dialect.do_ping(dbapi_connection)
        except psycopg.Error as exc:
            # Invalidate the whole pool: connections made before this one share its path.
            raise InvalidatePoolError(f"pooled connection failed its ping: {exc}") from exc

    return engine


_FRESH = "gpucast_fresh"
# Execution option of read transactions (see Database.read_transaction).
READ_ONLY = "gpucast_read_only"


#: Session.info key: when the session's current transaction began (time.monotonic()).
TRANSACTION_BEGAN = "gpucast_transaction_began"


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    sessions = sessionmaker(bind=engine, expire_on_commit=False)

    @event.listens_for(sessions, "after_begin")
    def _note_begin(session, _transaction, _connection):  # type: ignore[no-untyped-def]
        # no later than the transaction's snapshot: what it began too early to see
        session.info[TRANSACTION_BEGAN] = time.monotonic()

    return sessions


def transaction_began(session: Session) -> float | None:
    """When ``session``'s current transaction began (time.monotonic()), if it was noted."""
    began = session.info.get(TRANSACTION_BEGAN)
    return began if isinstance(began, float) else None
