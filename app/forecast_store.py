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

BAND_COLUMNS = ("ds", "yhat", "lo_80", "hi_80", "lo_95", "hi_95")
QUANTILE_COLUMNS = ("q50", "q60", "q70", "q80", "q90", "q95", "q99")
POINT_COLUMNS = BAND_COLUMNS + QUANTILE_COLUMNS


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
        kind=result.kind,
        parent_id=result.parent_id,
        state=result.state,
    )
    session.add(run)
    session.flush()
    if result.status == "complete" and result.forecast is not None:
        session.execute(insert(ForecastPoint), point_rows(run.id, result.forecast))
        session.flush()
    return run


def point_rows(run_id: int, forecast: pd.DataFrame) -> list[dict]:
    """The forecast_points rows of a frame (quantile columns stored when present)."""
    columns = [c for c in POINT_COLUMNS if c in forecast.columns]
    frame = forecast.loc[:, columns]
    ds = [stamp.to_pydatetime() for stamp in pd.DatetimeIndex(frame["ds"])]
    values = frame.drop(columns="ds").to_numpy(dtype=float)
    names = columns[1:]
    return [
        {"run_id": run_id, "ds": stamp, **dict(zip(names, map(float, row), strict=True))}
        for stamp, row in zip(ds, values, strict=True)
    ]


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


def latest_nightly_run(session: Session, *, series_id: int, metric: str) -> ForecastRun | None:
    """The newest complete nightly (fitted) run of a series x metric, or None."""
    return session.scalar(
        select(ForecastRun)
        .where(
            ForecastRun.series_id == series_id,
            ForecastRun.metric == metric,
            ForecastRun.status == "complete",
            ForecastRun.kind == "nightly",
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
    session: Session,
    *,
    series_id: int,
    metric: str | None = None,
    limit: int = 50,
    kind: str | None = None,
) -> list[ForecastRun]:
    query = select(ForecastRun).where(ForecastRun.series_id == series_id)
    if metric is not None:
        query = query.where(ForecastRun.metric == metric)
    if kind is not None:
        query = query.where(ForecastRun.kind == kind)
    return list(session.scalars(query.order_by(ForecastRun.id.desc()).limit(limit)))


def run_points(session: Session, *, run_id: int) -> pd.DataFrame:
    """A run's points: ds, the bands, and the quantiles (dropped when the run has none)."""
    rows = session.execute(
        select(*(getattr(ForecastPoint, c) for c in POINT_COLUMNS))
        .where(ForecastPoint.run_id == run_id)
        .order_by(ForecastPoint.ds)
    ).all()
    frame = pd.DataFrame(rows, columns=list(POINT_COLUMNS))
    frame["ds"] = pd.to_datetime(frame["ds"], utc=True)
    quantiles = frame.loc[:, list(QUANTILE_COLUMNS)]
    if len(frame) and quantiles.isna().any().any():
        return frame.loc[:, list(BAND_COLUMNS)]
    return frame.astype({c: "float64" for c in QUANTILE_COLUMNS})
