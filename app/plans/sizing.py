"""From a forecast frame to a GPU plan: the profile's figures, peak factors, tokens per
request and the user's formula with the schedule rules (no database access). The capacity
endpoint, the band=auto calibration and the plan replay all size through here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import capacity
from app.db.models import GpuProfile
from app.errors import InputError
from app.plans.params import PEAK_DAYS, PlanParams
from app.plans.slo_sizing import HourlyMix, SloSizing
from app.profiles.slo_capacity import PRODUCTION_WINDOW

PRODUCTION_WINDOW_HOURS = PRODUCTION_WINDOW.total_seconds() / 3600.0

SloPlanInputs = tuple[SloSizing, HourlyMix]


@dataclass(frozen=True)
class ProfileFigures:
    """What a plan needs of a GPU profile, as plain values (no ORM object)."""

    name: str
    tokens_per_s_per_gpu: float
    gpus_per_replica: int
    usd_per_hour_on_demand: float | None = None
    usd_per_hour_reserved: float | None = None
    usd_per_hour_spot: float | None = None

    @classmethod
    def of(cls, profile: GpuProfile) -> ProfileFigures:
        """The profile's figures; a 409 naming it when a stored figure is unusable."""
        from app.profiles.problems import require_usable_figures

        require_usable_figures(profile)
        return cls(
            name=profile.name,
            tokens_per_s_per_gpu=profile.tokens_per_s_per_gpu,
            gpus_per_replica=profile.gpus_per_replica,
            usd_per_hour_on_demand=profile.usd_per_hour_on_demand,
            usd_per_hour_reserved=profile.usd_per_hour_reserved,
            usd_per_hour_spot=profile.usd_per_hour_spot,
        )

    def prices(self) -> capacity.Prices | None:
        if not self.usd_per_hour_on_demand:
            return None
        return capacity.Prices(
            on_demand_usd_per_hour=self.usd_per_hour_on_demand,
            reserved_usd_per_hour=self.usd_per_hour_reserved,
            spot_usd_per_hour=self.usd_per_hour_spot,
        )


def peak_factors_from_history(history: pd.DataFrame) -> capacity.PeakFactors:
    """Peak factors from stored hours: peak_rps ÷ (requests / 3600), last PEAK_DAYS days."""
    if history.empty or "peak_rps" not in history or history["peak_rps"].isna().all():
        return capacity.PeakFactors.none()
    mean_rps = pd.to_numeric(history["requests"], errors="coerce").to_numpy(dtype=float) / 3600
    peak = pd.to_numeric(history["peak_rps"], errors="coerce").to_numpy(dtype=float)
    return capacity.peak_factors(history["hour"], mean_rps, peak, days=PEAK_DAYS)


def tokens_per_request(
    history: pd.DataFrame, *, series_name: str, days: int | None = PEAK_DAYS
) -> float:
    """Total tokens ÷ total requests over the stored hours that hold both — those of the last
    ``days`` days of the history (None, or a frame without an ``hour`` column: all of it).
    When those days hold no such hour (token counts stopped arriving), the last ``days`` days
    that do: the newest measured mix."""
    measured = token_hours(history)
    if days is not None and "hour" in measured and not measured.empty:
        span = pd.Timedelta(days=days)
        newest = history["hour"].max()
        if measured["hour"].max() < newest - span:
            newest = measured["hour"].max()
        measured = measured[measured["hour"] >= newest - span]
    try:
        return capacity.tokens_per_request_from_history(
            measured["requests"], measured["total_tokens"]
        )
    except capacity.CapacityError as exc:
        raise InputError(
            f"series {series_name!r} has a requests forecast but no token history to convert "
            f"requests into tokens/s: {exc}"
        ) from exc


