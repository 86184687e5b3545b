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
# The prompt/completion mix: forecast for a series planned at a latency SLO on a load-test
# profile (each plan hour is sized at its forecast mix), and on request.
MIX_METRICS = ("prompt_tokens", "completion_tokens")
ALL_METRICS = (*METRICS, *MIX_METRICS)
METRIC_COLUMNS = {
    "requests": "requests",
    "tokens": "total_tokens",
    "prompt_tokens": "prompt_tokens",
    "completion_tokens": "completion_tokens",
}


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
        result.model = fit.model
        result.forecast = fit.forecast
        result.scores = fit.scores_records()
        result.notes = list(fit.notes)
        result.reason = fit.reason or None
        result.anomalies = _anomaly_records(fit.anomalies)
        result.state = fit.state
        result.backtest_error = _winner_error(result.scores, fit.model, item.backtest_metric)
        result.status = "complete"  # last: a step above that raises leaves the item failed
    except Exception as exc:  # a batch never dies because of one series
        result.error = describe(exc)
    result.duration_s = time.perf_counter() - started
    return result


def failed_result(item: WorkItem, error: BaseException, *, stage: str) -> ItemResult:
    """The failed result of an item whose run raised outside :func:`run_item` (its worker
    died, its result could not be sent back)."""
    return ItemResult(
        series=item.series,
        metric=item.metric,
        status="failed",
        horizon=item.horizon,
        backtest_metric=item.backtest_metric,
        error=f"failed {stage}: {describe(error)}",
    )


def as_failed(result: ItemResult, error: BaseException, *, stage: str) -> ItemResult:
    """``result`` turned into a failed run that records ``error``: only the plain fields are
    kept (the forecast, scores, anomalies and state may be what failed)."""
    return ItemResult(
        series=result.series,
        metric=result.metric,
        status="failed",
        horizon=result.horizon,
        trained_until=result.trained_until,
        model=result.model,
        backtest_metric=result.backtest_metric,
        error=f"failed {stage}: {describe(error)}",
        duration_s=result.duration_s,
        kind=result.kind,
        parent_id=result.parent_id,
    )


MAX_ERROR_CHARS = 2000


def describe(error: BaseException) -> str:
    """``Type: message`` of an error on one line, storable as text anywhere: a database error
    names the driver's error (not the statement and its parameters), NUL and lone surrogates
    are removed (PostgreSQL text rejects both), at most :data:`MAX_ERROR_CHARS` characters."""
    original = getattr(error, "orig", None)
    if isinstance(original, BaseException):
        error = original
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0] if lines else ''}".replace("\x00", "")
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "…"
    return text


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
