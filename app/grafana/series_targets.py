"""Time-series targets over stored data: history, forecast bands and forecast accuracy."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from app.db import repository
from app.forecasts import store as forecast_store
from app.grafana.protocol import (
    MAX_SERIES_HOURS,
    QueryContext,
    choice,
    in_range,
    target_series,
    timeseries,
)
from app.grafana.ranges import with_notice
from app.plans import accuracy

# metric name → (observation column, divisor): QPS is requests per hour / 3600.
HISTORY_METRICS: dict[str, tuple[str, float]] = {
    "requests": ("requests", 1.0),
    "qps": ("requests", 3600.0),
    "tokens": ("total_tokens", 1.0),
    "prompt_tokens": ("prompt_tokens", 1.0),
    "completion_tokens": ("completion_tokens", 1.0),
    "peak_rps": ("peak_rps", 1.0),
}
# forecast metric → (stored run metric, divisor)
FORECAST_METRICS: dict[str, tuple[str, float]] = {
    "requests": ("requests", 1.0),
    "qps": ("requests", 3600.0),
    "tokens": ("tokens", 1.0),
}
FORECAST_BANDS = ("yhat", "lo_80", "hi_80", "lo_95", "hi_95")
FORECAST_BAND_CHOICES = (*FORECAST_BANDS, "all")
ACCURACY_MEASURES = ("wape", "mase", "hours_above_hi_80", "hours_above_hi_95")
RUN_METRICS = ("requests", "tokens")


def history(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Stored hourly observations of each series: one time series per series.

    It reads at most :data:`MAX_SERIES_HOURS` series-hours: over a long range ("Last 5
    years") and many series it shows the most recent hours that fit, and says so in a
    notice. Hours before a series' first observation cost nothing."""
    metric = choice(payload, "metric", tuple(HISTORY_METRICS), "requests")
    column, divisor = HISTORY_METRICS[metric]
    chosen = {n: repository.get_series(ctx.session, name=n) for n in target_series(ctx, payload)}
    start, notice = _history_start(ctx, [s.id for s in chosen.values()])
    out = []
    for name, series in chosen.items():
        frame = repository.observations_frame(
            ctx.session, series_id=series.id, start=start, end=ctx.end + timedelta(microseconds=1)
        )
        frame = frame.assign(value=frame[column].astype("float64") / divisor)
        out.append(timeseries(f"{name} {metric}", frame, "hour", "value"))
    if notice is not None:
        with_notice(out, notice, "warning")
    return out


def _history_start(ctx: QueryContext, series_ids: list[int]) -> tuple[datetime, str | None]:
    """Where history is read from: the range's start, or later when the hours the series
    hold inside the range exceed the budget (then with the notice that says so)."""
    stats = repository.series_stats_many(ctx.session, series_ids=series_ids)
    start, end = pd.Timestamp(ctx.start), pd.Timestamp(ctx.end)
    spans, lasts = [], []
    for item in stats.values():
        if item["first_hour"] is None:
            continue
        first = max(start, _utc(item["first_hour"]))
        last = min(end, _utc(item["last_hour"]))
        if last >= first:
            spans.append((last - first) / pd.Timedelta(hours=1) + 1)
            lasts.append(last)
    if sum(spans) <= MAX_SERIES_HOURS:
        return ctx.start, None
    hours = MAX_SERIES_HOURS // len(spans)
    cut = (max(lasts) - pd.Timedelta(hours=hours - 1)).ceil("h")
    notice = (
        f"history shown from {cut:%Y-%m-%d %H:%M} UTC: {len(spans)} series over this range "
        f"hold {sum(spans):,.0f} hourly points, more than the {MAX_SERIES_HOURS:,} one query "
        "reads; choose fewer series or a shorter range to see the earlier hours"
    )
    return cut.to_pydatetime(), notice


def _utc(moment: Any) -> pd.Timestamp:
    stamp = pd.Timestamp(moment)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def forecast(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The latest complete forecast's point and band values; ``band: all`` returns all five.

    A series without a complete forecast contributes nothing (an empty panel, not an error).
    """
    metric = choice(payload, "metric", tuple(FORECAST_METRICS), "requests")
    band = choice(payload, "band", FORECAST_BAND_CHOICES, "yhat")
    bands = FORECAST_BANDS if band == "all" else (band,)
    run_metric, divisor = FORECAST_METRICS[metric]
    out = []
    for name in target_series(ctx, payload):
        series = repository.get_series(ctx.session, name=name)
        run = forecast_store.latest_run(ctx.session, series_id=series.id, metric=run_metric)
        if run is None:
            continue
        points = in_range(forecast_store.run_points(ctx.session, run_id=run.id), "ds", ctx)
        for column in bands:
            frame = points.assign(value=points[column] / divisor)
            out.append(timeseries(f"{name} {metric} {column}", frame, "ds", "value"))
    return out


def forecast_accuracy(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Per past run, how it fared against the actuals since: one point per run at its
    trained-until hour (WAPE and MASE as ratios, or hours above a band as counts)."""
    metric = choice(payload, "metric", RUN_METRICS, "requests")
    measure = choice(payload, "measure", ACCURACY_MEASURES, "wape")
    out = []
    for name in target_series(ctx, payload):
        series = repository.get_series(ctx.session, name=name)
        report = accuracy.series_accuracy(
            ctx.session, series_id=series.id, series_name=name, metric=metric
        )
        rows = [r for r in report["runs"] if r["trained_until"] is not None]
        frame = pd.DataFrame(
            {
                "time": pd.to_datetime([r["trained_until"] for r in rows], utc=True),
                "value": pd.Series([r[measure] for r in rows], dtype="float64"),
            }
        )
        frame = in_range(frame, "time", ctx)
        out.append(timeseries(f"{name} {metric} {measure}", frame, "time", "value"))
    return out
