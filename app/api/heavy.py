"""The worker threads of expensive reads: a pool of their own.

Plans, comparisons, replays, simulations and Grafana targets run at most
:data:`HEAVY_READS_AT_ONCE` at a time, on threads outside the server's default pool; more wait
their turn on the event loop (holding no thread) until their deadline. So however many such
reads arrive, and however long they run, health checks, readiness and writes always find a
worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio
from fastapi import Request

from app.common.cancel import checkpoint

__all__ = ["HEAVY_READS_AT_ONCE", "run_heavy"]

#: Expensive reads computing at once per server process (each holds one worker thread and,
#: while in Python, the interpreter lock the event loop needs too): with 4, /healthz waited up
#: to 3.6 s behind 45 abandoned replays on a 2-core machine, with 2 under 0.8 s
#: (bench/abuse.py, bench/RESULTS.md).
HEAVY_READS_AT_ONCE = 2

T = TypeVar("T")


async def run_heavy(request: Request, func: Callable[..., T], *args: Any) -> T:
    """``func(*args)`` on a worker thread of the expensive reads' pool; not begun when the
    read was abandoned while it waited for its turn."""
    state = request.app.state.__dict__
    limiter = state.get("heavy_reads")
    if limiter is None:
        limiter = state["heavy_reads"] = anyio.CapacityLimiter(HEAVY_READS_AT_ONCE)
    # Shielded: a request cancelled (its client left, its deadline passed) stops waiting at
    # once, while the thread keeps its place in the pool until it has actually stopped.
    work = asyncio.ensure_future(
        anyio.to_thread.run_sync(partial(_unless_abandoned, func, *args), limiter=limiter)
    )
    work.add_done_callback(_retrieve)
    return await asyncio.shield(work)


def _retrieve(work: asyncio.Future[Any]) -> None:
    """An abandoned computation's error has nobody to go to: retrieve it (no warning)."""
    if not work.cancelled():
        work.exception()


def _unless_abandoned(func: Callable[..., T], *args: Any) -> T:
    checkpoint()
    return func(*args)
