"""How stored forecasts fared against the actuals that arrived after them.

A drifting model shows up here before it causes an outage: per run WAPE, MASE (scaled by the
in-sample seasonal-naive error of the history the run was trained on), hours whose actual load
was above the 80 % / 95 % upper band and, with a GPU profile, above the planned capacity.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session

import capacity
from app import forecast_store, repository
from app.db.models import GpuProfile
from app.jobs.work import METRIC_COLUMNS

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
    tokens_per_request = _tokens_per_request(history) if metric == "requests" else 1.0
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
        rows.append(_score_run(run, points, actual, profile, tokens_per_request))
    rows.sort(key=lambda r: r["trained_until"] or pd.Timestamp.min.tz_localize("UTC"))
    return {
        "series": series_name,
        "metric": metric,
        "runs": rows,
        "trend": _trend(rows),
        "profile": profile.name if profile else None,
    }


def _tokens_per_request(history: pd.DataFrame) -> float | None:
    try:
        return capacity.tokens_per_request_from_history(
            history["requests"], history["total_tokens"]
        )
    except capacity.CapacityError:
        return None


def _score_run(
    run: Any,
    points: pd.DataFrame,
    actual: pd.Series,
    profile: GpuProfile | None,
    tokens_per_request: float | None,
) -> dict[str, Any]:
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
    if profile is not None and tokens_per_request:
        plan = capacity.plan_gpus(
            points.reset_index(),
            band="hi_80",
            per_gpu_tokens_per_s=profile.tokens_per_s_per_gpu,
            gpus_per_replica=profile.gpus_per_replica,
            tokens_per_request=None if tokens_per_request == 1.0 else tokens_per_request,
        )
        capacity_tokens_per_s = plan.frame["gpus"].to_numpy()[seen] * profile.tokens_per_s_per_gpu
        actual_tokens_per_s = y / 3600.0 * tokens_per_request
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
