"""Where work items run: inline, a local process pool, or a Dask cluster.

Each executor yields results as they complete. Process-pool workers pin BLAS to one thread:
with default threading a statsmodels fit costs about twice the CPU and two workers on two
cores stall each other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from app.errors import InputError
from app.jobs.work import ItemResult, WorkItem, failed_result, run_item

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


def run_dask(items: Sequence[WorkItem], *, scheduler: str | object) -> Iterator[ItemResult]:
    """Run on a Dask cluster: ``scheduler`` is an address (``tcp://host:8786``) or a cluster."""
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
        futures = client.map(run_item, list(items), pure=False)
        by_key = {future.key: item for future, item in zip(futures, items, strict=True)}
        completed = dask_completed(futures)
        # Each result is released from its worker once read: held to the end of the run, a
        # thousand series' results made the workers' heaps (and garbage collections) grow.
        del futures
        for future in completed:
            item = by_key.pop(future.key)
            try:
                result = future.result()
            except Exception as exc:  # a task that raised or lost its worker fails alone
                result = failed_result(item, exc, stage="on its Dask worker")
            future.release()
            del future
            yield result
