"""The ``plan_status`` table: per series, the forecast run its plan comes from and the band
the plan is sized on.

One row per series: the freshest complete run (``nightly`` or an hourly ``refresh``), when it
was stored and the newest hour it saw (``trained_until``) with both ages in hours, the fitted
nightly run behind it, and for ``band=auto`` the quantile chosen with its replayed time over
capacity against the target. The plan is the one the ``gpus`` target serves for the same
payload (same cache, same stored band=auto choice), so the two panels always agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd

from app import plans
from app.db.models import ForecastRun
from app.grafana.plan_targets import (
    has_forecast,
    plan_params,
    profile_plan,
    resolve_profiles,
    sized_band,
)
from app.grafana.protocol import QueryContext, clean, epoch_ms, table, target_series

COLUMNS = (
    ("series", "string"),
    ("profile", "string"),
    ("run_kind", "string"),
    ("run_id", "number"),
    ("run_stored_at", "time"),
    ("trained_until", "time"),
    ("trained_age_hours", "number"),
    ("run_age_hours", "number"),
    ("stale", "boolean"),
    ("fitted_run_id", "number"),
    ("fitted_trained_until", "time"),
    ("model", "string"),
    ("band", "string"),
    ("sized_band", "string"),
    ("replayed_time_over_capacity_share", "number"),
    ("max_over_capacity", "number"),
    ("met", "boolean"),
    ("calibration_days", "number"),
    ("note", "string"),
)
NAMES = tuple(name for name, _ in COLUMNS)


def plan_status(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per series (payload, ad-hoc filter or every series) and profile (the payload's,
    several from a multi-value variable; else the deployment's); a series without a complete
    forecast is a row that says so."""
    params = plan_params(payload)
    now = datetime.now(UTC)
    rows = []
    for name in target_series(ctx, payload):
        profiles = resolve_profiles(ctx, payload, name)
        if not has_forecast(ctx, name):
            note = f"no complete forecast yet; run 'gpucast forecast {name}'"
            rows += [
                _row(series=name, profile=p.name, band=params.band, note=note) for p in profiles
            ]
            continue
        rows += [_plan_row(ctx, profile_plan(ctx, name, p, params), now) for p in profiles]
    return [table(COLUMNS, [[row[n] for n in NAMES] for row in rows])]


def _plan_row(ctx: QueryContext, plan: plans.SeriesPlan, now: datetime) -> dict[str, Any]:
    run = ctx.session.get(ForecastRun, plan.run_ids[0])
    fitted = ctx.session.get(ForecastRun, plan.fitted_run_id) if plan.fitted_run_id else None
    choice = plan.band_choice or {}
    return _row(
        series=plan.series,
        profile=plan.profile,
        run_kind=plan.run_kind,
        run_id=plan.run_ids[0],
        run_stored_at=_ms(run.created_at if run is not None else None),
        trained_until=_ms(plan.trained_until),
        trained_age_hours=_hours_since(plan.trained_until, now),
        run_age_hours=_hours_since(run.created_at if run is not None else None, now),
        stale=plan.is_stale(now),
        fitted_run_id=plan.fitted_run_id,
        fitted_trained_until=_ms(fitted.trained_until if fitted is not None else None),
        model=plan.model,
        band=plan.params.band,
        sized_band=sized_band(plan),
        replayed_time_over_capacity_share=clean(choice.get("replayed_time_over_capacity_share")),
        max_over_capacity=plan.params.max_over_capacity if plan.band_choice else None,
        met=choice.get("met"),
        calibration_days=clean(choice.get("days")),
        note=choice.get("note") or f"band {plan.params.band} asked for: no calibration",
    )


def _row(**values: Any) -> dict[str, Any]:
    return {name: values.get(name) for name in NAMES}


def _utc(moment: Any) -> pd.Timestamp | None:
    if moment is None:
        return None
    stamp = pd.Timestamp(moment)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _ms(moment: Any) -> int | None:
    stamp = _utc(moment)
    return None if stamp is None else epoch_ms(stamp)


def _hours_since(moment: Any, now: datetime) -> float | None:
    stamp = _utc(moment)
    if stamp is None:
        return None
    return round((pd.Timestamp(now) - stamp) / pd.Timedelta(hours=1), 2)
