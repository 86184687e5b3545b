"""A short-lived cache of encoded read responses, served without touching the database.

Dashboards poll the same plan every few seconds. A hit costs a dict lookup on the event loop:
no thread hop, no database round trip. The price is staleness bounded by ``ttl_s``: a new
forecast stored by another process (the nightly job) shows up at most that late; writes made
through this process clear the cache at once.

Besides encoded answers it holds computed values a response is cut from (a Grafana target's
answer over its window, :mod:`app.grafana.ranges`), under the same rules. It is a
least-recently-used cache: an entry read on every request stays while one-off answers (a
dashboard's range moves on every refresh) pass through. An entry read in the last part of its
life (:data:`REFRESH_SHARE` of ``ttl_s``, at most :data:`MAX_REFRESH_S`) is recomputed in the
background while it is still served, so a busy answer never expires under its readers' feet:
they would all wait for its recomputation at once.

A write also advances the cache's *generation*, when it starts and again when its response
starts (it has committed by then). A read stores its answer only under the generation it
started in, so an answer computed from the state before a write is never stored after it; and
readers join a computation in flight only within one generation (:func:`cached_read`).

A computation in flight runs under a cancellation token of its own (:mod:`app.common.cancel`):
when every request waiting for it has gone (its client left, its deadline passed) the token
is set and the computation stops at its next checkpoint instead of running on for nobody.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

from app.common.cancel import use_token

DEFAULT_TTL_S = 5.0
REFRESH_SHARE = 0.2
MAX_REFRESH_S = 1.0
T = TypeVar("T")
logger = logging.getLogger(__name__)


class ResponseCache:
    def __init__(self, *, ttl_s: float = DEFAULT_TTL_S, size: int = 1024) -> None:
        # key -> (expires at, refresh from, value), by monotonic time
        self._items: OrderedDict[Hashable, tuple[float, float, Any]] = OrderedDict()
        self._ttl_s = ttl_s
        self._size = size
        self._lock = threading.Lock()
        self._generation = 0

    @property
    def generation(self) -> int:
        return self._generation

    def get(self, key: Hashable) -> Any:
        """The value stored for ``key`` while it is fresh, else None."""
        return self.lookup(key)[0]

    def lookup(self, key: Hashable) -> tuple[Any, bool]:
        """The value stored for ``key`` while it is fresh (else None), and whether it is in
        the last part of its life, due to be recomputed."""
        now = time.monotonic()
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None, False
            expires, refresh, body = item
            if expires < now:
                del self._items[key]
                return None, False
            self._items.move_to_end(key)
            return body, refresh <= now

    def put(self, key: Hashable, body: Any, *, generation: int | None = None) -> None:
        """Store ``body``; when ``generation`` is given, only if no write started since."""
        if self._ttl_s <= 0:
            return
        with self._lock:
            if generation is not None and generation != self._generation:
                return
            now = time.monotonic()
            margin = min(MAX_REFRESH_S, REFRESH_SHARE * self._ttl_s)
            self._items[key] = (now + self._ttl_s, now + self._ttl_s - margin, body)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            # expired entries at the cold end go now, not when evicted (some are large)
            while self._items and next(iter(self._items.values()))[0] < now:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every answer and advance the generation (a write started or committed)."""
        with self._lock:
            self._generation += 1
            self._items.clear()


async def cached_read(
    cache: ResponseCache | None,
    key: tuple[Any, ...],
    compute: Callable[[], Awaitable[T]],
    inflight: dict[tuple[Any, ...], asyncio.Future[Any]],
) -> T:
    """The cached answer for ``key``, else one computation per key and generation at a time
    (concurrent readers of one generation wait for the same computation), stored only if no
    write started meanwhile. An answer due for recomputation is served while one runs in the
    background (its failure leaves the answer to expire; the next reader then meets it)."""
    if cache is None:
        return await compute()
    body, due = cache.lookup(key)
    generation = cache.generation
    flight_key = (*key, generation)
    if body is not None:
        if due and flight_key not in inflight:
            _start(cache, key, generation, compute, inflight)
        return body
    future = inflight.get(flight_key)
    if future is None:
        future = _start(cache, key, generation, compute, inflight)
    waiters = _WAITERS.get(future)
    if waiters is not None:
        waiters.join()
    try:
        return await asyncio.shield(future)
    finally:
        if waiters is not None:
            waiters.leave()


class _Waiters:
    """The requests waiting for one computation; when the last leaves before it is done,
    the computation is abandoned: its token is set, and it stops at its next checkpoint. Its
    task is not cancelled: a task cancelled while its worker thread runs would give back its
    place in the pool (:mod:`app.api.heavy`) before the thread has stopped."""

    def __init__(self, task: asyncio.Future[Any], token: threading.Event) -> None:
        self.task = task
        self.token = token
        self.count = 0

    def join(self) -> None:
        self.count += 1

    def leave(self) -> None:
        self.count -= 1
        if self.count == 0 and not self.task.done():
            self.token.set()


_WAITERS: weakref.WeakKeyDictionary[asyncio.Future[Any], _Waiters] = weakref.WeakKeyDictionary()


def _start(
    cache: ResponseCache,
    key: tuple[Any, ...],
    generation: int,
    compute: Callable[[], Awaitable[Any]],
    inflight: dict[tuple[Any, ...], asyncio.Future[Any]],
) -> asyncio.Future[Any]:
    """Run ``compute`` once for ``key`` in ``generation``; its result is stored (under that
    generation) before anyone waiting for it resumes."""
    flight_key = (*key, generation)
    token = threading.Event()
    context = contextvars.copy_context()
    context.run(use_token, token)

    async def run() -> Any:
        return await compute()

    future: asyncio.Future[Any] = asyncio.get_running_loop().create_task(run(), context=context)
    _WAITERS[future] = _Waiters(future, token)
    inflight[flight_key] = future

    def finished(done: asyncio.Future[Any]) -> None:
        if inflight.get(flight_key) is done:
            del inflight[flight_key]
        if done.cancelled():
            return
        if (error := done.exception()) is not None:
            logger.debug("computing %r failed: %r", key[0], error)
            return
        cache.put(key, done.result(), generation=generation)

    future.add_done_callback(finished)
    return future


class ClearOnWriteMiddleware:
    """Clears the response cache when a write request (POST, PUT, PATCH, DELETE) starts, when
    its response starts (after its commit, before the client can read the answer) and when it
    ends."""

    WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
    # POSTs that only read or compute (Grafana's protocol posts its queries)
    READ_POSTS = ("/grafana/", "/v1/capacity/estimate", "/v1/capacity/simulate")

    def __init__(self, app, cache: ResponseCache) -> None:  # type: ignore[no-untyped-def]
        self.app = app
        self.cache = cache

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        if (
            scope["type"] != "http"
            or scope.get("method") not in self.WRITES
            or (scope.get("method") == "POST" and scope["path"].startswith(self.READ_POSTS))
        ):
            await self.app(scope, receive, send)
            return
        self.cache.clear()

        async def send_after_clearing(message):  # type: ignore[no-untyped-def]
            if message["type"] == "http.response.start":
                self.cache.clear()
            await send(message)

        try:
            await self.app(scope, receive, send_after_clearing)
        finally:
            self.cache.clear()
