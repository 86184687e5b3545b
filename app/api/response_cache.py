"""A short-lived cache of encoded read responses, served without touching the database.

Dashboards poll the same plan every few seconds. A hit costs a dict lookup on the event loop:
no thread hop, no database round trip. The price is staleness bounded by ``ttl_s``: a new
forecast stored by another process (the nightly job) shows up at most that late; writes made
through this process clear the cache at once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable

DEFAULT_TTL_S = 5.0


class ResponseCache:
    def __init__(self, *, ttl_s: float = DEFAULT_TTL_S, size: int = 1024) -> None:
        self._items: OrderedDict[Hashable, tuple[float, bytes]] = OrderedDict()
        self._ttl_s = ttl_s
        self._size = size
        self._lock = threading.Lock()

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

    def put(self, key: Hashable, body: bytes) -> None:
        if self._ttl_s <= 0:
            return
        with self._lock:
            self._items[key] = (time.monotonic() + self._ttl_s, body)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class ClearOnWriteMiddleware:
    """Clears the response cache after every write request (POST, PUT, PATCH, DELETE)."""

    WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

    def __init__(self, app, cache: ResponseCache) -> None:  # type: ignore[no-untyped-def]
        self.app = app
        self.cache = cache

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        try:
            await self.app(scope, receive, send)
        finally:
            if scope["type"] == "http" and scope.get("method") in self.WRITES:
                self.cache.clear()
