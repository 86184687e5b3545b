"""Forecast runs and points: write one run per transaction, read the latest complete run."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import pandas as pd
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from app.db.models import ForecastPoint, ForecastRun
from app.errors import NotFoundError

if TYPE_CHECKING:
    from app.jobs.work import ItemResult

POINT_COLUMNS = ("ds", "yhat", "lo_80", "hi_80", "lo_95", "hi_95")


def save_run(session: Session, *, series_id: int, result: ItemResult) -> ForecastRun:
    """Store a run and its points (flush only; the caller's commit makes both visible)."""
    run = ForecastRun(
        series_id=series_id,
        metric=result.metric,
        status=result.status,
        trained_until=_py(result.trained_until),
        horizon=result.horizon,
        model=result.model,
        backtest_metric=result.backtest_metric,
        backtest_error=result.backtest_error,
        scores=result.scores,
        notes=result.notes,
        anomalies=result.anomalies,
        reason=result.reason,
        error=result.error,
        duration_s=result.duration_s,
    )
    session.add(run)
    session.flush()
    if result.status == "complete" and result.forecast is not None:
        points = [
            {
                "run_id": run.id,
                "ds": row.ds.to_pydatetime(),
                "yhat": float(row.yhat),
                "lo_80": float(row.lo_80),
                "hi_80": float(row.hi_80),
                "lo_95": float(row.lo_95),
                "hi_95": float(row.hi_95),
            }
            for row in result.forecast.loc[:, list(POINT_COLUMNS)].itertuples(index=False)
        ]
        session.execute(insert(ForecastPoint), points)
        session.flush()
    return run


def _py(value: pd.Timestamp | datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.to_pydatetime() if isinstance(value, pd.Timestamp) else value


def latest_run(session: Session, *, series_id: int, metric: str) -> ForecastRun | None:
    """The newest complete run of a series x metric, or None."""
    return session.scalar(
        select(ForecastRun)
        .where(
            ForecastRun.series_id == series_id,
            ForecastRun.metric == metric,
            ForecastRun.status == "complete",
        )
        .order_by(ForecastRun.id.desc())
        .limit(1)
    )


def require_latest_run(
    session: Session, *, series_id: int, series_name: str, metric: str
) -> ForecastRun:
    run = latest_run(session, series_id=series_id, metric=metric)
    if run is None:
        raise NotFoundError(
            f"series {series_name!r} has no complete {metric} forecast yet; run "
            f"'gpucast forecast {series_name}' or POST /v1/series/{series_name}/forecast"
        )
    return run


def list_runs(
    session: Session, *, series_id: int, metric: str | None = None, limit: int = 50
) -> list[ForecastRun]:
    query = select(ForecastRun).where(ForecastRun.series_id == series_id)
    if metric is not None:
        query = query.where(ForecastRun.metric == metric)
    return list(session.scalars(query.order_by(ForecastRun.id.desc()).limit(limit)))


def run_points(session: Session, *, run_id: int) -> pd.DataFrame:
    rows = session.execute(
        select(
            ForecastPoint.ds,
            ForecastPoint.yhat,
            ForecastPoint.lo_80,
            ForecastPoint.hi_80,
            ForecastPoint.lo_95,
            ForecastPoint.hi_95,
        )
        .where(ForecastPoint.run_id == run_id)
        .order_by(ForecastPoint.ds)
    ).all()
    frame = pd.DataFrame(rows, columns=list(POINT_COLUMNS))
    frame["ds"] = pd.to_datetime(frame["ds"], utc=True)
    return frame
