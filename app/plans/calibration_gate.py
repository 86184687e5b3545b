"""What bounds the band=auto calibrations that reads compute (:mod:`app.plans.auto_band`).

A calibration replays a week of hourly plans (seconds of CPU) and stores a row, and any read
naming new plan parameters asks for one. Two bounds keep anonymous reads from filling the
table or starving other requests:

- :class:`ReadBudget`: per series x profile x nightly run, reads compute at most
  ``READ_CALIBRATIONS_PER_NIGHT`` parameter sets besides the default parameters (those the
  nightly job and ``gpucast plan`` store do not count); a read asking for one more is refused
  (429) at once, before any replay.
- :class:`SingleFlight`: concurrent reads asking for the same calibration join one
  computation; reads arriving after it ended whose transaction began before its row was
  stored (so may not see it) are served its result (for ``FINISHED_KEPT_S`` seconds), and
  reads begun later find the stored row.

Both are per process; with several server processes the bound is per process.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")

#: Parameter sets (besides the defaults) reads may calibrate per series x profile x night.
READ_CALIBRATIONS_PER_NIGHT = 8
#: Scopes (series x profile x night) remembered per process.
REMEMBERED = 4096
#: How long a finished computation still serves callers arriving after it (seconds).
FINISHED_KEPT_S = 120.0


class ReadBudget:
    """Which parameter sets reads may calibrate in one scope (series x profile x nightly run):
    those already granted in this process, or new ones while the scope holds fewer than
    ``per_scope`` (granted here or stored by reads, as the database says)."""

    def __init__(self, per_scope: int = READ_CALIBRATIONS_PER_NIGHT) -> None:
        self.per_scope = per_scope
        self._granted: OrderedDict[Hashable, set[str]] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, scope: Hashable, key: str, stored: Iterable[str]) -> bool:
        with self._lock:
            granted = self._granted.setdefault(scope, set())
            self._granted.move_to_end(scope)
            while len(self._granted) > REMEMBERED:
                self._granted.popitem(last=False)
            if key in granted:
                return True
            if len(granted | set(stored)) >= self.per_scope:
                return False
            granted.add(key)
            return True


class SingleFlight(Generic[T]):
    """``run(key, compute, began_at)``: the first caller computes; callers arriving while it
    does wait for its result instead of computing it again. A caller arriving after it
    succeeded whose view began before that (``began_at``, time.monotonic(); a transaction
    snapshot that cannot see what the computation stored) gets its result too, for up to
    ``kept_s`` seconds. Returns (value, whether this caller computed it). A failure is
    raised to every waiting caller and is not kept."""

    def __init__(self, kept_s: float = FINISHED_KEPT_S, most_kept: int = REMEMBERED) -> None:
        self.kept_s = kept_s
        self.most_kept = most_kept
        self._running: dict[Hashable, Future[T]] = {}
        self._finished: OrderedDict[Hashable, tuple[float, T]] = OrderedDict()
        self._lock = threading.Lock()

    def run(
        self, key: Hashable, compute: Callable[[], T], began_at: float | None = None
    ) -> tuple[T, bool]:
        with self._lock:
            self._forget_expired()
            finished = self._finished.get(key)
            if finished is not None and began_at is not None and began_at < finished[0]:
                return finished[1], False
            future = self._running.get(key)
            leader = future is None
            if future is None:
                future = self._running[key] = Future()
        if not leader:
            return future.result(), False
        try:
            value = compute()
        except BaseException as exc:
            with self._lock:
                self._running.pop(key, None)
            future.set_exception(exc)
            raise
        with self._lock:
            # kept before the flight is dropped: a caller finds one or the other
            self._finished[key] = (time.monotonic(), value)
            self._finished.move_to_end(key)
            while len(self._finished) > self.most_kept:
                self._finished.popitem(last=False)
            self._running.pop(key, None)
        future.set_result(value)
        return value, True

    def _forget_expired(self) -> None:
        now = time.monotonic()
        while self._finished:
            key, (finished_at, _) = next(iter(self._finished.items()))
            if now - finished_at < self.kept_s:
                break
            del self._finished[key]
