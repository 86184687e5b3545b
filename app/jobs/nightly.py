"""The nightly forecast: load every series in the parent, fit in workers, write back here.

Each finished series x metric is written in its own transaction as soon as it arrives, so a
run killed halfway leaves the completed series stored and nothing half-written.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import Database, is_unavailable, repository
from app.db.models import GpuProfileLoadTest, JobRun, SeriesDeployment
from app.errors import AppError, InputError
from app.forecasts.store import save_run
from app.forecasts.work import (
    ALL_METRICS,
    METRIC_COLUMNS,
    METRICS,
    MIX_METRICS,
    ItemResult,
    WorkItem,
    as_failed,
    describe,
)
from app.jobs.executors import run_dask, run_process_pool
from app.jobs.locks import job_lock

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ForecastOptions:
    series: tuple[str, ...] | None = None  # None = every series
    metrics: tuple[str, ...] = METRICS
    horizon: int = 24
    models: tuple[str, ...] | None = None
    windows: int | None = None
    backtest_metric: str = "mase"
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    scheduler: str | object | None = None

    def validate(self) -> None:
        unknown = [m for m in self.metrics if m not in ALL_METRICS]
        if unknown:
            choices = ", ".join(ALL_METRICS)
            raise InputError(f"unknown metric {unknown[0]!r}; choose from {choices}")
        if not 1 <= self.horizon <= 24 * 14:
            raise InputError(f"horizon must be 1..336 hours, got {self.horizon}")
        if self.workers < 1:
            raise InputError("workers must be at least 1")
        if self.models is not None:
            from forecasting import MODELS

            if not self.models:  # e.g. models=",," split to nothing: no run would fit
                raise InputError(
                    f"models names no candidate; choose from {', '.join(sorted(MODELS))}"
                )
            bad = [m for m in self.models if m not in MODELS]
            if bad:
                raise InputError(
                    f"unknown model {bad[0]!r}; choose from {', '.join(sorted(MODELS))}"
                )


@dataclass
class JobReport:
    results: list[ItemResult]
    skipped: list[str]
    wall_s: float

    @property
    def failed(self) -> list[ItemResult]:
        return [r for r in self.results if r.status != "complete"]

    def table(self) -> list[str]:
        header = (
            f"{'SERIES':<32} {'METRIC':<8} {'STATUS':<9} {'MODEL':<16} {'ERROR':>8} {'TIME':>7}"
        )
        lines = [header]
        for r in sorted(self.results, key=lambda r: (r.series, r.metric)):
            error = f"{r.backtest_error:.3f}" if r.backtest_error is not None else "-"
            lines.append(
                f"{r.series[:32]:<32} {r.metric:<8} {r.status:<9} "
                f"{(r.model or '-')[:16]:<16} {error:>8} {r.duration_s:>6.1f}s"
            )
        lines.append(
            f"{len(self.results)} forecasts in {self.wall_s:.1f}s, {len(self.failed)} failed"
        )
        for r in self.failed:
            lines.append(f"  FAILED {r.series} {r.metric}: {r.error}")
        lines.extend(f"  skipped {note}" for note in self.skipped)
        return lines


def event_records(session: Session, *, series_name: str) -> tuple[dict[str, Any], ...]:
    """The series' business events (its own and the global ones) as plain values for a
    work item: name, ISO start and end, and the multiplier when one is set."""
    return tuple(
        {
            "name": e.name,
            "start": e.start.isoformat(),
            "end": e.end.isoformat(),
            **({"multiplier": e.multiplier} if e.multiplier else {}),
        }
        for e, _ in repository.list_events(session, series_name=series_name)
    )


def build_items(
    database: Database, options: ForecastOptions, *, failures: list[ItemResult] | None = None
) -> tuple[list[WorkItem], list[str]]:
    """Load history for every requested series x metric (in the parent process), one
    transaction per series. With ``failures``, a series whose history cannot be loaded
    becomes a failed result there (one per metric) instead of raising; a database that cannot
    be reached always raises."""
    items: list[WorkItem] = []
    skipped: list[str] = []
    with database.transaction() as session:
        if options.series is None:
            names = [series.name for series in repository.list_series(session)]
        else:
            names = [repository.get_series(session, name=n).name for n in options.series]
    for name in names:
        try:
            with database.transaction() as session:
                items.extend(_series_items(session, name, options, skipped))
        except Exception as exc:
            if failures is None or is_unavailable(exc):
                raise
            failures.extend(
                ItemResult(
                    series=name,
                    metric=metric,
                    status="failed",
                    horizon=options.horizon,
                    backtest_metric=options.backtest_metric,
                    error=f"failed loading its history: {describe(exc)}",
                )
                for metric in options.metrics
            )
    return items, skipped


def sized_at_slo(session: Session, *, series_id: int) -> bool:
    """True when the series is deployed with an SLO on a load-test profile: its plans size
    each hour at the forecast prompt/completion mix, so the nightly forecasts the mix too."""
    found = session.scalar(
        select(SeriesDeployment.series_id)
        .join(
            GpuProfileLoadTest,
            GpuProfileLoadTest.gpu_profile_id == SeriesDeployment.gpu_profile_id,
        )
        .where(
            SeriesDeployment.series_id == series_id,
            SeriesDeployment.ttft_p95_s.is_not(None),
            SeriesDeployment.tpot_p95_s.is_not(None),
        )
    )
    return found is not None


def _series_items(
    session: Session, name: str, options: ForecastOptions, skipped: list[str]
) -> list[WorkItem]:
    series = repository.get_series(session, name=name)
    history = repository.observations_frame(session, series_id=series.id)
    events = event_records(session, series_name=series.name)
    items = []
    metrics = options.metrics
    if metrics == METRICS and sized_at_slo(session, series_id=series.id):
        metrics = (*METRICS, *MIX_METRICS)
    for metric in metrics:
        column = history[METRIC_COLUMNS[metric]]
        present = column.notna().to_numpy()
        if not present.any():
            skipped.append(f"{series.name} {metric}: no {metric} data")
            continue
        hours = history["hour"].to_numpy(dtype="datetime64[ns]").astype("int64")
        items.append(
            WorkItem(
                series=series.name,
                metric=metric,
                hours_ns=hours[present],
                values=column.to_numpy(dtype="float64")[present],
                horizon=options.horizon,
                models=options.models,
                windows=options.windows,
                backtest_metric=options.backtest_metric,
                events=events,
            )
        )
    return items


def execute(items: Sequence[WorkItem], options: ForecastOptions) -> Iterator[ItemResult]:
    if options.scheduler is not None:
        return run_dask(items, scheduler=options.scheduler)
    if options.workers <= 1 or len(items) <= 1:
        return run_process_pool(items, workers=1)
    return run_process_pool(items, workers=min(options.workers, len(items)))


def run_forecasts(
    database: Database,
    options: ForecastOptions,
    *,
    progress: Callable[[int], Callable[[ItemResult], None]] | None = None,
    lock: bool = True,
) -> JobReport:
    """Forecast every requested series x metric and store each run as it completes.

    Any error inside one series x metric (loading, fitting, in its worker, storing) makes that
    item a failed run recording the error, and the job carries on. Only a database that cannot
    be reached stops it: :class:`JobAbortedError` (exit code 3), carrying the partial report.
    ``progress`` is called with the number of work items and returns a per-result callback.
    """
    options.validate()
    started = time.perf_counter()
    guard = job_lock(database) if lock else _no_lock()
    with guard:
        failures: list[ItemResult] = []
        items, skipped = build_items(database, options, failures=failures)
        expected = len(items) + len(failures)
        job_id = _start_job(database, expected)
        on_result = progress(expected) if progress is not None else None
        results: list[ItemResult] = []
        aborted: BaseException | None = None
        try:
            for result in itertools.chain(failures, execute(items, options)):
                results.append(_store_or_fail(database, result))
                if on_result is not None:
                    on_result(results[-1])
        except BaseException as exc:
            aborted = exc
            raise
        finally:
            report = JobReport(
                results=results, skipped=skipped, wall_s=time.perf_counter() - started
            )
            _finish_job(database, job_id, report, expected=expected, aborted=aborted)
    return report


class JobAbortedError(AppError):
    """The database became unreachable during the run; ``report`` holds what was stored."""

    status_code = 503

    def __init__(self, message: str, report: JobReport | None = None) -> None:
        super().__init__(message)
        self.report = report


def _store_or_fail(database: Database, result: ItemResult) -> ItemResult:
    """Store ``result``; if that raises, store it as a failed run recording the error instead.
    When neither can be stored because the database is unreachable, the job stops."""
    try:
        _store(database, result)
        return result
    except Exception as exc:
        logger.warning("storing %s %s failed", result.series, result.metric, exc_info=True)
        failed = as_failed(result, exc, stage="storing its run")
    try:
        _store(database, failed)
    except Exception as exc:
        if is_unavailable(exc):
            raise JobAbortedError(
                f"database unavailable while storing {result.series} {result.metric}: "
                f"{describe(exc).splitlines()[0]}"
            ) from exc
        failed.error = f"{failed.error}; the failed run was not stored: {describe(exc)}"
    return failed


def _start_job(database: Database, items: int) -> int:
    with database.transaction() as session:
        job = JobRun(name="nightly", status="running", items=items)
        session.add(job)
        session.flush()
        return job.id


def _finish_job(
    database: Database,
    job_id: int,
    report: JobReport,
    *,
    expected: int,
    aborted: BaseException | None,
) -> None:
    if isinstance(aborted, JobAbortedError):
        aborted.report = report
    try:
        _record_finish(database, job_id, report, expected=expected)
    except Exception:
        if aborted is None:
            raise
        # Already failing (the database is likely gone): keep the first error. The job row
        # stays 'running' and its missing items count as failed on /metrics.
        logger.warning("recording the end of job %s failed", job_id, exc_info=True)


def _record_finish(database: Database, job_id: int, report: JobReport, *, expected: int) -> None:
    failed = report.failed
    complete = len(report.results) == expected
    with database.transaction() as session:
        job = session.get(JobRun, job_id)
        if job is None:
            return
        job.status = "complete" if complete and not failed else "failed"
        job.finished_at = datetime.now(UTC)
        job.duration_s = report.wall_s
        job.failed = len(failed) + (expected - len(report.results))
        job.failed_series = sorted({f"{r.series} {r.metric}" for r in failed})


def _store(database: Database, result: ItemResult) -> None:
    with database.transaction() as session:
        series = repository.get_series(session, name=result.series)
        save_run(session, series_id=series.id, result=result)


class _no_lock:  # noqa: N801 - used like a context-manager function
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def progress_printer(total: int) -> Callable[[ItemResult], None]:
    """A tqdm progress bar on stderr (hidden when stderr is not a terminal)."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc="forecasting", unit=" series", file=sys.stderr, disable=None)

    def update(result: ItemResult) -> None:
        bar.set_postfix_str(f"{result.series} {result.metric}: {result.model or result.status}")
        bar.update(1)
        if bar.n >= total:
            bar.close()

    return update


__all__ = [
    "ForecastOptions",
    "JobAbortedError",
    "JobReport",
    "build_items",
    "progress_printer",
    "run_forecasts",
]
