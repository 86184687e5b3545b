"""Where work items run: inline, a local process pool, or a Dask cluster.

Each executor yields results as they complete. Process-pool workers pin BLAS to one thread:
with default threading a statsmodels fit costs about twice the CPU and two workers on two
cores stall each other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed

from app.errors import InputError
from app.jobs.work import ItemResult, WorkItem, run_item

_BLAS_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _init_worker() -> None:
    for name in _BLAS_ENV:
        os.environ[name] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def run_inline(items: Sequence[WorkItem]) -> Iterator[ItemResult]:
    for item in items:
        yield run_item(item)


def run_process_pool(items: Sequence[WorkItem], *, workers: int) -> Iterator[ItemResult]:
    if workers <= 1:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            yield from run_inline(items)
        return
    with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker) as pool:
        futures = [pool.submit(run_item, item) for item in items]
        for future in as_completed(futures):
            yield future.result()


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
        for future in dask_completed(futures):
            yield future.result()
