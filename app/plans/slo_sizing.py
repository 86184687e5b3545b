"""What a plan at a latency SLO needs besides the forecast: the profile's fitted SLO model
and each plan hour's prompt/completion mix.

A plan is sized at the SLO when its profile carries a load-test table and an SLO applies (the
deployment's, or one given by the caller). Each hour's mix (prompt and completion tokens per
request) comes from the series' forecasts of ``prompt_tokens``, ``completion_tokens`` and
``requests`` where all three exist for that hour, else from the recent measured mix (the last
PEAK_DAYS days of stored hours that hold both token counts, as tokens per request is measured).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session

import capacity
from app.db.models import GpuProfile
from app.errors import InputError
from app.forecasts import store as forecast_store
from app.plans.params import PEAK_DAYS
from app.profiles.deployments import Slo
from app.profiles.loadtests import stored_table
from app.profiles.problems import unusable
from app.profiles.slo_capacity import fitted_model, production_hours, profile_ceilings

#: The forecast metrics that carry the mix (forecast when the history holds them).
MIX_METRICS = ("prompt_tokens", "completion_tokens")


@dataclass(frozen=True)
class SloSizing:
    """A profile's fitted SLO model and the SLO a plan is sized to; ``production``: the
    running fleet's hours folded into each hour's answer (:func:`learned`; none in the
    replay, whose decisions must not see hours after them)."""

    model: capacity.SloModel
    slo: capacity.SloTarget
    production: tuple[capacity.ProductionHour, ...] = ()


@dataclass(frozen=True)
class HourlyMix:
    """Prompt and completion tokens per request for each plan hour, and where they came from:
    ``forecast`` (every hour from the mix forecasts), ``recent measured`` (none did), or
    ``forecast, else recent measured`` (some hours)."""

    prompt_tokens: np.ndarray
    completion_tokens: np.ndarray
    source: str
    run_ids: tuple[int, ...] = ()


def slo_sizing(session: Session, *, profile: GpuProfile, slo: Slo | None) -> SloSizing | None:
    """The SLO sizing of a plan on ``profile``: None without an SLO or for a one-number profile
    (those plans are sized with the profile's tokens/s per GPU, as always)."""
    if slo is None:
        return None
    row = stored_table(session, profile_id=profile.id)
    if row is None:
        return None
    try:
        model = fitted_model(
            row,
            gpus_per_replica=profile.gpus_per_replica,
            ceilings=profile_ceilings(profile, row),
        )
        target = capacity.SloTarget(slo.ttft_p95_s, slo.tpot_p95_s)
    except capacity.LoadTestFormatError as exc:
        # the stored table fails the checks an import makes now: the profile, not the request
        raise unusable(profile.name, f"its load test: {exc}") from exc
    except capacity.CapacityError as exc:
        raise InputError(f"profile {profile.name!r}: {exc}") from exc
    return SloSizing(model=model, slo=target)


def learned(session: Session, sizing: SloSizing, *, profile_id: int) -> SloSizing:
    """``sizing`` with the profile's production hours of the last 14 days: the served plan
    sizes each hour on the answer the SLO capacity endpoint gives at its mix."""
    return replace(sizing, production=tuple(production_hours(session, profile_id=profile_id)))


def recent_mix(history: pd.DataFrame, *, series_name: str) -> tuple[float, float]:
    """Prompt and completion tokens per request over the stored hours of the last PEAK_DAYS
    days that hold both counts (the newest PEAK_DAYS days that do, when they stopped)."""
    requests = pd.to_numeric(history["requests"], errors="coerce")
    prompt = pd.to_numeric(history["prompt_tokens"], errors="coerce")
    completion = pd.to_numeric(history["completion_tokens"], errors="coerce")
    measured = history[(requests > 0) & prompt.notna() & completion.notna()]
    if not measured.empty and "hour" in measured:
        newest = min(history["hour"].max(), measured["hour"].max())
        measured = measured[measured["hour"] >= newest - pd.Timedelta(days=PEAK_DAYS)]
    total = pd.to_numeric(measured["requests"]).sum()
    prompts = pd.to_numeric(measured["prompt_tokens"]).sum()
    completions = pd.to_numeric(measured["completion_tokens"]).sum()
    if measured.empty or total <= 0 or prompts <= 0 or completions <= 0:
        raise InputError(
            f"series {series_name!r} has no stored hours with prompt and completion tokens: "
            "a plan at a latency SLO needs the prompt/completion mix (ingest prompt_tokens and "
            "completion_tokens, not only total tokens), or plan without an SLO"
        )
    return float(prompts / total), float(completions / total)


def hourly_mix(
    session: Session,
    *,
    series_id: int,
    series_name: str,
    hours: pd.Series,
    history: pd.DataFrame,
) -> HourlyMix:
    """Each plan hour's mix: the mix forecasts where they cover the hour, else the recent one."""
    index = pd.DatetimeIndex(pd.to_datetime(hours, utc=True))
    runs = [
        forecast_store.latest_run(session, series_id=series_id, metric=metric)
        for metric in (*MIX_METRICS, "requests")
    ]
    prompt = np.full(len(index), np.nan)
    completion = np.full(len(index), np.nan)
    run_ids: tuple[int, ...] = ()
    if all(run is not None for run in runs):
        values = [
            forecast_store.run_points(session, run_id=run.id)
            .set_index("ds")["yhat"]
            .reindex(index)
            .to_numpy(dtype=float)
            for run in runs
            if run is not None
        ]
        with np.errstate(divide="ignore", invalid="ignore"):
            prompt, completion = values[0] / values[2], values[1] / values[2]
        run_ids = tuple(run.id for run in runs if run is not None)
    forecast = np.isfinite(prompt) & np.isfinite(completion) & (prompt > 0) & (completion > 0)
    if forecast.all():
        return HourlyMix(prompt, completion, "forecast", run_ids)
    recent_prompt, recent_completion = recent_mix(history, series_name=series_name)
    prompt = np.where(forecast, prompt, recent_prompt)
    completion = np.where(forecast, completion, recent_completion)
    source = "forecast, else recent measured" if forecast.any() else "recent measured"
    return HourlyMix(prompt, completion, source, run_ids if forecast.any() else ())


def measured_mix_by_hour(history: pd.DataFrame) -> pd.DataFrame | None:
    """Prompt and completion tokens per request of each stored hour that holds both counts,
    carried forward over hours that do not (a mix is known from its hour on, never before):
    columns prompt_tokens, completion_tokens on the hours' UTC index; None when no hour does."""
    requests = pd.to_numeric(history["requests"], errors="coerce")
    prompt = pd.to_numeric(history["prompt_tokens"], errors="coerce") / requests
    completion = pd.to_numeric(history["completion_tokens"], errors="coerce") / requests
    index = pd.DatetimeIndex(pd.to_datetime(history["hour"], utc=True))
    mix = pd.DataFrame(
        {"prompt_tokens": prompt.to_numpy(), "completion_tokens": completion.to_numpy()},
        index=index,
    )
    known = (requests.to_numpy() > 0) & (mix > 0).all(axis=1).to_numpy()
    if not known.any():
        return None
    mix = mix.where(pd.Series(known, index=index), np.nan).sort_index().ffill()
    return mix.dropna()


def slo_capacity_by_stored_hour(
    sizing: SloSizing, history: pd.DataFrame, *, gpus_per_replica: int
) -> pd.Series | None:
    """What one replica sustains within the SLO (tokens/s) at each stored hour's measured mix
    (0 where the SLO cannot be met at that mix), or None when no hour holds a mix."""
    mix = measured_mix_by_hour(history)
    if mix is None:
        return None
    per_gpu = sizing.model.tokens_per_s_per_gpu(
        mix["prompt_tokens"].to_numpy(), mix["completion_tokens"].to_numpy(), sizing.slo
    )
    return pd.Series(np.asarray(per_gpu, dtype=float) * gpus_per_replica, index=mix.index)


#: How many of the newest stored hours holding a mix give the mix a past plan was sized at.
KNOWN_MIX_HOURS = 3


@dataclass(frozen=True)
class KnownMixCapacity:
    """Per moment: the mix measured over the KNOWN_MIX_HOURS newest stored hours before it
    that hold one (as sized: within reach of the measured range), and the per-GPU tokens/s a
    plan sizes that mix at (NaN where no mix was known yet or the SLO cannot be met at it)."""

    prompt_tokens: np.ndarray
    completion_tokens: np.ndarray
    per_gpu_tokens_per_s: np.ndarray

    @property
    def tokens_per_request(self) -> np.ndarray:
        return self.prompt_tokens + self.completion_tokens


def known_mix_capacity(
    sizing: SloSizing, history: pd.DataFrame, moments: pd.DatetimeIndex
) -> KnownMixCapacity:
    """What a plan made at each of ``moments`` is sized at under the SLO when it is replayed
    (the plan replay, band auto's calibration): the SLO capacity at the mix measured over the
    KNOWN_MIX_HOURS newest stored hours before the moment (requests-weighted), so a mix shift
    reaches the replayed plans within hours; nothing after the moment is read. The mix is
    sized by the live plan's rule (:func:`capacity.sized_tokens_per_s_per_gpu`: an unmeasured
    mix at the low edge of its answer's range, a mix far beyond the measured range at the
    nearest one within reach). (A day's window
    lagged a step shift by half a day: the calibration window then held a day of undersized
    plans, and band auto bought headroom for all of them.)"""
    requests = pd.to_numeric(history["requests"], errors="coerce").to_numpy(dtype=float)
    prompt = pd.to_numeric(history["prompt_tokens"], errors="coerce").to_numpy(dtype=float)
    completion = pd.to_numeric(history["completion_tokens"], errors="coerce").to_numpy(dtype=float)
    hours = pd.DatetimeIndex(pd.to_datetime(history["hour"], utc=True))
    known = (requests > 0) & (prompt > 0) & (completion > 0)
    order = np.argsort(hours.asi8[known], kind="stable")
    stamps = hours.asi8[known][order]
    sums = [
        np.concatenate([[0.0], np.cumsum(values[known][order])])
        for values in (requests, prompt, completion)
    ]
    stop = np.searchsorted(stamps, pd.DatetimeIndex(moments).asi8, side="left")
    start = np.maximum(stop - KNOWN_MIX_HOURS, 0)
    total, prompts, completions = (s[stop] - s[start] for s in sums)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_prompt = np.where(stop > start, prompts / total, np.nan)
        per_completion = np.where(stop > start, completions / total, np.nan)
    per_gpu = np.full(len(stop), np.nan)
    measured = np.isfinite(per_prompt) & np.isfinite(per_completion)
    if measured.any():
        sized_prompt, sized_completion, at_mix = capacity.sized_tokens_per_s_per_gpu(
            sizing.model, sizing.slo, per_prompt[measured], per_completion[measured]
        )
        per_prompt[measured], per_completion[measured] = sized_prompt, sized_completion
        per_gpu[measured] = np.where(at_mix > 0, at_mix, np.nan)
    return KnownMixCapacity(per_prompt, per_completion, per_gpu)
