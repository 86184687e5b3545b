"""A database lock that keeps two nightly runs (or two hourly cycles) from overlapping.

PostgreSQL: a session advisory lock held on a dedicated connection for the whole run; if the
process dies, the connection closes and PostgreSQL releases the lock by itself.
SQLite: a row in ``job_locks``; a row left by a process that is gone (same host, pid no longer
alive) or older than ``stale_after`` is taken over.
"""

from __future__ import annotations

import contextlib
import os
import socket
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, delete, insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from app.db import Database
from app.db.models import JobLock
from app.errors import AppError


class LockHeldError(AppError):
    """Another run holds the lock."""

    status_code = 409


def _lock_key(name: str) -> int:
    return zlib.crc32(f"gpucast:{name}".encode())


@contextmanager
def job_lock(
    database: Database, name: str = "nightly", *, stale_after: timedelta = timedelta(hours=12)
) -> Iterator[None]:
    """Hold the named lock for the duration of the block, or raise :class:`LockHeldError`."""
    if database.engine.dialect.name == "postgresql":
        with database.engine.connect() as connection:
            _advisory(connection, name)
            try:
                yield
            except BaseException:
                # Keep the run's own error: if the unlock fails too, the connection is gone,
                # and with it the session that held the lock.
                with contextlib.suppress(DBAPIError):
                    _unlock(connection, name)
                raise
            _unlock(connection, name)
        return
    _acquire_row(database, name, stale_after)
    try:
        yield
    finally:
        with database.transaction() as session:
            session.execute(delete(JobLock).where(JobLock.name == name, JobLock.pid == os.getpid()))


def lock_held(
    database: Database, name: str = "nightly", *, stale_after: timedelta = timedelta(hours=12)
) -> bool:
    """Whether a live run holds the named lock now. A probe: it takes nothing, so a run that
    starts at the same moment is never refused because of it."""
    if database.engine.dialect.name == "postgresql":
        with database.engine.connect() as connection:
            # A bigint advisory key shows in pg_locks as classid (high 32 bits) and objid.
            return bool(
                connection.scalar(
                    text(
                        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
                        "AND granted AND objsubid = 1 AND classid = 0 "
                        "AND objid = CAST(CAST(:k AS bigint) AS oid) AND database = "
                        "(SELECT oid FROM pg_database WHERE datname = current_database()))"
                    ),
                    {"k": _lock_key(name)},
                )
            )
    with database.transaction() as session:
        current = session.scalar(select(JobLock).where(JobLock.name == name))
        return current is not None and not _is_stale(current, stale_after)


def _unlock(connection: Connection, name: str) -> None:
    connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _lock_key(name)})
    connection.commit()


def _advisory(connection: Connection, name: str) -> None:
    got = connection.scalar(text("SELECT pg_try_advisory_lock(:k)"), {"k": _lock_key(name)})
    connection.commit()
    if not got:
        raise LockHeldError(f"another '{name}' run holds the database lock; not starting")


def _acquire_row(database: Database, name: str, stale_after: timedelta) -> None:
    me = {
        "name": name,
        "holder": f"{socket.gethostname()}:{os.getpid()}",
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "acquired_at": datetime.now(UTC),
    }
    with database.transaction() as session:
        current = session.scalar(select(JobLock).where(JobLock.name == name))
        if current is not None:
            if not _is_stale(current, stale_after):
                raise LockHeldError(
                    f"another '{name}' run holds the database lock (held by {current.holder} "
                    f"since {current.acquired_at:%Y-%m-%d %H:%M}Z); not starting"
                )
            session.delete(current)
            session.flush()
        try:
            session.execute(insert(JobLock), [me])
            session.flush()
        except IntegrityError as exc:
            raise LockHeldError(f"another '{name}' run took the database lock first") from exc


def _is_stale(lock: JobLock, stale_after: timedelta) -> bool:
    if datetime.now(UTC) - lock.acquired_at > stale_after:
        return True
    if lock.hostname == socket.gethostname():
        return not _pid_alive(lock.pid)
    return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
