"""The hourly cycle: import every series' source, refresh the forecasts, apply retention.

``gpucast schedule`` runs it every hour (at ``--hourly-minute``, default :05) and
``gpucast schedule --hourly-once`` runs it once, for cron or a Kubernetes CronJob.

1. **Import** (:func:`app.sources.import_sources`): the last complete hours of every series
   with a source; a failing source is recorded and skips only its series. Then the closed
   hours of every deployment with a serving source, into its profile's production hours
   (:func:`app.sources.import_serving_sources`), failing the same way.
2. **Refresh** (:func:`app.jobs.refresh.refresh_forecasts`): every forecast whose history grew
   is conditioned on the new hours and stored as a refresh run.
3. **Retention** (:func:`app.jobs.refresh.apply_retention`).

Overlap: a cycle holds the ``hourly`` lock, so two cycles never run at once (a second one is
refused with :class:`LockHeldError`). While a nightly run holds the ``nightly`` lock, the cycle
imports but skips refresh and retention: the nightly run is replacing the fits a refresh would
condition, and the next cycle refreshes the new ones. The cycle only probes the nightly lock,
so it never makes a nightly run that starts meanwhile exit with "lock held".

Each cycle is recorded as a ``job_runs`` row named ``hourly`` for ``/metrics``.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import OperationalError

from app.db import Database
from app.db.models import JobRun
from app.jobs.locks import job_lock, lock_held
from app.jobs.refresh import REFRESH_RETENTION_DAYS, apply_retention, refresh_forecasts
from app.sources import ServingOutcome, SourceOutcome, import_serving_sources, import_sources


@dataclass
class HourlyReport:
    imports: list[SourceOutcome] = field(default_factory=list)
    serving: list[ServingOutcome] = field(default_factory=list)
    refresh_lines: list[str] = field(default_factory=list)
    refresh_failed: list[str] = field(default_factory=list)
    retention_lines: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def failed(self) -> list[str]:
        """What went wrong, one label each: failed imports, refreshes and steps."""
        imports = [f"{o.series} import" for o in self.imports if o.failed]
        serving = [f"{o.series} serving import" for o in self.serving if o.failed]
        return imports + serving + self.refresh_failed + self.errors

    def lines(self) -> list[str]:
        lines = [o.line() for o in self.imports] or ["import: no series has a source"]
        lines += [o.line() for o in self.serving]
        lines += self.refresh_lines + self.retention_lines
        lines += [f"skipped {note}" for note in self.skipped]
        lines += [f"FAILED {error}" for error in self.errors]
        failed_imports = sum(o.failed for o in self.imports)
        serving = ""
        if self.serving:
            done = len(self.serving) - sum(o.failed for o in self.serving)
            serving = f", {done} of {len(self.serving)} serving sources"
        lines.append(
            f"hourly cycle in {self.wall_s:.1f}s: {len(self.imports) - failed_imports} of "
            f"{len(self.imports)} sources imported{serving}, {len(self.failed)} failures"
        )
        return lines


def run_hourly(
    database: Database,
    *,
    now: datetime | None = None,
    refresh_days: float = REFRESH_RETENTION_DAYS,
    nightly_days: float | None = None,
) -> HourlyReport:
    """One hourly cycle (see the module docstring). ``now`` (default: the clock) sets the last
    complete hour; raises :class:`LockHeldError` when another cycle runs."""
    started = time.perf_counter()
    report = HourlyReport()
    with job_lock(database, "hourly"):
        job_id = _start_job(database)
        try:
            report.imports = import_sources(database, now=now)
            report.serving = import_serving_sources(database, now=now)
            if lock_held(database, "nightly"):
                report.skipped.append(
                    "refresh and retention: a nightly run holds its lock (the next cycle "
                    "refreshes its new forecasts)"
                )
            else:
                _refresh(database, report)
                _retention(database, report, refresh_days=refresh_days, nightly_days=nightly_days)
        except BaseException as exc:
            report.errors.append(f"cycle: {type(exc).__name__}: {exc}")
            report.wall_s = time.perf_counter() - started
            _finish_quietly(database, job_id, report)
            raise
        report.wall_s = time.perf_counter() - started
        _finish_job(database, job_id, report)
    return report


def _refresh(database: Database, report: HourlyReport) -> None:
    try:
        refreshed = refresh_forecasts(database)
    except OperationalError:
        raise
    except Exception as exc:  # the refresh failing must not lose the imports' report
        report.errors.append(f"refresh: {type(exc).__name__}: {exc}")
        return
    report.refresh_lines = refreshed.lines()
    report.refresh_failed = [_label(item, "refresh") for item in refreshed.failed]


def _retention(
    database: Database, report: HourlyReport, *, refresh_days: float, nightly_days: float | None
) -> None:
    try:
        retained = apply_retention(database, refresh_days=refresh_days, nightly_days=nightly_days)
    except OperationalError:
        raise
    except Exception as exc:
        report.errors.append(f"retention: {type(exc).__name__}: {exc}")
        return
    report.retention_lines = retained.lines()


def _label(item: Any, step: str) -> str:
    series, metric = getattr(item, "series", None), getattr(item, "metric", None)
    return f"{series} {metric} {step}" if series and metric else f"{item} {step}"


def _start_job(database: Database) -> int:
    with database.transaction() as session:
        job = JobRun(name="hourly", status="running", items=0)
        session.add(job)
        session.flush()
        return job.id


def _finish_job(database: Database, job_id: int, report: HourlyReport) -> None:
    failed = report.failed
    with database.transaction() as session:
        job = session.get(JobRun, job_id)
        if job is None:
            return
        job.status = "failed" if failed else "complete"
        job.finished_at = datetime.now(UTC)
        job.duration_s = report.wall_s
        job.items = len(report.imports) + len(report.serving)
        job.failed = len(failed)
        job.failed_series = failed


def _finish_quietly(database: Database, job_id: int, report: HourlyReport) -> None:
    """Record a cycle that raised, if the database still answers (it may be why it raised)."""
    # The original error is what the caller reports.
    with contextlib.suppress(Exception):
        _finish_job(database, job_id, report)


__all__ = ["HourlyReport", "run_hourly"]
