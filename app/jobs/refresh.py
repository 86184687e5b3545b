"""The hourly refresh: condition every fitted forecast on the hours that arrived since its
latest run, without refitting, and keep the stored runs bounded.

:func:`refresh_forecasts` runs after every ingest (CLI, REST, Prometheus) for the series it
touched, on ``gpucast forecast --refresh`` and every hour in ``gpucast schedule``. For each
series x metric whose history grew past its latest complete run it takes the latest nightly
run's stored state (``forecasting.refresh``), forecasts the next ``horizon`` hours from the
newest hour and stores a complete run of kind ``refresh`` with ``parent_id`` = that nightly
run (model, scores and backtest error copied from it). Each series is written in one
transaction; a failure is that item's failed outcome, never the job's.

:func:`apply_retention` deletes refresh runs older than ``refresh_days`` (15 by default: more
than the calibration of ``band=auto`` replays, ``options.BAND_AUTO_DAYS``) and, when asked,
nightly runs older than ``nightly_days``; the newest complete run of every series x metric is
always kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import and_, delete, func, select
from sqlalchemy.orm import Session

from app.db import Database, batches, repository
from app.db.models import ForecastRun, Series
from app.forecasts.store import save_run
from app.forecasts.work import ALL_METRICS, METRIC_COLUMNS, ItemResult
from app.jobs.nightly import event_records

logger = logging.getLogger(__name__)

# History a refresh reads: ARIMA filters its last 28 days, the weekly mean four weeks.
HISTORY_HOURS = 28 * 24 + 48
REFRESH_RETENTION_DAYS = 15.0


@dataclass(frozen=True)
class RefreshOutcome:
    series: str
    metric: str
    status: str  # "refreshed" | "failed"
    trained_until: pd.Timestamp | None = None
    parent_id: int | None = None
    run_id: int | None = None
    error: str | None = None
    cpu_s: float = 0.0


@dataclass
class RefreshReport:
    outcomes: list[RefreshOutcome] = field(default_factory=list)
    up_to_date: int = 0
    without_state: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def refreshed(self) -> list[RefreshOutcome]:
        return [o for o in self.outcomes if o.status == "refreshed"]

    @property
    def failed(self) -> list[RefreshOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def lines(self) -> list[str]:
        lines = [
            f"refreshed {len(self.refreshed)} forecasts in {self.wall_s:.1f}s "
            f"({self.up_to_date} already current, {len(self.failed)} failed)"
        ]
        lines += [f"  FAILED {o.series} {o.metric}: {o.error}" for o in self.failed]
        lines += [f"  not refreshable: {note}" for note in self.without_state]
        return lines


@dataclass(frozen=True)
class _Parent:
    run_id: int
    series_id: int
    series: str
    metric: str
    horizon: int
    model: str | None
    state: dict[str, Any] | None
    backtest_metric: str
    backtest_error: float | None
    scores: list[dict[str, Any]]
    latest_trained_until: datetime | None


def _parents(session: Session, series: Sequence[str] | None) -> list[_Parent]:
    """The latest nightly run of every series x metric and the latest complete run's
    trained_until, in two queries."""
    nightly = (
        select(func.max(ForecastRun.id))
        .where(ForecastRun.status == "complete", ForecastRun.kind == "nightly")
        .group_by(ForecastRun.series_id, ForecastRun.metric)
    )
    query = (
        select(ForecastRun, Series.name)
        .join(Series, Series.id == ForecastRun.series_id)
        .where(ForecastRun.id.in_(nightly))
    )
    if series is None:
        runs = session.execute(query).all()
    else:
        runs = [
            row
            for part in batches(sorted(set(series)))
            for row in session.execute(query.where(Series.name.in_(part))).all()
        ]
    latest = dict(
        (
            ((sid, metric), trained)
            for sid, metric, trained in session.execute(
                select(
                    ForecastRun.series_id, ForecastRun.metric, func.max(ForecastRun.trained_until)
                )
                .where(ForecastRun.status == "complete")
                .group_by(ForecastRun.series_id, ForecastRun.metric)
            ).all()
        )
    )
    return [
        _Parent(
            run_id=run.id,
            series_id=run.series_id,
            series=name,
            metric=run.metric,
            horizon=run.horizon,
            model=run.model,
            state=run.state,
            backtest_metric=run.backtest_metric,
            backtest_error=run.backtest_error,
            scores=run.scores,
            latest_trained_until=latest.get((run.series_id, run.metric)),
        )
        for run, name in runs
        if run.metric in ALL_METRICS
    ]


def refresh_forecasts(database: Database, *, series: Sequence[str] | None = None) -> RefreshReport:
    """Refresh every series x metric (or those of ``series``) whose history grew past its
    latest complete run. Never raises for one item; see the module docstring."""
    started = time.perf_counter()
    report = RefreshReport()
    with database.transaction() as session:
        parents = _parents(session, series)
    by_series: dict[int, list[_Parent]] = {}
    for parent in parents:
        by_series.setdefault(parent.series_id, []).append(parent)
    for series_id, group in by_series.items():
        _refresh_series(database, series_id, group, report)
    report.wall_s = time.perf_counter() - started
    return report


def refresh_after_ingest(database: Database, series: Sequence[str]) -> list[str]:
    """Refresh the forecasts of series that just received hours; one note per outcome kind.
    The ingest has committed: a failure here is reported, never raised."""
    if not series:
        return []
    try:
        report = refresh_forecasts(database, series=series)
    except Exception as exc:  # noqa: BLE001 - the ingest itself succeeded
        logger.warning("refresh after ingest failed", exc_info=True)
        return [f"forecast refresh failed ({type(exc).__name__}); run 'gpucast forecast --refresh'"]
    notes = []
    if report.refreshed:
        done = ", ".join(f"{o.series} {o.metric}" for o in report.refreshed[:4])
        more = f" and {len(report.refreshed) - 4} more" if len(report.refreshed) > 4 else ""
        notes.append(f"refreshed the forecast of {done}{more} from the new hours")
    for o in report.failed:
        notes.append(f"forecast refresh failed for {o.series} {o.metric}: {o.error}")
    return notes


def _refresh_series(
    database: Database, series_id: int, group: list[_Parent], report: RefreshReport
) -> None:
    try:
        with database.transaction() as session:
            current = _current(session, series_id, group)
            if not current:
                return
            history = repository.recent_observations_frame(
                session, series_id=series_id, span=timedelta(hours=HISTORY_HOURS)
            )
            events = event_records(session, series_name=group[0].series)
            results = []
            for parent in current:
                result = _refresh_item(parent, history, events, report)
                if result is not None:
                    run = save_run(session, series_id=series_id, result=result)
                    results.append((parent, result, run.id))
        for parent, result, run_id in results:
            report.outcomes.append(
                RefreshOutcome(
                    series=parent.series,
                    metric=parent.metric,
                    status="refreshed" if result.status == "complete" else "failed",
                    trained_until=result.trained_until,
                    parent_id=parent.run_id,
                    run_id=run_id,
                    error=result.error,
                    cpu_s=result.duration_s,
                )
            )
    except Exception as exc:  # one series never stops the job
        logger.warning("refresh of %s failed", group[0].series, exc_info=True)
        for parent in group:
            report.outcomes.append(
                RefreshOutcome(
                    series=parent.series,
                    metric=parent.metric,
                    status="failed",
                    parent_id=parent.run_id,
                    error=f"{type(exc).__name__}: {exc}",
                )
            )


def _current(session: Session, series_id: int, group: list[_Parent]) -> list[_Parent]:
    """The group with each metric's newest trained_until read again under the series' row
    lock: concurrent refreshes of one series (20 ingests of new hours at once) queue here, and
    each one after the first finds the run it would store already there (nothing to do)."""
    locked = session.scalar(select(Series.id).where(Series.id == series_id).with_for_update())
    if locked is None:  # deleted meanwhile
        return []
    rows = session.execute(
        select(ForecastRun.metric, func.max(ForecastRun.trained_until))
        .where(ForecastRun.series_id == series_id, ForecastRun.status == "complete")
        .group_by(ForecastRun.metric)
    ).all()
    latest: dict[str, datetime | None] = {metric: trained for metric, trained in rows}
    return [replace(p, latest_trained_until=latest.get(p.metric)) for p in group]


def _refresh_item(
    parent: _Parent,
    history: pd.DataFrame,
    events: tuple[dict[str, Any], ...],
    report: RefreshReport,
) -> ItemResult | None:
    """The refresh run of one series x metric, or None when there is nothing to do."""
    column = history[METRIC_COLUMNS[parent.metric]]
    present = history.loc[column.notna().to_numpy(), "hour"]
    if present.empty:
        return None
    newest = present.max()
    latest = parent.latest_trained_until
    if latest is not None and newest <= pd.Timestamp(latest):
        report.up_to_date += 1
        return None
    if not parent.state:
        report.without_state.append(
            f"{parent.series} {parent.metric} (its nightly run has no refresh state: "
            "run the nightly forecast again)"
        )
        return None
    cpu = time.process_time()
    result = ItemResult(
        series=parent.series,
        metric=parent.metric,
        status="failed",
        horizon=parent.horizon,
        trained_until=newest,
        model=parent.model,
        backtest_metric=parent.backtest_metric,
        backtest_error=parent.backtest_error,
        scores=parent.scores,
        kind="refresh",
        parent_id=parent.run_id,
    )
    try:
        y = pd.Series(
            column.to_numpy(dtype="float64"),
            index=pd.DatetimeIndex(history["hour"]),
        ).dropna()
        result.forecast = conditioned_forecast(parent.state, y, parent.horizon, events)
        result.status = "complete"
        result.notes = [
            f"refresh of nightly run {parent.run_id} ({parent.model}) on the hours up to "
            f"{newest:%Y-%m-%d %H:%M}Z, without refitting"
        ]
    except Exception as exc:  # noqa: BLE001 - a failed refresh is stored as a failed run
        result.error = f"{type(exc).__name__}: {exc}"
    result.duration_s = time.process_time() - cpu
    return result


def conditioned_forecast(
    state: dict[str, Any],
    y: pd.Series,
    horizon: int,
    events: tuple[dict[str, Any], ...] = (),
) -> pd.DataFrame:
    """The refreshed forecast of ``y`` (history up to now) from a nightly state, with the
    events' multipliers applied as the nightly run applies them."""
    from forecasting.events import apply_multipliers, validate_events
    from forecasting.refresh import learnt_events, refresh

    frame = refresh(state, y, horizon=horizon)
    if events:
        table = pd.DataFrame(list(events))
        for column in ("start", "end"):
            table[column] = pd.to_datetime(table[column], utc=True)
        skip = learnt_events(state)
        frame, _ = apply_multipliers(frame, validate_events(table), skip=skip)
    return frame


