"""The served plans' cache: a small thread-safe LRU of computed plans, keyed by what they
were computed from (:func:`app.plans.service.series_plan` builds the key in one query)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["PlanCache"]


class PlanCache:
    """A small thread-safe LRU of computed plans (:class:`app.plans.service.SeriesPlan`)."""

    def __init__(self, size: int = 256) -> None:
        self._items: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Any | None:
        with self._lock:
            plan = self._items.get(key)
            if plan is not None:
                self._items.move_to_end(key)
            return plan

    def put(self, key: tuple[Any, ...], plan: Any) -> None:
        with self._lock:
            self._items[key] = plan
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
