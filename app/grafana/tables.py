"""Table targets: backtest scores of the latest runs and the event/anomaly annotations."""

from __future__ import annotations

from typing import Any, cast

import pandas as pd

from app.db import repository
from app.forecasts import store as forecast_store
from app.grafana.plan_targets import ANNOTATION_COLUMNS
from app.grafana.protocol import QueryContext, choice, epoch_ms, table, target_series, text_list
from app.grafana.series_targets import RUN_METRICS

RUN_METRIC_CHOICES = (*RUN_METRICS, "all")


def _run_metrics(payload: dict[str, Any]) -> tuple[str, ...]:
    metric = choice(payload, "metric", RUN_METRIC_CHOICES, "all")
    return RUN_METRICS if metric == "all" else (metric,)


def backtest(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Every candidate's backtest scores in the latest complete run of each series x metric."""
    records: list[dict[str, Any]] = []
    for name in target_series(ctx, payload):
        series = repository.get_series(ctx.session, name=name)
        for metric in _run_metrics(payload):
            run = forecast_store.latest_run(ctx.session, series_id=series.id, metric=metric)
            if run is None:
                continue
            for score in run.scores or []:
                chosen = "yes" if score.get("model") == run.model else ""
                records.append(
                    {"Time": epoch_ms(run.created_at), "series": name, "metric": metric}
                    | {"model": score.get("model"), "chosen": chosen}
                    | {k: v for k, v in score.items() if k != "model"}
                )
    keys: dict[str, None] = dict.fromkeys(["Time", "series", "metric", "model", "chosen"])
    for record in records:
        keys.update(dict.fromkeys(record))
    columns = [(key, _column_type(key, records)) for key in keys]
    rows = [[record.get(key) for key in keys] for record in records]
    return [table(columns, rows)]


def _column_type(key: str, records: list[dict[str, Any]]) -> str:
    """Grafana's field type of a column: time, boolean, number or string."""
    if key == "Time":
        return "time"
    values = [r.get(key) for r in records if r.get(key) is not None]
    if values and all(isinstance(v, bool) for v in values):
        return "boolean"
    numeric = values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    return "number" if numeric else "string"


def events(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Business events overlapping the range: the series' own plus global ones.

    Without a series in the payload or the ad-hoc filters, every event is shown; when the
    filters select no series, only the global ones."""
    found: dict[int, tuple[Any, str | None]] = {}
    for event, series_name in _event_pairs(ctx, payload):
        if series_name is None or ctx.series_filter.kept([series_name]):
            found[event.id] = (event, series_name)
    rows = []
    for event, series_name in sorted(found.values(), key=lambda p: (p[0].start, p[0].id)):
        text = event.description or event.name
        if event.multiplier is not None:
            text += f" (expected load x{event.multiplier:g})"
        tags = ["event", series_name or "all series"]
        rows.append([epoch_ms(event.start), epoch_ms(event.end), event.name, text, ",".join(tags)])
    return [table(ANNOTATION_COLUMNS, rows)]


def _event_pairs(ctx: QueryContext, payload: dict[str, Any]) -> list[tuple[Any, str | None]]:
    def listed(name: str | None) -> list[tuple[Any, str | None]]:
        return repository.list_events(ctx.session, series_name=name, start=ctx.start, end=ctx.end)

    if not (text_list(payload, "series") or ctx.series_filter.selects):
        return listed(None)
    names = target_series(ctx, payload)
    if not names:
        return [(event, name) for event, name in listed(None) if name is None]
    return [pair for name in names for pair in listed(name)]


def anomalies(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Hours the latest run's history cleaning flagged as anomalous (spikes, dips, outages)."""
    start, end = pd.Timestamp(ctx.start), pd.Timestamp(ctx.end)
    rows = []
    for name in target_series(ctx, payload):
        series = repository.get_series(ctx.session, name=name)
        for metric in _run_metrics(payload):
            run = forecast_store.latest_run(ctx.session, series_id=series.id, metric=metric)
            for item in (run.anomalies or []) if run is not None else []:
                stamp = _timestamp(item.get("ds"))
                if stamp is None or not start <= stamp <= end:
                    continue
                kind = str(item.get("kind") or "anomaly")
                rows.append(
                    [
                        epoch_ms(stamp),
                        epoch_ms(stamp),
                        f"{kind} in {metric}",
                        f"{name}: {metric} {_fmt(item.get('value'))}, expected "
                        f"{_fmt(item.get('expected'))} (score {_fmt(item.get('score'))})",
                        f"anomaly,{kind},{metric},{name}",
                    ]
                )
    rows.sort(key=lambda r: cast(int, r[0]))
    return [table(ANNOTATION_COLUMNS, rows)]


def _timestamp(value: Any) -> pd.Timestamp | None:
    if value is None:
        return None
    try:
        stamp = pd.Timestamp(value)
    except (TypeError, ValueError):
        return None
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _fmt(value: Any) -> str:
    return f"{value:,.4g}" if isinstance(value, int | float) else "n/a"
