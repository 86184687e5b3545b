"""Band auto's stored choices in ``/metrics`` (see :mod:`app.api.metrics`): per series x
profile under the default plan parameters, the newest stored choice — for a deployed series
only the one its plan sizes on (the deployment's profile, at its SLO when the profile applies
one), so these gauges describe the plan ``gpucast_plan_gpus`` shows. A scrape never
calibrates."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.db.models import (
    GpuProfile,
    GpuProfileLoadTest,
    PlanCalibration,
    Series,
    SeriesDeployment,
)
from app.plans import PlanParams
from app.plans.auto_band import plan_key
from app.profiles.deployments import Slo

__all__ = ["band_choice_metrics", "stored_band_choices"]

QUANTILE_BAND = re.compile(r"q(\d{2})")


def stored_band_choices(session: Session) -> list[tuple[str, str, Any]]:
    """(series, profile, result) of the newest stored band=auto choice of every series x
    profile under the default plan parameters; for a deployed series only the choice its plan
    sizes on (its deployment's profile, at its SLO when the profile applies one)."""
    default = PlanParams().calibration_key()
    newest = (
        select(func.max(PlanCalibration.id).label("id"))
        .where(
            or_(
                PlanCalibration.params_key == default,
                PlanCalibration.params_key.startswith(f"{default},slo=", autoescape=True),
            )
        )
        .group_by(PlanCalibration.series_id, PlanCalibration.profile, PlanCalibration.params_key)
        .subquery()
    )
    rows = session.execute(
        select(
            Series.name, PlanCalibration.profile, PlanCalibration.params_key, PlanCalibration.result
        )
        .join(newest, newest.c.id == PlanCalibration.id)
        .join(Series, Series.id == PlanCalibration.series_id)
    ).all()
    deployed = _deployed_keys(session, PlanParams())
    return [
        (name, profile, result)
        for name, profile, key, result in rows
        if deployed.get(name, (profile, default)) == (profile, key)
    ]


def _deployed_keys(session: Session, params: PlanParams) -> dict[str, tuple[str, str]]:
    """Per deployed series: its profile and the key its plan's band auto choice is under."""
    rows = session.execute(
        select(
            Series.name,
            GpuProfile.name,
            SeriesDeployment.ttft_p95_s,
            SeriesDeployment.tpot_p95_s,
            GpuProfileLoadTest.id,
        )
        .join(Series, Series.id == SeriesDeployment.series_id)
        .join(GpuProfile, GpuProfile.id == SeriesDeployment.gpu_profile_id)
        .outerjoin(GpuProfileLoadTest, GpuProfileLoadTest.gpu_profile_id == GpuProfile.id)
    ).all()
    keys = {}
    for series, profile, ttft, tpot, table in rows:
        slo = None
        if ttft is not None and tpot is not None:
            slo = Slo(ttft_p95_s=ttft, tpot_p95_s=tpot)
        keys[series] = (profile, plan_key(params, slo, applies_slo=table is not None))
    return keys


def band_choice_metrics(rows: list[tuple[str, str, Any]]) -> Iterator[Metric]:
    quantile = GaugeMetricFamily(
        "gpucast_plan_band_quantile",
        "Quantile band auto sizes on under the default plan parameters (0.7 for q70), from "
        "the newest stored choice; absent while auto is not calibrated",
        labels=["series", "profile"],
    )
    headroom = GaugeMetricFamily(
        "gpucast_plan_band_headroom",
        "Headroom over the point forecast band auto sizes on under the default plan "
        "parameters (1.15: yhat x 1.15), from the newest stored choice; absent while auto is "
        "not calibrated",
        labels=["series", "profile"],
    )
    met = GaugeMetricFamily(
        "gpucast_plan_band_met",
        "1 when band auto's chosen quantile met max_over_capacity in its replay, 0 when no "
        "quantile did or auto could not be calibrated (default plan parameters)",
        labels=["series", "profile"],
    )
    for name, profile, result in rows:
        result = result if isinstance(result, dict) else {}
        match = QUANTILE_BAND.fullmatch(str(result.get("band", "")))
        calibrated = bool(result.get("candidates") or result.get("quantiles"))
        if match and calibrated:
            quantile.add_metric([name, profile], int(match.group(1)) / 100)
        if calibrated and result.get("headroom") is not None:
            headroom.add_metric([name, profile], float(result["headroom"]))
        met.add_metric([name, profile], 1 if calibrated and result.get("met") else 0)
    yield from (quantile, headroom, met)
