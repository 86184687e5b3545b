"""From a stored forecast to a GPU plan and its cost (the service side of capacity/).

Plans are computed from stored forecast runs only — nothing is refitted on read — and cached
per (series, latest run ids, newest observation, profile, its production hours, parameters)
(:func:`app.plans.plan_cache.cache_key_row`). A cached read costs one query (those keys and
the profile's figures, in one round trip) and a dict lookup. The same
:func:`plan_from_forecast` builds the plan the service serves and the plans the replay
rebuilds at past decision times. At an SLO the served plan sizes each hour on the answer the
SLO capacity endpoint gives at its mix, production hours folded in; the replay's plans stay on
the load test's model (production hours after a decision would be look-ahead).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from pydantic import TypeAdapter
from sqlalchemy.orm import Session

import capacity
from app.common.words import count
from app.db import repository
from app.db.models import ForecastRun, GpuProfile
from app.errors import NotFoundError
from app.forecasts import store as forecast_store
from app.plans.auto_band import READ, STORED, band_choice, stored_choice
from app.plans.calibration import BandChoice
from app.plans.expected import FLOOR_WORDS, Expected
from app.plans.params import PEAK_DAYS, STALE_AFTER, PlanParams
from app.plans.plan_cache import PlanCache, cache_key_row
from app.plans.sizing import (
    ProfileFigures,
    plan_from_forecast,
    token_hours,
)
from app.plans.slo_sizing import SloSizing, hourly_mix, learned, slo_sizing
from app.profiles.deployments import Slo, bind_profile
from app.profiles.drift import Drift, profile_drifts


def _utc(moment: Any) -> datetime | None:
    if moment is None:
        return None
    stamp = pd.Timestamp(moment)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return stamp.to_pydatetime()


@dataclass
class SeriesPlan:
    series: str
    profile: str
    source: str  # "tokens forecast" | "requests forecast x tokens per request"
    run_ids: tuple[int, ...]
    model: str | None
    trained_until: Any
    tokens_per_request: float | None
    params: PlanParams
    plan: capacity.GPUPlan
    cost: capacity.PlanCost | None
    run_kind: str = "nightly"
    fitted_run_id: int | None = None
    band_choice: dict[str, Any] | None = None
    # how the profile was chosen: given | deployment | only profile
    profile_source: str = "given"
    slo: Slo | None = None
    # how each hour's per-GPU tokens/s was obtained (see capacity_basis) and, at an SLO,
    # where the hours' prompt/completion mix came from
    sized_at_slo: bool = False
    mix_source: str | None = None
    # the fleet expected to run beside the floor the plan's hours are (app.plans.expected)
    expected: Expected | None = None
    # at an SLO: the profile's running fleet against its load test (app.profiles.drift)
    drift: Drift | None = None
    _json: dict[tuple[bool, int], bytes] = field(default_factory=dict, repr=False, compare=False)

    @property
    def valid_until(self) -> datetime | None:
        trained = _utc(self.trained_until)
        return trained + STALE_AFTER if trained is not None else None

    @property
    def band_label(self) -> str:
        """The band asked for and, for auto, the quantile it sized on: ``auto (q70)``."""
        if self.params.band != "auto":
            return self.params.band
        headroom = (self.band_choice or {}).get("headroom")
        if headroom:
            return f"auto ({self.plan.band} x {headroom:.2f})"
        return f"auto ({self.plan.band})"

    def is_stale(self, now: datetime | None = None) -> bool:
        """True when the plan's forecast was trained more than 36 h before ``now``, or when
        none of the plan's hours is still ahead (every hour of it is past)."""
        valid_until = self.valid_until
        moment = now or datetime.now(UTC)
        if valid_until is None or moment > valid_until:
            return True
        return self.hours_ahead(moment) == 0

    def hours_ahead(self, now: datetime | None = None) -> int:
        """Plan hours from the hour holding ``now`` on (the current hour counts as ahead)."""
        current = pd.Timestamp(now or datetime.now(UTC)).floor("h")
        return int((pd.DatetimeIndex(self.plan.frame["hour"]) >= current).sum())

    def notes(self, now: datetime | None = None) -> list[str]:
        """What an operator should know about the hours this plan covers."""
        moment = now or datetime.now(UTC)
        total = len(self.plan.frame)
        ahead = self.hours_ahead(moment)
        drift = [self.drift.note()] if self.drift is not None and self.drift.alerting else []
        if ahead == total:
            mix = capacity.slo_plan_notes(self.plan.frame) if self.sized_at_slo else []
            return [*mix, *drift]
        trained = _utc(self.trained_until)
        since = f"trained until {trained:%Y-%m-%d %H:%M} UTC" if trained else "never trained"
        refresh = (
            f"refresh it ('gpucast forecast --refresh {self.series}', or the hourly cycle) for a "
            "plan of the hours ahead"
        )
        mix = capacity.slo_plan_notes(self.plan.frame) if self.sized_at_slo else []
        if ahead == 0:
            past = f"every hour of this plan is past (its forecast was {since}); {refresh}"
            return [past, *mix, *drift]
        return [
            f"{total - ahead} of this plan's {count(total, 'hour')} are past and only {ahead} "
            f"ahead (its forecast was {since}); {refresh}",
            *mix,
            *drift,
        ]

    def as_json(self, now: datetime | None = None) -> bytes:
        """:meth:`as_dict` encoded as JSON once per plan, staleness and hours ahead (cached
        plans are served as bytes)."""
        key = (self.is_stale(now), self.hours_ahead(now))
        if key not in self._json:
            self._json[key] = _JSON.dump_json(self.as_dict(now))
        return self._json[key]

    def as_dict(self, now: datetime | None = None) -> dict[str, Any]:
        frame = self.plan.frame
        factors = self.plan.peak_factors
        return {
            "series": self.series,
            "profile": self.profile,
            "profile_source": self.profile_source,
            "slo": self.slo.as_dict() if self.slo is not None else None,
            "capacity_basis": self.capacity_basis,
            "mix_source": self.mix_source,
            "production_hours": self.production_hours,
            "source": self.source,
            "forecast_run_ids": list(self.run_ids),
            "model": self.model,
            "trained_until": self.trained_until,
            "valid_until": self.valid_until,
            "stale": self.is_stale(now),
            "hours_ahead": self.hours_ahead(now),
            "notes": self.notes(now),
            "tokens_per_request": self.tokens_per_request,
            "run_kind": self.run_kind,
            "fitted_run_id": self.fitted_run_id,
            **self.params.as_dict(),
            "sized_band": self.plan.band,
            "band_choice": self.band_choice,
            "per_gpu_tokens_per_s": self.plan.per_gpu_tokens_per_s,
            "gpus_per_replica": self.plan.gpus_per_replica,
            "peak_gpus": int(self.plan.peak_gpus),
            "peak_replicas": int(self.plan.peak_replicas),
            "gpu_hours": float(self.plan.gpu_hours),
            "raw_peak_gpus": int(frame["raw_gpus"].max()),
            "raw_gpu_hours": float(self.plan.raw_gpu_hours),
            "peak_factor": {
                "source": factors.source,
                "note": factors.note,
                "quantile": factors.quantile,
                "days": factors.days,
                "samples": factors.samples,
                "by_hour_utc": list(factors.by_hour),
            },
            "short_hours": [
                {
                    "hour": row.hour.to_pydatetime(),
                    "raw_gpus": int(row.raw_gpus),
                    "gpus": int(row.gpus),
                    "short_gpus": int(row.short_gpus),
                }
                for row in self.plan.short_hours.itertuples(index=False)
            ],
            "cost": _cost_dict(self.cost),
            "gpus_are": FLOOR_WORDS,
            "expected_fleet": self._expected().as_dict(_cost_dict),
            "hours": [
                {
                    "hour": row.hour.to_pydatetime(),
                    "load_tokens_per_s": float(row.load_tokens_per_s),
                    "peak_factor": float(row.peak_factor),
                    "sized_tokens_per_s": float(row.sized_tokens_per_s),
                    "raw_gpus": int(row.raw_gpus),
                    "gpus": int(row.gpus),
                    "replicas": int(row.replicas),
                    "short_gpus": int(row.short_gpus),
                    "expected_utilization": float(row.expected_utilization),
                    "peak_utilization": float(row.peak_utilization),
                    **self._hour_capacity(row),
                    **self._expected().hour(index),
                }
                for index, row in enumerate(frame.itertuples(index=False))
            ],
        }

    def _expected(self) -> Expected:
        return self.expected or Expected(None, None, "not measured")

    @property
    def production_hours(self) -> int | None:
        """At an SLO: the most production hours any plan hour's capacity rests on (those
        near its mix, of the last 14 days); None otherwise."""
        if not self.sized_at_slo:
            return None
        return int(self.plan.frame["production_hours"].max())

    @property
    def capacity_basis(self) -> str:
        """What each hour's per-GPU tokens/s is: the SLO capacity at the hour's mix, or the
        profile's one figure (also when an SLO is set but the profile has no load test)."""
        if self.sized_at_slo:
            return "slo capacity at each hour's mix"
        if self.slo is not None:
            return "profile tokens/s per GPU (the profile has no load test; SLO not applied)"
        return "profile tokens/s per GPU"

    def _hour_capacity(self, row: Any) -> dict[str, float | str | None]:
        """The hour's mix and the capacity it was sized with (mix None without an SLO)."""
        if not self.sized_at_slo:
            return {
                "prompt_tokens_per_request": None,
                "completion_tokens_per_request": None,
                "requests_per_s_per_replica": None,
                "per_gpu_tokens_per_s": self.plan.per_gpu_tokens_per_s,
                "basis": None,
                "production_hours": None,
            }
        return {
            "prompt_tokens_per_request": float(row.prompt_tokens_per_request),
            "completion_tokens_per_request": float(row.completion_tokens_per_request),
            "requests_per_s_per_replica": float(row.requests_per_s_per_replica),
            "per_gpu_tokens_per_s": float(row.per_gpu_tokens_per_s),
            "basis": str(row.basis),
            "production_hours": int(row.production_hours),
        }


