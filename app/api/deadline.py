"""A wall-clock deadline per read request: past it the client gets a 503 JSON at once.

The database bounds each statement, but a read made of many short statements (a Grafana target
over many series) has no bound of its own. Reads only: a write must not be answered before it
has committed or rolled back. The route's worker thread cannot be interrupted; it finishes in
the background and its answer is dropped (a plan it computed may still be cached).
"""

from __future__ import annotations

import asyncio
import logging

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.response_cache import ClearOnWriteMiddleware

logger = logging.getLogger(__name__)

__all__ = ["ReadDeadlineMiddleware"]


class ReadDeadlineMiddleware:
    def __init__(self, app: ASGIApp, *, deadline_s: float) -> None:
        self.app = app
        self.deadline_s = deadline_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.deadline_s or not _is_read(scope):
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        task = asyncio.ensure_future(self.app(scope, receive, tracking_send))
        done, _ = await asyncio.wait({task}, timeout=self.deadline_s)
        if task in done:
            task.result()
            return
        if started:  # the answer is already on its way: let it finish
            await task
            return
        task.cancel()
        logger.warning(
            "%s %s passed its %g s deadline", scope["method"], scope["path"], self.deadline_s
        )
        response = JSONResponse(
            {
                "detail": f"the request took longer than its {self.deadline_s:g} s deadline; "
                "narrow it (fewer series, a shorter range) or retry shortly"
            },
            status_code=503,
            headers={"Retry-After": "5"},
        )
        await response(scope, receive, send)


def _is_read(scope: Scope) -> bool:
    method = scope.get("method")
    if method in ("GET", "HEAD"):
        return True
    return method == "POST" and str(scope.get("path", "")).startswith(
        ClearOnWriteMiddleware.READ_POSTS
    )
