"""Where work items run: inline, a local process pool, or a Dask cluster.

Each executor yields results as they complete. Process-pool workers pin BLAS to one thread:
with default threading a statsmodels fit costs about twice the CPU and two workers on two
cores stall each other.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from app.errors import InputError
from app.forecasts.work import ItemResult, WorkItem, failed_result, run_item

_BLAS_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _init_worker() -> None:
    for name in _BLAS_ENV:
        os.environ[name] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def run_inline(items: Sequence[WorkItem]) -> Iterator[ItemResult]:
    for item in items:
        try:
            result = run_item(item)
        except Exception as exc:  # run_item never raises; anything around it fails one item
            result = failed_result(item, exc, stage="in its worker")
        yield result


def run_process_pool(items: Sequence[WorkItem], *, workers: int) -> Iterator[ItemResult]:
    """Results as they complete. An item whose worker raised or died becomes its failed result;
    after a worker died, the items still unfinished run one at a time in fresh single-worker
    pools, so only the item that kills a worker fails."""
    if workers <= 1:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            yield from run_inline(items)
        return
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker)
    unfinished: list[WorkItem] = []
    try:
        futures = {pool.submit(run_item, item): item for item in items}
        for future in as_completed(futures):
            error = future.exception()
            if isinstance(error, BrokenProcessPool):
                unfinished.append(futures[future])
            elif error is not None:
                yield failed_result(futures[future], error, stage="in its worker")
            else:
                yield future.result()
    finally:
        # Also when the consumer stops early: queued items are dropped, not all computed.
        pool.shutdown(wait=True, cancel_futures=True)
    order = {id(item): index for index, item in enumerate(items)}
    yield from _one_at_a_time(sorted(unfinished, key=lambda item: order[id(item)]))


def _one_at_a_time(items: Sequence[WorkItem]) -> Iterator[ItemResult]:
    pool: ProcessPoolExecutor | None = None
    try:
        for item in items:
            if pool is None:
                pool = ProcessPoolExecutor(max_workers=1, initializer=_init_worker)
            future = pool.submit(run_item, item)
            error = future.exception()
            if error is None:
                yield future.result()
                continue
            yield failed_result(item, error, stage="in its worker")
            if isinstance(error, BrokenProcessPool):
                pool.shutdown(wait=True)
                pool = None
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


#: Work items per Dask task: each task costs the scheduler a round trip in which its worker may
#: sit idle, so items travel in small batches — small enough that the last batches still
#: spread over every worker.
DASK_BATCH_MAX = 8
DASK_TASKS_PER_WORKER = 16


def run_items(items: Sequence[WorkItem]) -> list[ItemResult]:
    """:func:`run_item` over a batch (one Dask task)."""
    return [run_item(item) for item in items]


def dask_batches(items: Sequence[WorkItem], workers: int) -> list[list[WorkItem]]:
    """Consecutive batches of at most ``DASK_BATCH_MAX`` items, at least
    ``DASK_TASKS_PER_WORKER`` tasks per worker where there are items for them."""
    size = max(1, min(DASK_BATCH_MAX, len(items) // max(1, workers * DASK_TASKS_PER_WORKER)))
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def run_dask(items: Sequence[WorkItem], *, scheduler: str | object) -> Iterator[ItemResult]:
    """Run on a Dask cluster: ``scheduler`` is an address (``tcp://host:8786``) or a cluster.

    Items travel in small batches (:func:`dask_batches`); a batch whose task raised or lost its
    worker is run again one item per task, so only the item at fault fails."""
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise InputError(
            "the Dask executor needs the 'dask' extra: pip install 'gpucast[dask]'"
        ) from exc
    try:
        client = Client(scheduler, timeout="10s")
    except OSError as exc:
        raise InputError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from exc
    with client:
        client.run(_init_worker)
        yield from run_on_client(client, items, completed=dask_completed)


def run_on_client(
    client: Any,
    items: Sequence[WorkItem],
    *,
    completed: Any,
    task: Callable[[Sequence[WorkItem]], list[ItemResult]] = run_items,
) -> Iterator[ItemResult]:
    """The items in batches on a Dask ``client`` (``completed``: distributed's
    ``as_completed``; ``task``: what a worker runs on a batch)."""
    batches = dask_batches(items, workers=len(client.nthreads()) or 1)
    retry: list[WorkItem] = []
    for batch, outcome in _dask_results(client, completed, task, batches):
        if not isinstance(outcome, BaseException):
            yield from outcome
        elif len(batch) > 1:
            retry.extend(batch)
        else:
            yield failed_result(batch[0], outcome, stage="on its Dask worker")
    singles = [[item] for item in retry]
    for batch, outcome in _dask_results(client, completed, task, singles):
        if isinstance(outcome, BaseException):
            yield failed_result(batch[0], outcome, stage="on its Dask worker")
        else:
            yield from outcome


def _dask_results(
    client: Any, completed: Any, task: Any, batches: list[list[WorkItem]]
) -> Iterator[tuple[list[WorkItem], list[ItemResult] | BaseException]]:
    """(batch, its results or the exception its task raised), as the tasks complete; each
    result is released from its worker once read."""
    if not batches:
        return
    futures = client.map(task, batches, pure=False)
    by_key = {future.key: batch for future, batch in zip(futures, batches, strict=True)}
    pending = completed(futures)
    del futures
    for future in pending:
        batch = by_key.pop(future.key)
        outcome: list[ItemResult] | BaseException
        try:
            outcome = future.result()
        except Exception as exc:  # a task that raised or lost its worker
            outcome = exc
        future.release()
        del future
        yield batch, outcome
