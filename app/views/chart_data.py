"""What a chart shows, read from the database: history, latest forecast, tomorrow's GPU plan.

Values are per second (stored counts per hour / 3600) and hours are UTC. A missing forecast
or GPU profile is not an error: the data says so, and the chart shows what there is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy.orm import Session

from app import plans
from app.db import repository
from app.db.models import GpuProfile
from app.errors import ConflictError, InputError, NotFoundError
from app.forecasts import store as forecast_store
from app.forecasts.work import METRIC_COLUMNS
from app.plans.auto_band import STORED
from app.plans.expected import Expected
from app.profiles.deployments import optional_binding

__all__ = [
    "METRIC_UNITS",
    "ChartData",
    "STALE_NOTE",
    "PlanSummary",
    "default_profile",
    "series_profile",
    "load_chart_data",
    "summarize_plan",
]

# metric -> (axis label, short unit); stored values are counts per hour, charts show rates.
METRIC_UNITS = {
    "requests": ("requests per second", "QPS"),
    "tokens": ("tokens per second", "tokens/s"),
}
BAND_COLUMNS = ("yhat", "lo_80", "hi_80", "lo_95", "hi_95")
STALE_NOTE = f"STALE: forecast older than {plans.STALE_AFTER / timedelta(hours=1):g} h"


@dataclass(frozen=True)
class ChartData:
    """Everything one chart shows, in per-second units, with hours in UTC."""

    series: str
    metric: str
    history: pd.DataFrame  # hour, value
    forecast: pd.DataFrame | None  # ds, yhat, lo_80, hi_80, lo_95, hi_95
    model: str | None = None
    backtest_metric: str | None = None
    backtest_error: float | None = None
    trained_until: datetime | None = None
    plan: pd.DataFrame | None = None  # hour, gpus (executed schedule), raw_gpus (formula only)
    profile: str | None = None
    peak_gpus: int | None = None
    plan_band: str | None = None  # forecast band the plan is sized for
    plan_note: str | None = None  # why there is no GPU plan, when there is none
    plan_stale: bool = False  # the plan's forecast was trained more than 36 h ago


def default_profile(session: Session, *, name: str | None) -> GpuProfile | None:
    """The named GPU profile (404 when unknown), else the first by name, else None."""
    if name is not None:
        return repository.get_gpu_profile(session, name=name)
    profiles = repository.list_gpu_profiles(session)
    return profiles[0] if profiles else None


def series_profile(session: Session, *, series_name: str, name: str | None) -> GpuProfile | None:
    """The named GPU profile (404 when unknown), else the series' deployment, else the first
    by name, else None."""
    binding = optional_binding(
        session, series_name=series_name, profile_name=name, fallback="first"
    )
    return None if binding is None else repository.get_gpu_profile(session, name=binding.profile)


def load_chart_data(
    session: Session,
    *,
    series_name: str,
    metric: str = "requests",
    days: int = 7,
    profile_name: str | None = None,
    params: plans.PlanParams | None = None,
    plan_cache: plans.PlanCache | None = None,
) -> ChartData:
    """Read the last ``days`` days of history, the latest forecast and tomorrow's GPU plan.

    Raises NotFoundError for an unknown series or profile and InputError for a bad metric or
    day count. A missing forecast or GPU profile is not an error: the chart says so instead.
    """
    if metric not in METRIC_UNITS:
        raise InputError(f"metric must be one of {', '.join(METRIC_UNITS)}, got {metric!r}")
    if days < 1:
        raise InputError(f"days must be at least 1, got {days}")
    series = repository.get_series(session, name=series_name)
    profile = series_profile(session, series_name=series_name, name=profile_name)
    history = _history(session, series_id=series.id, metric=metric, days=days)
    run = forecast_store.latest_run(session, series_id=series.id, metric=metric)
    forecast = None
    if run is not None:
        points = forecast_store.run_points(session, run_id=run.id)
        forecast = points.assign(**{c: points[c] / 3600.0 for c in BAND_COLUMNS})
    data = ChartData(
        series=series_name,
        metric=metric,
        history=history,
        forecast=forecast,
        model=run.model if run else None,
        backtest_metric=run.backtest_metric if run else None,
        backtest_error=run.backtest_error if run else None,
        trained_until=run.trained_until if run else None,
    )
    return _with_plan(session, data, profile, params or plans.PlanParams(), plan_cache)


def _history(session: Session, *, series_id: int, metric: str, days: int) -> pd.DataFrame:
    last_hour = repository.series_stats(session, series_id=series_id)["last_hour"]
    if last_hour is None:
        return pd.DataFrame({"hour": pd.to_datetime([], utc=True), "value": []})
    end = pd.Timestamp(last_hour)
    end = end.tz_localize("UTC") if end.tzinfo is None else end.tz_convert("UTC")
    start = end - pd.Timedelta(days=days) + pd.Timedelta(hours=1)
    frame = repository.observations_frame(session, series_id=series_id, start=start.to_pydatetime())
    values = pd.to_numeric(frame[METRIC_COLUMNS[metric]], errors="coerce") / 3600.0
    return pd.DataFrame({"hour": frame["hour"], "value": values})


@dataclass(frozen=True)
class PlanSummary:
    """Tomorrow's GPU plan of a series, or why there is none."""

    profile: str | None
    frame: pd.DataFrame | None = None  # hour, gpus (executed schedule), raw_gpus
    peak_gpus: int | None = None
    band: str | None = None
    note: str | None = None
    stale: bool = False  # trained more than plans.STALE_AFTER ago
    trained_until: datetime | None = None
    sized_band: str | None = None  # the forecast column sized on (the quantile for band auto)
    band_choice: dict[str, Any] | None = None  # band auto's calibration (SeriesPlan.band_choice)
    hours_note: str | None = None  # the plan's hours already past, and what to do (notes)
    expected: Expected | None = None  # the fleet expected to run above the floor (band auto)


