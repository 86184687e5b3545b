"""Batch jobs: the nightly forecast, its lock, and the in-process cron scheduler (the pure work
items they ship, :mod:`app.forecasts.work`, re-exported)."""

from app.forecasts.work import METRICS, ItemResult, WorkItem, run_item
from app.jobs.locks import LockHeldError, job_lock
from app.jobs.nightly import (
    ForecastOptions,
    JobAbortedError,
    JobReport,
    progress_printer,
    run_forecasts,
)

__all__ = [
    "METRICS",
    "ForecastOptions",
    "ItemResult",
    "JobAbortedError",
    "JobReport",
    "LockHeldError",
    "WorkItem",
    "job_lock",
    "progress_printer",
    "run_forecasts",
    "run_item",
]