# -- retention ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetentionReport:
    refresh_deleted: int
    nightly_deleted: int

    def lines(self) -> list[str]:
        return [
            f"retention: deleted {self.refresh_deleted} refresh runs and "
            f"{self.nightly_deleted} nightly runs"
        ]


def apply_retention(
    database: Database,
    *,
    refresh_days: float = REFRESH_RETENTION_DAYS,
    nightly_days: float | None = None,
    now: datetime | None = None,
) -> RetentionReport:
    """Delete refresh runs created more than ``refresh_days`` ago and, when given, nightly
    runs created more than ``nightly_days`` ago; the newest complete run of each series x
    metric and the nightly parent of a kept refresh survive. Points go with their runs."""
    now = now or datetime.now(UTC)
    with database.transaction() as session:
        keep = (
            select(func.max(ForecastRun.id))
            .where(ForecastRun.status == "complete")
            .group_by(ForecastRun.series_id, ForecastRun.metric)
        )
        keep_ids = set(session.scalars(keep))
        refresh_ids = _old_ids(session, "refresh", now - timedelta(days=refresh_days), keep_ids)
        _delete(session, refresh_ids)
        nightly_ids: list[int] = []
        if nightly_days is not None:
            parents = {
                parent
                for parent in session.scalars(
                    select(ForecastRun.parent_id).where(ForecastRun.parent_id.is_not(None))
                )
                if parent is not None
            }
            cutoff = now - timedelta(days=nightly_days)
            nightly_ids = _old_ids(session, "nightly", cutoff, keep_ids | parents)
            _delete(session, nightly_ids)
    return RetentionReport(refresh_deleted=len(refresh_ids), nightly_deleted=len(nightly_ids))


def _old_ids(session: Session, kind: str, cutoff: datetime, keep: set[int]) -> list[int]:
    ids = session.scalars(
        select(ForecastRun.id).where(
            and_(ForecastRun.kind == kind, ForecastRun.created_at < cutoff)
        )
    )
    return [i for i in ids if i not in keep]


def _delete(session: Session, ids: list[int]) -> None:
    from app.db.models import ForecastPoint

    for chunk in range(0, len(ids), 500):
        part = ids[chunk : chunk + 500]
        session.execute(delete(ForecastPoint).where(ForecastPoint.run_id.in_(part)))
        session.execute(delete(ForecastRun).where(ForecastRun.id.in_(part)))


__all__ = [
    "RefreshOutcome",
    "RefreshReport",
    "RetentionReport",
    "apply_retention",
    "conditioned_forecast",
    "refresh_after_ingest",
    "refresh_forecasts",
]