def summarize_plan(
    session: Session,
    *,
    series_name: str,
    profile: GpuProfile | None,
    params: plans.PlanParams | None = None,
    plan_cache: plans.PlanCache | None = None,
) -> PlanSummary:
    """The GPU plan from the latest forecast; a missing profile or forecast becomes a note."""
    if profile is None:
        return PlanSummary(profile=None, note="no GPU profile")
    try:
        plan = plans.series_plan(
            session,
            series_name=series_name,
            profile_name=profile.name,
            params=params or plans.PlanParams(),
            cache=plan_cache,
            calibrated_by=STORED,  # the page never calibrates nor replays
        )
    except NotFoundError:  # the series and profile exist, so: no forecast yet
        return PlanSummary(profile=profile.name, note="no forecast to plan from")
    except (InputError, ConflictError) as exc:  # ConflictError: a profile stored unusable
        return PlanSummary(profile=profile.name, note=f"no GPU plan: {exc}")
    return PlanSummary(
        profile=profile.name,
        frame=plan.plan.frame.loc[:, ["hour", "gpus", "raw_gpus"]],
        peak_gpus=int(plan.plan.peak_gpus),
        band=plan.band_label,
        stale=plan.is_stale(),
        trained_until=plan.trained_until,
        sized_band=plan.plan.band,
        band_choice=plan.band_choice,
        hours_note="; ".join(plan.notes()) or None,
        expected=plan.expected,
    )


def _with_plan(
    session: Session,
    data: ChartData,
    profile: GpuProfile | None,
    params: plans.PlanParams,
    plan_cache: plans.PlanCache | None,
) -> ChartData:
    summary = summarize_plan(
        session, series_name=data.series, profile=profile, params=params, plan_cache=plan_cache
    )
    return replace(
        data,
        plan=summary.frame,
        profile=summary.profile,
        peak_gpus=summary.peak_gpus,
        plan_band=summary.band,
        plan_note=summary.note,
        plan_stale=summary.stale,
    )
