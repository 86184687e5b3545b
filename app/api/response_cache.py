"""A short-lived cache of encoded read responses, served without touching the database.

Dashboards poll the same plan every few seconds. A hit costs a dict lookup on the event loop:
no thread hop, no database round trip. The price is staleness bounded by ``ttl_s``: a new
forecast stored by another process (the nightly job) shows up at most that late; writes made
through this process clear the cache at once.

A write also advances the cache's *generation*, when it starts and again when its response
starts (it has committed by then). A read stores its answer only under the generation it
started in, so an answer computed from the state before a write is never stored after it; and
readers join a computation in flight only within one generation (:func:`cached_read`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

DEFAULT_TTL_S = 5.0


class ResponseCache:
    def __init__(self, *, ttl_s: float = DEFAULT_TTL_S, size: int = 1024) -> None:
        self._items: OrderedDict[Hashable, tuple[float, bytes]] = OrderedDict()
        self._ttl_s = ttl_s
        self._size = size
        self._lock = threading.Lock()
        self._generation = 0

    @property
    def generation(self) -> int:
        return self._generation

    def get(self, key: Hashable) -> bytes | None:
        now = time.monotonic()
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            expires, body = item
            if expires < now:
                del self._items[key]
                return None
            return body

    def put(self, key: Hashable, body: bytes, *, generation: int | None = None) -> None:
        """Store ``body``; when ``generation`` is given, only if no write started since."""
        if self._ttl_s <= 0:
            return
        with self._lock:
            if generation is not None and generation != self._generation:
                return
            self._items[key] = (time.monotonic() + self._ttl_s, body)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every answer and advance the generation (a write started or committed)."""
        with self._lock:
            self._generation += 1
            self._items.clear()


async def cached_read(
    cache: ResponseCache | None,
    key: tuple[Any, ...],
    compute: Callable[[], Awaitable[bytes]],
    inflight: dict[tuple[Any, ...], asyncio.Future[bytes]],
) -> bytes:
    """The cached answer for ``key``, else one computation per key and generation at a time
    (concurrent readers of one generation wait for the same computation), stored only if no
    write started meanwhile."""
    if cache is None:
        return await compute()
    body = cache.get(key)
    if body is not None:
        return body
    generation = cache.generation
    flight_key = (*key, generation)
    future = inflight.get(flight_key)
    if future is not None:
        return await asyncio.shield(future)
    future = asyncio.ensure_future(compute())
    inflight[flight_key] = future
    try:
        body = await asyncio.shield(future)
    finally:
        inflight.pop(flight_key, None)
    cache.put(key, body, generation=generation)
    return body


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
