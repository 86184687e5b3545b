"""A wall-clock deadline per request: past it the client gets a 503 JSON at once.

The database bounds each statement, but a request made of many short statements (a Grafana
target over many series) has no bound of its own. The route's worker thread cannot be
interrupted; it finishes in the background and its answer is dropped (a plan it computed may
still be cached).

A read's work is cancelled at its deadline and when its client disconnects: its task is
cancelled and its cancellation token (:mod:`app.common.cancel`) set, so a computation on a
worker thread stops at its next checkpoint instead of running on for nobody.

A write is answered 503 at its deadline only while it has not begun to commit: the deadline
and the request's first commit decide once, under a lock (:class:`WriteGate`), which comes
first. A write past its deadline is refused at its commit (rolled back, never stored); a write
already committing is let finish and answered as usual. So a 503 never hides a stored write
and a 2xx never covers an uncommitted one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from contextvars import ContextVar

from sqlalchemy import event
from sqlalchemy.orm import Session
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.response_cache import ClearOnWriteMiddleware
from app.common.cancel import current_token, use_token

logger = logging.getLogger(__name__)

__all__ = ["ReadDeadlineMiddleware", "WriteGate"]


class DeadlinePassedError(Exception):
    """A write reached its commit after the client was answered 503: it is rolled back."""


class WriteGate:
    """Whether a write request's deadline or its first commit came first (decided once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "open"  # open | committing | expired

    def expire(self) -> bool:
        """At the deadline: True when the 503 may be sent (no commit has begun)."""
        with self._lock:
            if self._state == "open":
                self._state = "expired"
            return self._state == "expired"

    def commit(self) -> None:
        """Before a commit: refuse it once the deadline was answered."""
        with self._lock:
            if self._state == "expired":
                raise DeadlinePassedError("the request passed its deadline before committing")
            self._state = "committing"


#: Writes answered 503 that are still running to their refused commit (kept referenced).
_UNFINISHED: set[asyncio.Future[None]] = set()

_GATE: ContextVar[WriteGate | None] = ContextVar("gpucast_write_gate", default=None)


@event.listens_for(Session, "before_commit")
def _before_commit(_session: Session) -> None:
    gate = _GATE.get()
    if gate is not None:
        gate.commit()


class ReadDeadlineMiddleware:
    def __init__(self, app: ASGIApp, *, deadline_s: float, write_deadline_s: float = 0) -> None:
        self.app = app
        self.deadline_s = deadline_s
        self.write_deadline_s = write_deadline_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _is_read(scope):
            deadline_s, gate = self.deadline_s, None
        else:
            deadline_s, gate = self.write_deadline_s, WriteGate()
        if gate is None:
            await self._read(scope, receive, send, deadline_s)
            return
        if not deadline_s:
            await self.app(scope, receive, send)
            return
        token = _GATE.set(gate)  # the request's task and worker threads copy this context
        try:
            await self._bounded(scope, receive, send, deadline_s, gate)
        finally:
            _GATE.reset(token)

    async def _read(self, scope: Scope, receive: Receive, send: Send, deadline_s: float) -> None:
        """A read, cancelled (task and token) when its client disconnects."""
        cancel = threading.Event()
        use_token(cancel)  # the request's task and worker threads copy this context
        pending = await _request_messages(receive)
        gone = asyncio.Event()

        async def app_receive() -> Message:
            if pending:
                return pending.pop(0)
            await gone.wait()
            return {"type": "http.disconnect"}

        answered = False

        async def answering_send(message: Message) -> None:
            nonlocal answered
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True

        run = (
            self._bounded(scope, app_receive, answering_send, deadline_s, None)
            if deadline_s
            else self.app(scope, app_receive, answering_send)
        )
        task = asyncio.ensure_future(run)
        watcher = asyncio.ensure_future(_disconnected(receive))
        try:
            done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if task not in done and not answered:
                # the client left: stop its work, nobody reads the answer
                gone.set()
                cancel.set()
                task.cancel()
                logger.info(
                    "%s %s: the client left; its work stopped", scope["method"], scope["path"]
                )
                return
            await task
        finally:
            watcher.cancel()
            if not task.done():
                task.cancel()

    async def _bounded(
        self, scope: Scope, receive: Receive, send: Send, deadline_s: float, gate: WriteGate | None
    ) -> None:
        started = dropped = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if dropped:  # a write answered 503 finishes (and rolls back) on its own
                return
            started = True
            await send(message)

        task = asyncio.ensure_future(self.app(scope, receive, tracking_send))
        try:
            done, _ = await asyncio.wait({task}, timeout=deadline_s)
        except asyncio.CancelledError:  # a read whose client left
            task.cancel()
            raise
        if task in done:
            task.result()
            return
        if started or (gate is not None and not gate.expire()):
            # the answer is on its way, or the write is committing: let it finish
            await task
            return
        if gate is None:
            cancel = current_token()
            if cancel is not None:
                cancel.set()
            task.cancel()
        else:
            # Not cancelled: cancelling would close its session while its worker thread still
            # uses it. It runs on to its commit, which the gate refuses (rolled back).
            dropped = True
            _UNFINISHED.add(task)
            task.add_done_callback(_finished)
        logger.warning("%s %s passed its %g s deadline", scope["method"], scope["path"], deadline_s)
        what = "nothing was stored; " if gate is not None else ""
        response = JSONResponse(
            {
                "detail": f"the request took longer than its {deadline_s:g} s deadline; "
                f"{what}narrow it (fewer series, a shorter range) or retry shortly"
            },
            status_code=503,
            headers={"Retry-After": "5"},
        )
        await response(scope, receive, send)


async def _request_messages(receive: Receive) -> list[Message]:
    """The request's body messages, read whole (the guard bounded it)."""
    messages = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            return messages


async def _disconnected(receive: Receive) -> None:
    """Returns when the client disconnects (after the body, that is all a server sends)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _finished(task: asyncio.Future[None]) -> None:
    _UNFINISHED.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.info("a write past its deadline was rolled back: %s", task.exception())


def _is_read(scope: Scope) -> bool:
    method = scope.get("method")
    if method in ("GET", "HEAD"):
        return True
    return method == "POST" and str(scope.get("path", "")).startswith(
        ClearOnWriteMiddleware.READ_POSTS
    )