_JSON: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def _cost_dict(cost: capacity.PlanCost | None) -> dict[str, Any] | None:
    if cost is None:
        return None
    out: dict[str, Any] = {}
    for key, value in asdict(cost).items():
        if key == "hourly_usd":
            continue
        out[key] = float(value) if isinstance(value, int | float) else value
    return out


def series_plan(
    session: Session,
    *,
    series_name: str,
    profile_name: str | None = None,
    params: PlanParams,
    cache: PlanCache | None = None,
    slo: Slo | None = None,
    calibrated_by: str = READ,
) -> SeriesPlan:
    """The GPU plan for tomorrow from the latest complete forecast of a series, on the given
    profile or the series' deployment (:func:`app.profiles.bind_profile`), sized to ``slo``
    or the deployment's SLO. ``calibrated_by``: who asks, should band auto calibrate or an
    explicit band be replayed for its expected fleet (a read's calibrations are bounded:
    :func:`app.plans.auto_band.band_choice`; STORED: only what is stored is read)."""
    key = None
    if cache is not None:
        row = cache_key_row(session, series_name=series_name, profile_name=profile_name)
        if row is not None:
            # a stored-only reader's plan may lack an explicit band's fleet: kept apart
            key = (series_name, profile_name, *row, params, slo, calibrated_by == STORED)
            if (hit := cache.get(key)) is not None:
                return hit
    series = repository.get_series(session, name=series_name)
    binding = bind_profile(session, series_name=series_name, profile_name=profile_name, slo=slo)
    profile = repository.get_gpu_profile(session, name=binding.profile)
    tokens_run = forecast_store.latest_run(session, series_id=series.id, metric="tokens")
    requests_run = None
    if tokens_run is None:
        requests_run = forecast_store.latest_run(session, series_id=series.id, metric="requests")
        if requests_run is None:
            raise NotFoundError(
                f"series {series_name!r} has no complete forecast yet; run "
                f"'gpucast forecast {series_name}' or POST /v1/series/{series_name}/forecast"
            )
    run = tokens_run or requests_run
    assert run is not None
    plan = _build(
        session,
        series_name=series_name,
        series_id=series.id,
        run=run,
        uses_tokens=tokens_run is not None,
        profile=profile,
        params=params,
        slo=binding.slo,
        calibrated_by=calibrated_by,
    )
    plan = replace(plan, profile_source=binding.source, slo=binding.slo)
    if cache is not None and key is not None:
        cache.put(key, plan)
    return plan


