"""Cooperative cancellation of a request's work on worker threads.

A worker thread cannot be interrupted; a long computation (a plan replay, a comparison over
profiles, a Grafana target over many series) instead calls :func:`checkpoint` between its
steps, which raises :class:`WorkAbandonedError` once its request is abandoned: the client went
away, its deadline passed, or (for a computation several requests share) every request
waiting for it did. The token travels in a context variable, which worker threads inherit
from the task that started them.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar

from app.errors import AppError

__all__ = ["WorkAbandonedError", "checkpoint", "current_token", "use_token"]


class WorkAbandonedError(AppError):
    """Nobody waits for this computation any more (503 if it is ever answered)."""

    status_code = 503


_TOKEN: ContextVar[threading.Event | None] = ContextVar("gpucast_cancel_token", default=None)


def use_token(token: threading.Event) -> None:
    """Make ``token`` the current context's cancellation token (set it to cancel)."""
    _TOKEN.set(token)


def current_token() -> threading.Event | None:
    return _TOKEN.get()


def checkpoint() -> None:
    """Raise :class:`WorkAbandonedError` when the current work was abandoned."""
    token = _TOKEN.get()
    if token is not None and token.is_set():
        raise WorkAbandonedError(
            "the request was abandoned (its client left or its deadline passed); "
            "its computation stopped"
        )
