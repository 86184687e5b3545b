"""Forecast runs and points: write one run per transaction, read the latest complete run."""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from app.db.models import ForecastPoint, ForecastRun
from app.errors import NotFoundError

if TYPE_CHECKING:
    from app.forecasts.work import ItemResult

BAND_COLUMNS = ("ds", "yhat", "lo_80", "hi_80", "lo_95", "hi_95")
QUANTILE_COLUMNS = ("q50", "q60", "q70", "q80", "q90", "q95", "q99")
POINT_COLUMNS = BAND_COLUMNS + QUANTILE_COLUMNS
# Histories are below 1e15 per hour (app.ingest.limits); a point far beyond that is an
# exploded fit, never a forecast (and would overflow the plan's arithmetic).
MAX_POINT_VALUE = 1e18


def save_run(session: Session, *, series_id: int, result: ItemResult) -> ForecastRun:
    """Store a run and its points (flush only; the caller's commit makes both visible).

    No table ever holds a non-finite number: a complete ``result`` whose forecast is missing or
    holds NaN or ±inf (or beyond :data:`MAX_POINT_VALUE`) is marked failed, in place so the
    caller reports it as failed too, and stored without points; NaN and ±inf inside the JSON
    columns (scores, anomalies, state) and the float columns are stored as null.
    """
    if result.status == "complete":
        problem = unusable_forecast(result.forecast)
        if problem is not None:
            result.status, result.forecast = "failed", None
            result.error = f"ValueError: the forecast is unusable: {problem}; not stored"
    run = ForecastRun(
        series_id=series_id,
        metric=result.metric,
        status=result.status,
        trained_until=_py(result.trained_until),
        horizon=result.horizon,
        model=result.model,
        backtest_metric=result.backtest_metric,
        backtest_error=finite_or_none(result.backtest_error),
        scores=finite_json(result.scores),
        notes=result.notes,
        anomalies=finite_json(result.anomalies),
        reason=result.reason,
        error=result.error,
        duration_s=finite_or_none(result.duration_s),
        kind=result.kind,
        parent_id=result.parent_id,
        state=finite_json(result.state),
    )
    session.add(run)
    session.flush()
    if result.status == "complete" and result.forecast is not None:
        session.execute(insert(ForecastPoint), point_rows(run.id, result.forecast))
        session.flush()
    return run


def unusable_forecast(forecast: pd.DataFrame | None) -> str | None:
    """Why a forecast frame cannot be stored as a complete run, or None when it can."""
    if forecast is None or len(forecast) == 0:
        return "it has no points"
    columns = [c for c in POINT_COLUMNS[1:] if c in forecast.columns]
    missing = [c for c in BAND_COLUMNS[1:] if c not in columns]
    if missing:
        return f"columns {', '.join(missing)} are missing"
    values = forecast.loc[:, columns].to_numpy(dtype="float64")
    for column, bad in zip(columns, (~np.isfinite(values)).any(axis=0), strict=True):
        if bad:
            return f"{column} holds NaN or infinite values"
    for column, big in zip(columns, (np.abs(values) > MAX_POINT_VALUE).any(axis=0), strict=True):
        if big:
            return f"{column} holds values beyond {MAX_POINT_VALUE:g}"
    return None


def finite_or_none(value: float | None) -> float | None:
    """``value`` unless it is NaN or ±inf (stored as null)."""
    if value is None or isinstance(value, bool):
        return value
    number = float(value)
    return number if math.isfinite(number) else None


def finite_json(value: Any) -> Any:
    """A JSON-ready copy of ``value`` with every NaN and ±inf replaced by None: PostgreSQL's
    ``json`` type rejects them, and SQLite would store text no JSON reader accepts."""
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(item) for item in value]
    if isinstance(value, float | np.floating):
        return finite_or_none(float(value))
    return value


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