def auto_sizing(
    choice: BandChoice, forecast: pd.DataFrame, params: PlanParams
) -> tuple[pd.DataFrame, PlanParams]:
    """The forecast and parameters band auto sizes with: the point forecast times the
    calibrated headroom (a copy of the frame), at the safety factor auto implies (1.0 unless
    given); a fallback band as it is, at its own default."""
    band = choice.band
    if band not in forecast.columns:  # a run stored before quantiles existed
        choice.note += f"; this run has no {band}, sized on hi_80"
        band = "hi_80"
    if choice.headroom is None or band != choice.band:
        return forecast, replace(params, band=band)
    scaled = forecast.copy()
    scaled[band] = scaled[band] * choice.headroom
    return scaled, replace(params, band=band, safety_factor=params.sizing_safety_factor)


def _build(
    session: Session,
    *,
    series_name: str,
    series_id: int,
    run: ForecastRun,
    uses_tokens: bool,
    profile: GpuProfile,
    params: PlanParams,
    slo: Slo | None = None,
    calibrated_by: str = READ,
) -> SeriesPlan:
    forecast = forecast_store.run_points(session, run_id=run.id)
    # The peak factors and a requests forecast's tokens per request read the last PEAK_DAYS
    # days; the whole history only when those days hold no token count to measure from.
    history = repository.recent_observations_frame(
        session, series_id=series_id, span=timedelta(days=PEAK_DAYS)
    )
    if not uses_tokens and token_hours(history).empty:
        history = repository.observations_frame(session, series_id=series_id)
    figures = ProfileFigures.of(profile)
    sizing = slo_sizing(session, profile=profile, slo=slo)
    mix = None
    if sizing is not None:
        mix = hourly_mix(
            session,
            series_id=series_id,
            series_name=series_name,
            hours=forecast["ds"],
            history=history,
        )
    measured = _band_measurement(
        session,
        series_id=series_id,
        series_name=series_name,
        run=run,
        uses_tokens=uses_tokens,
        profile=figures,
        params=params,
        slo=sizing,
        calibrated_by=calibrated_by,
    )
    choice = measured if params.band == "auto" else None
    sized = params
    if choice is not None:
        forecast, sized = auto_sizing(choice, forecast, params)
    plan, tokens_per_request, cost = plan_from_forecast(
        forecast,
        history=history,
        uses_tokens=uses_tokens,
        profile=figures,
        params=sized,
        series_name=series_name,
        # band auto calibrated on the lab's model (its replay must not see later hours); the
        # plan itself sizes on what the running fleet showed
        at_slo=(learned(session, sizing, profile_id=profile.id), mix)
        if sizing is not None and mix is not None
        else None,
    )
    return SeriesPlan(
        series=series_name,
        profile=profile.name,
        source="tokens forecast" if uses_tokens else "requests forecast x tokens per request",
        run_ids=(run.id,),
        model=run.model,
        trained_until=run.trained_until,
        tokens_per_request=tokens_per_request,
        params=params,
        plan=plan,
        cost=cost,
        run_kind=run.kind,
        fitted_run_id=run.parent_id or run.id,
        band_choice=choice.as_dict() if choice is not None else None,
        sized_at_slo=sizing is not None,
        mix_source=mix.source if mix is not None else None,
        expected=Expected.of(plan, measured, params, figures.prices()),
        drift=_drift(session, profile.name) if sizing is not None else None,
    )


def _band_measurement(
    session: Session,
    *,
    run: ForecastRun,
    profile: ProfileFigures,
    params: PlanParams,
    slo: SloSizing | None,
    calibrated_by: str,
    **keys: Any,
) -> BandChoice | None:
    """Band auto's choice, or an explicit band's replay measuring its expected fleet
    (app.plans.band_fleet): the stored one, else made now. Band auto's sizes the plan, so it
    is made for any reader; an explicit band's only measures, so readers that only read what
    is stored (STORED) never make it."""
    if params.band != "auto" and calibrated_by == STORED:
        return stored_choice(
            session,
            series_id=keys["series_id"],
            profile_name=profile.name,
            params=params,
            run=run,
            slo=slo,
        )
    stored_by = READ if calibrated_by == STORED else calibrated_by
    return band_choice(
        session, run=run, profile=profile, params=params, slo=slo, stored_by=stored_by, **keys
    )


def _drift(session: Session, profile_name: str) -> Drift | None:
    return profile_drifts(session, now=datetime.now(UTC), profile_name=profile_name).get(
        profile_name
    )
