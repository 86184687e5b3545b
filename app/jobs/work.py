"""Pure work items of the nightly forecast: arrays in, results out.

A :class:`WorkItem` carries everything a worker needs (no database handle, no settings), so it
can be pickled to a process pool or a Dask cluster; :func:`run_item` never raises — a failure
becomes a failed :class:`ItemResult` carrying the error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

METRICS = ("requests", "tokens")
METRIC_COLUMNS = {"requests": "requests", "tokens": "total_tokens"}


@dataclass(frozen=True)
class WorkItem:
    series: str
    metric: str
    hours_ns: np.ndarray  # int64 epoch nanoseconds, UTC hour starts
    values: np.ndarray  # float64, same length
    horizon: int = 24
    models: tuple[str, ...] | None = None
    windows: int | None = None
    backtest_metric: str = "mase"
    events: tuple[dict[str, Any], ...] = ()

    def history(self) -> pd.Series:
        index = pd.DatetimeIndex(pd.to_datetime(self.hours_ns, unit="ns", utc=True), name="ds")
        return pd.Series(self.values, index=index, name=self.metric, dtype="float64")

    def events_frame(self) -> pd.DataFrame | None:
        if not self.events:
            return None
        frame = pd.DataFrame(list(self.events))
        for column in ("start", "end"):
            frame[column] = pd.to_datetime(frame[column], utc=True)
        return frame


@dataclass
class ItemResult:
    series: str
    metric: str
    status: str  # "complete" | "failed"
    horizon: int
    trained_until: pd.Timestamp | None = None
    model: str | None = None
    backtest_metric: str = "mase"
    backtest_error: float | None = None
    forecast: pd.DataFrame | None = None
    scores: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    error: str | None = None
    duration_s: float = 0.0
    kind: str = "nightly"  # "nightly" (a fit) | "refresh" (the parent conditioned on new hours)
    parent_id: int | None = None
    state: dict[str, Any] | None = None  # what a refresh needs (nightly runs)


def run_item(item: WorkItem) -> ItemResult:
    """Backtest, select and forecast one series x metric. Never raises."""
    started = time.perf_counter()
    result = ItemResult(
        series=item.series,
        metric=item.metric,
        status="failed",
        horizon=item.horizon,
        backtest_metric=item.backtest_metric,
    )
    try:
        from forecasting import auto_forecast

        history = item.history()
        if len(history):
            result.trained_until = history.index.max()
        fit = auto_forecast(
            history,
            horizon=item.horizon,
            models=item.models,
            windows=item.windows,
            metric=item.backtest_metric,
            events=item.events_frame(),
        )
        result.status = "complete"
        result.model = fit.model
        result.forecast = fit.forecast
        result.scores = fit.scores_records()
        result.notes = list(fit.notes)
        result.reason = fit.reason or None
        result.anomalies = _anomaly_records(fit.anomalies)
        result.state = fit.state
        result.backtest_error = _winner_error(result.scores, fit.model, item.backtest_metric)
    except Exception as exc:  # a batch never dies because of one series
        result.error = f"{type(exc).__name__}: {exc}"
    result.duration_s = time.perf_counter() - started
    return result


def _winner_error(scores: list[dict[str, Any]], model: str, metric: str) -> float | None:
    for row in scores:
        if row.get("model") == model:
            value = row.get(metric)
            return float(value) if isinstance(value, int | float) else None
    return None


def _anomaly_records(anomalies: pd.DataFrame) -> list[dict[str, Any]]:
    if anomalies is None or anomalies.empty:
        return []
    records = []
    for row in anomalies.to_dict(orient="records"):
        clean: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, pd.Timestamp):
                value = value.isoformat()
            elif isinstance(value, np.generic):
                value = value.item()
            if isinstance(value, float) and not np.isfinite(value):
                value = None
            clean[str(key)] = value
        records.append(clean)
    return records
