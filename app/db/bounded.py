"""psycopg connections whose every wait for the server ends by a deadline.

libpq bounds only the connection attempt (``connect_timeout``). On an open connection a query
waits for its reply for as long as the socket stays open: TCP keepalives and
``tcp_user_timeout`` end that wait when the path drops packets, but not when the peer's TCP
stack still acknowledges and nothing answers (a stalled server, a proxy or load balancer that
lost its upstream), and ``statement_timeout`` is enforced by the server, which may never see
the query. Every network wait of psycopg goes through ``Connection.wait``; this subclass arms
a watchdog around it that shuts the socket down when the reply is overdue, so the wait ends
with an :class:`psycopg.OperationalError`, the connection is broken, and SQLAlchemy discards
it (and, through the pool, the other connections made before it).
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

__all__ = ["BoundedConnection", "ReplyTimeoutError", "reply_timeout"]


class ReplyTimeoutError(psycopg.OperationalError):
    """The database sent no reply within the deadline; the connection was closed."""


class BoundedConnection(psycopg.Connection[Any]):
    """A psycopg connection that gives up on a reply after ``reply_timeout_s`` seconds
    (``None``: wait as long as the socket is open)."""

    reply_timeout_s: float | None = None
    _expired = False

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        timeout = self.reply_timeout_s
        if timeout is None:
            return super().wait(gen, *args, **kwargs)
        token = _WATCHDOG.arm(self, timeout)
        try:
            return super().wait(gen, *args, **kwargs)
        except psycopg.Error as exc:
            if self._expired:
                raise ReplyTimeoutError(
                    f"no reply from the database within {timeout:g} s (network path or server "
                    "stalled); connection closed"
                ) from exc
            raise
        finally:
            _WATCHDOG.disarm(token)

    def _expire(self) -> None:
        """Called by the watchdog, while this connection's wait is armed (its socket open)."""
        self._expired = True
        try:
            duplicate = socket.socket(fileno=os.dup(self.pgconn.socket))
        except (OSError, psycopg.Error):
            return
        try:
            duplicate.shutdown(socket.SHUT_RDWR)  # the socket itself, not just this descriptor
        except OSError:
            pass
        finally:
            duplicate.close()


@contextmanager
def reply_timeout(dbapi_connection: object, seconds: float | None) -> Iterator[None]:
    """Wait at most ``seconds`` for replies inside the block (``None``: unbounded); a no-op on
    connections that are not :class:`BoundedConnection` (SQLite)."""
    if not isinstance(dbapi_connection, BoundedConnection):
        yield
        return
    before = dbapi_connection.reply_timeout_s
    dbapi_connection.reply_timeout_s = seconds
    try:
        yield
    finally:
        dbapi_connection.reply_timeout_s = before


class _Watchdog:
    """One daemon thread for the process: expires armed waits whose deadline passed."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: dict[int, tuple[float, BoundedConnection]] = {}
        self._tokens = itertools.count()
        self._wake_at = float("inf")
        self._thread: threading.Thread | None = None

    def arm(self, connection: BoundedConnection, timeout_s: float) -> int:
        token = next(self._tokens)
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._armed[token] = (deadline, connection)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="gpucast-db-watchdog", daemon=True
                )
                self._thread.start()
            elif deadline < self._wake_at:
                self._cond.notify()
        return token

    def disarm(self, token: int) -> None:
        with self._cond:
            self._armed.pop(token, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for token, (deadline, connection) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[token]
                        connection._expire()
                self._wake_at = min((d for d, _ in self._armed.values()), default=float("inf"))
                timeout = None if self._wake_at == float("inf") else self._wake_at - now
                self._cond.wait(timeout)


_WATCHDOG = _Watchdog()


def _reset_after_fork() -> None:
    # A forked child has no watchdog thread, and its lock may have been held at the fork.
    global _WATCHDOG
    _WATCHDOG = _Watchdog()


os.register_at_fork(after_in_child=_reset_after_fork)