def known_tokens_per_request(
    history: pd.DataFrame, times: pd.DatetimeIndex, *, series_name: str, days: int = PEAK_DAYS
) -> np.ndarray:
    """The tokens per request known at each of ``times``: total tokens ÷ total requests of the
    stored hours that hold both and ended before the hour of that time began, over the last
    ``days`` days of them (the newest ``days`` days measured, when those days hold none).
    Times before the first measured hour take its ratio (nothing earlier exists). What comes
    after a time never changes its ratio — the replay converts a requests load with it."""
    measured = token_hours(history).sort_values("hour")
    if measured.empty:
        raise InputError(
            f"series {series_name!r} has no stored hour with both requests and tokens to "
            "convert requests into tokens/s"
        )
    hours = pd.DatetimeIndex(measured["hour"])
    cum_tokens = np.concatenate([[0.0], np.cumsum(measured["total_tokens"].to_numpy(float))])
    cum_requests = np.concatenate([[0.0], np.cumsum(measured["requests"].to_numpy(float))])
    span = pd.Timedelta(days=days)
    floors = pd.DatetimeIndex(times).floor("h")
    upto = np.searchsorted(hours.asi8, floors.asi8, side="left")  # hours strictly before
    newest = hours.asi8[np.maximum(upto - 1, 0)]
    since = np.searchsorted(hours.asi8, np.minimum(floors.asi8, newest + 1) - span.value)
    since = np.minimum(since, np.maximum(upto - 1, 0))
    first = np.where(upto == 0)[0]
    upto[first], since[first] = 1, 0  # before any measured hour: the first one's ratio
    return (cum_tokens[upto] - cum_tokens[since]) / (cum_requests[upto] - cum_requests[since])


def token_hours(history: pd.DataFrame) -> pd.DataFrame:
    """The stored hours with both a token count and at least one request."""
    requests = pd.to_numeric(history["requests"], errors="coerce")
    tokens = pd.to_numeric(history["total_tokens"], errors="coerce")
    return history[(requests > 0) & tokens.notna()]


def plan_from_forecast(
    forecast: pd.DataFrame,
    *,
    history: pd.DataFrame,
    uses_tokens: bool,
    profile: ProfileFigures,
    params: PlanParams,
    series_name: str,
    peak_factors: capacity.PeakFactors | None = None,
    at_slo: SloPlanInputs | None = None,
) -> tuple[capacity.GPUPlan, float | None, capacity.PlanCost | None]:
    """The plan gpucast serves for a forecast (of tokens, or of requests when not uses_tokens):
    peak factors from the history (unless given), the user's formula, the schedule rules and
    the honest cost. Returns (plan, tokens per request or None, cost or None).

    ``at_slo``: size each hour with the SLO capacity at its mix instead of the profile's one
    figure (a requests forecast then carries each hour's own tokens per request; the tokens
    per request returned is their mean)."""
    factors = peak_factors if peak_factors is not None else peak_factors_from_history(history)
    options: dict[str, Any] = {
        "band": params.band,
        "utilization_target": params.utilization_target,
        "safety_factor": params.sizing_safety_factor,
        "min_gpus": params.min_gpus,
        "max_gpus": params.max_gpus,
        "cold_start_s": params.cold_start_s,
        "scale_down_hold_s": params.scale_down_hold_s,
        "gpus_per_replica": profile.gpus_per_replica,
        "peak_factors": factors,
    }
    per_request = None
    try:
        if at_slo is not None:
            sizing, mix = at_slo
            plan = capacity.plan_gpus_at_slo(
                forecast,
                model=sizing.model,
                slo=sizing.slo,
                prompt_tokens=mix.prompt_tokens,
                completion_tokens=mix.completion_tokens,
                of_requests=not uses_tokens,
                production=sizing.production,
                max_age_hours=PRODUCTION_WINDOW_HOURS,
                **options,
            )
            if not uses_tokens:
                per_request = float(np.mean(mix.prompt_tokens + mix.completion_tokens))
        else:
            if not uses_tokens:
                per_request = tokens_per_request(history, series_name=series_name)
            plan = capacity.plan_gpus(
                forecast,
                per_gpu_tokens_per_s=profile.tokens_per_s_per_gpu,
                tokens_per_request=per_request,
                **options,
            )
        prices = profile.prices()
        cost = capacity.plan_cost(plan, prices) if prices is not None else None
    except capacity.CapacityError as exc:
        raise InputError(str(exc)) from exc
    return plan, per_request, cost
