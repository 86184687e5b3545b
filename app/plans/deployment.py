"""Saving a series' deployment, refused (an InputError: 422, exit 2, nothing stored) when the
plans it asks for cannot be served: a latency SLO on a profile that cannot apply one (no
load-test table: it is sized on its one figure whatever the SLO), or an SLO the profile misses
even at the lowest load at the series' mixes. An accepted deployment is one that
``desired-replicas``, ``/metrics`` and every other plan surface can plan.

The mixes checked are those the plans will use: tomorrow's plan hours when the series has a
forecast (the check each plan read makes), else its recent measured mix, else — a series with
no stored hours yet — the table's measured mixes (refused only when none of them meets the
SLO at the lowest load).

Once saved, the deployment's plan under the default parameters is built in the same
transaction, so its band auto choice is stored with it: readers that never calibrate (the
overview, ``/metrics``) then find the choice ``desired-replicas`` sizes on, and every surface
shows the same fleet from the first read after the deployment — not the fallback band until
some read calibrates.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session

import capacity
from app.db import repository
from app.db.models import GpuProfile, Series
from app.errors import AppError, InputError
from app.forecasts import store as forecast_store
from app.plans.auto_band import OPERATOR
from app.plans.params import PEAK_DAYS, PlanParams
from app.plans.service import series_plan
from app.plans.slo_sizing import SloSizing, hourly_mix, recent_mix, slo_sizing
from app.profiles.deployments import Deployment, Slo, set_deployment

__all__ = ["deploy"]

logger = logging.getLogger(__name__)


def deploy(
    session: Session, *, series_name: str, profile_name: str, slo: Slo | None = None
) -> Deployment:
    """Serve ``series_name`` with ``profile_name`` (and ``slo``) once the plans it asks for
    can be made (see the module doc); 404 for an unknown series or profile."""
    series = repository.get_series(session, name=series_name)
    profile = repository.get_gpu_profile(session, name=profile_name)
    if slo is not None:
        _check_slo(session, series=series, profile=profile, slo=slo)
    deployment = set_deployment(
        session, series_name=series_name, profile_name=profile_name, slo=slo
    )
    _store_band_choice(session, series_name=series_name)
    return deployment


def _store_band_choice(session: Session, *, series_name: str) -> None:
    """Build the deployment's default plan, which stores its band auto choice (nothing to do
    without a forecast). A plan that cannot be built does not undo the deployment: every
    read of it says why, as before."""
    try:
        series_plan(session, series_name=series_name, params=PlanParams(), calibrated_by=OPERATOR)
    except AppError as exc:
        logger.info("no plan stored for the deployment of %s: %s", series_name, exc)


def _check_slo(session: Session, *, series: Series, profile: GpuProfile, slo: Slo) -> None:
    at = f"p95 TTFT ≤ {slo.ttft_p95_s:g} s, TPOT ≤ {slo.tpot_p95_s:g} s"
    sizing = slo_sizing(session, profile=profile, slo=slo)
    if sizing is None:
        raise InputError(
            f"profile {profile.name!r} cannot apply a latency SLO ({at}): it has no load-test "
            f"table, so it is sized on its one figure ({profile.tokens_per_s_per_gpu:g} tokens/s "
            "per GPU) whatever the SLO; import a load test for it ('gpucast profile import', "
            "PUT /v1/gpu-profiles/{name}/loadtest) or deploy it without an SLO"
        )
    try:
        _check_mixes(session, series=series, sizing=sizing)
    except capacity.SloUnreachableError as exc:
        raise InputError(
            f"series {series.name!r} cannot be served on profile {profile.name!r} at {at}: {exc}"
        ) from exc


def _check_mixes(session: Session, *, series: Series, sizing: SloSizing) -> None:
    """Raise SloUnreachableError for the first mix the plans would use that misses the SLO
    at the lowest load (an InputError when the series stores no prompt/completion mix)."""
    history = repository.recent_observations_frame(
        session, series_id=series.id, span=timedelta(days=PEAK_DAYS)
    )
    runs = (
        forecast_store.latest_run(session, series_id=series.id, metric=metric)
        for metric in ("tokens", "requests")  # the run a plan is built from
    )
    run = next((run for run in runs if run is not None), None)
    if run is not None:
        hours = forecast_store.run_points(session, run_id=run.id)["ds"]
        mix = hourly_mix(
            session, series_id=series.id, series_name=series.name, hours=hours, history=history
        )
        prompts, completions = mix.prompt_tokens, mix.completion_tokens
    elif not history.empty:
        prompt, completion = recent_mix(history, series_name=series.name)
        prompts, completions, hours = np.array([prompt]), np.array([completion]), None
    else:
        _check_measured_mixes(sizing)
        return
    try:
        capacity.slo_capacity_by_hour(
            sizing.model,
            sizing.slo,
            prompt_tokens=prompts,
            completion_tokens=completions,
            hours=pd.Series(hours) if hours is not None else None,
        )
    except capacity.SloUnreachableError as exc:
        if hours is not None:
            raise
        raise capacity.SloUnreachableError(  # no forecast yet: the mix of its recent hours
            f"its mix over the stored hours of the last {PEAK_DAYS} days: {exc}",
            limit=exc.limit,
            value_s=exc.value_s,
            limit_s=exc.limit_s,
        ) from exc


def _check_measured_mixes(sizing: SloSizing) -> None:
    """With no mix of the series' own: refuse only when no measured mix meets the SLO."""
    first: capacity.SloUnreachableError | None = None
    for prompt, completion in sizing.model.table.mixes():
        try:
            sizing.model.capacity(
                prompt_tokens=prompt, completion_tokens=completion, slo=sizing.slo
            )
        except capacity.SloUnreachableError as exc:
            first = first or exc
        else:
            return
    if first is not None:
        raise capacity.SloUnreachableError(
            f"no measured mix of its load test meets it, e.g. {first}",
            limit=first.limit,
            value_s=first.value_s,
            limit_s=first.limit_s,
        ) from first
