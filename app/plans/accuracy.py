"""How stored forecasts fared against the actuals that arrived after them.

A drifting model shows up here before it causes an outage: per run WAPE, MASE (scaled by the
in-sample seasonal-naive error of the history the run was trained on), hours whose actual load
was above the 80 % / 95 % upper band and, with a GPU profile, above the planned capacity — the
load in the tokens each hour really carried, so a requests forecast that was right while the
prompt mix grew still shows the hours its plan fell short.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session

import capacity
from app.db import repository
from app.db.models import GpuProfile
from app.errors import InputError
from app.forecasts import store as forecast_store
from app.forecasts.work import METRIC_COLUMNS
from app.plans.sizing import tokens_per_request

SEASON = 24
SCALE_WINDOW_HOURS = 28 * 24
DRIFT_WINDOW = 7
DRIFT_RATIO = 1.25


def series_accuracy(
    session: Session,
    *,
    series_id: int,
    series_name: str,
    metric: str,
    limit: int = 30,
    profile: GpuProfile | None = None,
) -> dict[str, Any]:
    history = repository.observations_frame(session, series_id=series_id)
    actual = history.set_index("hour")[METRIC_COLUMNS[metric]].astype("float64")
    measured_tokens = history.set_index("hour")["total_tokens"].astype("float64")
    runs = [
        r
        for r in forecast_store.list_runs(
            session, series_id=series_id, metric=metric, limit=limit * 3, kind="nightly"
        )
        if r.status == "complete"
    ]
    rows = []
    for run in runs[:limit]:
        points = forecast_store.run_points(session, run_id=run.id).set_index("ds")
        per_request = (
            _tokens_per_request(history, run.trained_until) if metric == "requests" else None
        )
        load = actual if metric == "tokens" else measured_tokens
        rows.append(_score_run(run, points, actual, profile, per_request, load))
    rows.sort(key=lambda r: r["trained_until"] or pd.Timestamp.min.tz_localize("UTC"))
    return {
        "series": series_name,
        "metric": metric,
        "runs": rows,
        "trend": _trend(rows),
        "profile": profile.name if profile else None,
    }


def _tokens_per_request(history: pd.DataFrame, trained_until: Any) -> float:
    """The tokens per request a plan from this run used: the plan's rule
    (:func:`app.plans.sizing.tokens_per_request`) on the hours up to the run's training end;
    NaN when those hours hold no token count."""
    if trained_until is not None:
        history = history[history["hour"] <= pd.Timestamp(trained_until)]
    if history.empty:
        return float("nan")
    try:
        return tokens_per_request(history, series_name="")
    except InputError:
        return float("nan")


def _score_run(
    run: Any,
    points: pd.DataFrame,
    actual: pd.Series,
    profile: GpuProfile | None,
    per_request: float | None,
    measured_tokens: pd.Series,
) -> dict[str, Any]:
    """One run's scores. Capacity is the hi_80 plan: of a tokens forecast (``per_request``
    None), or of a requests forecast × ``per_request`` (the figure the plan used; NaN when the
    series had no token counts by then: no capacity figure). The load it is judged on is each
    hour's measured tokens where stored (``measured_tokens``), else the actual requests × that
    figure."""
    matched = actual.reindex(points.index)
    seen = matched.notna().to_numpy()
    y = matched.to_numpy(dtype="float64")[seen]
    yhat = points["yhat"].to_numpy(dtype="float64")[seen]
    row: dict[str, Any] = {
        "run_id": run.id,
        "model": run.model,
        "trained_until": run.trained_until,
        "hours_forecast": len(points),
        "hours_with_actuals": int(seen.sum()),
        "wape": None,
        "mase": None,
        "hours_above_hi_80": 0,
        "hours_above_hi_95": 0,
        "hours_above_capacity": None,
    }
    if not seen.any():
        return row
    abs_error = np.abs(y - yhat)
    total = np.abs(y).sum()
    row["wape"] = float(abs_error.sum() / total) if total > 0 else None
    scale = _naive_scale(actual, run.trained_until)
    row["mase"] = float(abs_error.mean() / scale) if scale else None
    row["hours_above_hi_80"] = int((y > points["hi_80"].to_numpy()[seen]).sum())
    row["hours_above_hi_95"] = int((y > points["hi_95"].to_numpy()[seen]).sum())
    if profile is not None and (per_request is None or per_request > 0):
        plan = capacity.plan_gpus(
            points.reset_index(),
            band="hi_80",
            per_gpu_tokens_per_s=profile.tokens_per_s_per_gpu,
            gpus_per_replica=profile.gpus_per_replica,
            tokens_per_request=per_request,
        )
        capacity_tokens_per_s = plan.frame["gpus"].to_numpy()[seen] * profile.tokens_per_s_per_gpu
        converted = y * (1.0 if per_request is None else per_request)
        measured = measured_tokens.reindex(points.index).to_numpy(dtype="float64")[seen]
        actual_tokens_per_s = np.where(np.isnan(measured), converted, measured) / 3600.0
        row["hours_above_capacity"] = int((actual_tokens_per_s > capacity_tokens_per_s).sum())
    return row


def _naive_scale(actual: pd.Series, trained_until: Any) -> float | None:
    """Mean absolute seasonal difference (lag 24) over the last four weeks before the run."""
    if trained_until is None:
        return None
    window = actual.loc[: pd.Timestamp(trained_until)].iloc[-SCALE_WINDOW_HOURS:]
    regular = window.asfreq("h")
    diffs = (regular - regular.shift(SEASON)).abs().dropna()
    if diffs.empty:
        return None
    scale = float(diffs.mean())
    return scale if scale > 0 else None


def _trend(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r["wape"] for r in rows if r["wape"] is not None]
    recent = scored[-DRIFT_WINDOW:]
    earlier = scored[-2 * DRIFT_WINDOW : -DRIFT_WINDOW]
    recent_mean = float(np.mean(recent)) if recent else None
    earlier_mean = float(np.mean(earlier)) if earlier else None
    drifting = bool(
        recent_mean is not None
        and earlier_mean is not None
        and recent_mean > DRIFT_RATIO * earlier_mean
        and recent_mean > 0.05
    )
    return {
        "runs_scored": len(scored),
        "recent_wape": recent_mean,
        "earlier_wape": earlier_mean,
        "drifting": drifting,
    }
