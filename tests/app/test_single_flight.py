"""SingleFlight: concurrent callers join one computation, and callers just after it are
served its result (their snapshot may predate the row the computation stored)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from app.db import open_database
from app.db.engine import transaction_began
from app.plans import calibration_gate
from app.plans.calibration_gate import SingleFlight


class WaitedFuture(Future):  # type: ignore[type-arg]
    """The flight's future, counting the callers that wait on its result."""

    waiting = threading.Semaphore(0)

    def result(self, timeout: float | None = None) -> Any:
        WaitedFuture.waiting.release()
        return super().result(timeout)


def test_callers_during_a_computation_join_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibration_gate, "Future", WaitedFuture)
    monkeypatch.setattr(WaitedFuture, "waiting", threading.Semaphore(0))
    flight: SingleFlight[int] = SingleFlight()
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        started.set()
        release.wait(10)
        return 7

    results: list[tuple[int, bool]] = []
    leader = threading.Thread(target=lambda: results.append(flight.run("k", compute)))
    leader.start()
    assert started.wait(10)
    joiners = [
        threading.Thread(target=lambda: results.append(flight.run("k", compute))) for _ in range(3)
    ]
    for thread in joiners:
        thread.start()
    # released only once all three wait on the running computation (a late one would find
    # it done and compute again, whatever the flight does)
    for _ in joiners:
        assert WaitedFuture.waiting.acquire(timeout=10), "a caller did not wait on the flight"
    release.set()
    for thread in [leader, *joiners]:
        thread.join(10)
    assert calls == [1]
    assert sorted(results) == [(7, False)] * 3 + [(7, True)]


def test_a_caller_whose_view_began_before_a_computation_ended_is_served_its_result() -> None:
    flight: SingleFlight[int] = SingleFlight(kept_s=60)
    began = time.monotonic()
    assert flight.run("k", lambda: 1, began_at=began) == (1, True)
    assert flight.run("k", lambda: 2, began_at=began) == (1, False)
    assert flight.run("other", lambda: 3, began_at=began) == (3, True)


def test_a_caller_whose_view_began_after_it_computes_again() -> None:
    """Its view can see what the computation stored: if it found nothing, nothing is there."""
    flight: SingleFlight[int] = SingleFlight(kept_s=60)
    assert flight.run("k", lambda: 1) == (1, True)
    assert flight.run("k", lambda: 2, began_at=time.monotonic()) == (2, True)
    assert flight.run("k", lambda: 3) == (3, True)  # no view noted: nothing is assumed


def test_a_kept_result_expires() -> None:
    flight: SingleFlight[int] = SingleFlight(kept_s=0.0)
    began = time.monotonic()
    assert flight.run("k", lambda: 1, began_at=began) == (1, True)
    assert flight.run("k", lambda: 2, began_at=began) == (2, True)


def test_kept_results_are_bounded() -> None:
    flight: SingleFlight[int] = SingleFlight(kept_s=60, most_kept=2)
    began = time.monotonic()
    for key in ("a", "b", "c"):
        flight.run(key, lambda: 1, began_at=began)
    assert flight.run("a", lambda: 9, began_at=began) == (9, True)  # the oldest was dropped
    assert flight.run("c", lambda: 9, began_at=began) == (1, False)


def test_a_failure_reaches_the_caller_and_is_not_kept() -> None:
    flight: SingleFlight[int] = SingleFlight(kept_s=60)

    def fail() -> int:
        raise RuntimeError("replay failed")

    with pytest.raises(RuntimeError, match="replay failed"):
        flight.run("k", fail)
    assert flight.run("k", lambda: 4, began_at=time.monotonic() - 60) == (4, True)


def test_a_sessions_transaction_notes_when_it_began(tmp_path: Path) -> None:
    """What band auto passes as ``began_at``: no later than the transaction's first read, and
    renewed with each transaction of the session."""
    database = open_database(f"sqlite:///{tmp_path / 'began.db'}")
    with database.read_transaction() as session:
        assert transaction_began(session) is None  # nothing read yet
        before = time.monotonic()
        session.execute(text("SELECT 1"))
        first = transaction_began(session)
        assert first is not None and before <= first <= time.monotonic()
        session.commit()
        session.execute(text("SELECT 1"))
        second = transaction_began(session)
        assert second is not None and second > first
