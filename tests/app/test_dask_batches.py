"""The Dask executor's batches: every item once, in order, small enough to spread over the
workers; a batch whose task fails is run again item by item, so only the item at fault fails.
A fake client runs the tasks in process (the real LocalCluster path is in test_jobs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from app.forecasts.work import ItemResult, WorkItem
from app.jobs.executors import DASK_BATCH_MAX, dask_batches, run_on_client


def _items(count: int) -> list[WorkItem]:
    return [
        WorkItem(
            series=f"s{i}", metric="requests", hours_ns=np.zeros(0, "int64"), values=np.zeros(0)
        )
        for i in range(count)
    ]


class FakeFuture:
    def __init__(self, key: str, outcome: Any) -> None:
        self.key, self._outcome, self.released = key, outcome, False

    def result(self) -> Any:
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    def release(self) -> None:
        self.released = True


class FakeClient:
    """Runs each task when it is mapped; records the batches it was given."""

    def __init__(self, workers: int) -> None:
        self.workers, self.mapped, self.futures = workers, [], []

    def nthreads(self) -> dict[str, int]:
        return {f"tcp://worker-{i}": 1 for i in range(self.workers)}

    def map(self, task: Any, batches: list, pure: bool) -> list[FakeFuture]:
        assert pure is False
        futures = []
        for batch in batches:
            self.mapped.append([item.series for item in batch])
            try:
                outcome: Any = task(batch)
            except Exception as exc:  # what a lost worker looks like to the client
                outcome = exc
            futures.append(FakeFuture(f"task-{len(self.futures)}", outcome))
            self.futures.append(futures[-1])
        return futures


def _done(items: Sequence[WorkItem]) -> list[ItemResult]:
    for item in items:
        if item.series == "s13":
            raise RuntimeError("worker lost")
    return [ItemResult(i.series, i.metric, "complete", i.horizon) for i in items]


@pytest.mark.parametrize(
    ("count", "workers", "size"), [(2000, 2, DASK_BATCH_MAX), (100, 2, 3), (20, 2, 1), (1, 4, 1)]
)
def test_batches_hold_every_item_once_in_order(count: int, workers: int, size: int) -> None:
    items = _items(count)
    batches = dask_batches(items, workers=workers)
    assert [i for batch in batches for i in batch] == items
    assert max(len(b) for b in batches) == size
    assert len(batches) == -(-count // size)


def test_a_failed_batch_is_rerun_item_by_item() -> None:
    items = _items(100)
    client = FakeClient(workers=2)
    results = list(run_on_client(client, items, completed=iter, task=_done))
    assert sorted(r.series for r in results) == sorted(i.series for i in items)
    failed = [r for r in results if r.status != "complete"]
    assert [(r.series, r.status) for r in failed] == [("s13", "failed")]
    assert "worker lost" in failed[0].error and "on its Dask worker" in failed[0].error
    # batches of three; the one holding s13 came back failed and ran again one item per task
    assert client.mapped[4] == ["s12", "s13", "s14"]
    assert client.mapped[-3:] == [["s12"], ["s13"], ["s14"]]
    assert all(future.released for future in client.futures)


def test_no_items_no_tasks() -> None:
    client = FakeClient(workers=2)
    assert list(run_on_client(client, [], completed=iter, task=_done)) == []
    assert client.mapped == []
