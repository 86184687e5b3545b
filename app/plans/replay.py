"""The plan replay of one series: rebuild, at every past decision time, the plan each policy
would have deployed from data strictly before it, then run the actual load against it.

Policies (same load, same fleet rules, same prices):

- ``gpucast`` — what the service deploys: each nightly run at the nightly hour fits the same
  models with the same selection on the history before it, and the plan is built by the very
  function the capacity endpoint uses (band, peak factors, formula, schedule rules).
- ``static-peak`` — the previous 7 days' peak load at the utilization target, re-read each
  night from past load only.
- ``reactive-hpa`` — the Kubernetes HPA alone at target 0.75 with the same behavior.
- ``seasonal-mean`` — the seeds' plan: the 7-day same-hour mean through the same conversion.
- ``oracle`` — perfect foresight of each hour's busiest moment at the utilization target, a
  bound (``bound: true``), never offered as a choice.

The actual load is the stored hours (each hour's busiest minute at ``peak_rps`` when stored)
or a finer load given by the caller. Everything here is computed from values; the caller
reads the database first and stores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

import capacity
from app.errors import InputError
from app.jobs.work import METRIC_COLUMNS, WorkItem, run_item
from app.plans.params import PlanParams
from app.plans.service import ProfileFigures, plan_from_forecast, tokens_per_request

HOUR = pd.Timedelta(hours=1)
DAY = pd.Timedelta(days=1)
STATIC_PEAK_DAYS = 7
MIN_HISTORY = pd.Timedelta(days=2)  # before the first decision
POLICY_ORDER = ("gpucast", "static-peak", "reactive-hpa", "seasonal-mean", "oracle")


@dataclass(frozen=True)
class ReplayOptions:
    days: int = 7
    nightly_hour_utc: int = 2
    models: tuple[str, ...] | None = None
    windows: int | None = None

    def validate(self) -> None:
        if not 1 <= self.days <= 90:
            raise InputError(f"days must be 1..90, got {self.days}")
        if not 0 <= self.nightly_hour_utc <= 23:
            raise InputError(f"nightly_hour_utc must be 0..23, got {self.nightly_hour_utc}")


def candidate_models(text: str | None) -> tuple[str, ...] | None:
    """Comma-separated model names, checked against the registry (None: every candidate)."""
    if text is None:
        return None
    from forecasting import MODELS

    names = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in names if m not in MODELS]
    if unknown or not names:
        raise InputError(
            f"unknown model {unknown[0] if unknown else text!r}; choose from "
            f"{', '.join(sorted(MODELS))}"
        )
    return names


@dataclass(frozen=True)
class SeriesInputs:
    """What a replay reads from the database, as values."""

    series: str
    history: pd.DataFrame  # observations_frame columns
    events: tuple[dict[str, Any], ...]
    profile: ProfileFigures


def hourly_load(history: pd.DataFrame, tokens_per_req: float | None) -> pd.Series:
    """Tokens/s from stored hours on a 1-minute grid: each hour at its mean, except that when
    ``peak_rps`` is stored its busiest minute (taken as the hour's middle minute) runs at the
    peak (converted with that hour's own tokens per request) and the other 59 carry the rest
    of the hour's tokens. Missing hours are interpolated (at most 3 in a row, else the replay
    says so)."""
    frame = history.set_index("hour").sort_index()
    hours = pd.date_range(frame.index[0], frame.index[-1], freq="h")
    frame = frame.reindex(hours)
    if frame["total_tokens"].notna().any():
        tokens_h = frame["total_tokens"].astype(float)
    elif tokens_per_req is not None:
        tokens_h = frame["requests"].astype(float) * tokens_per_req
    else:
        raise InputError("the series has neither token counts nor tokens per request to replay")
    gaps = tokens_h.isna()
    if gaps.rolling(4).sum().max() >= 4:
        raise InputError("the stored history has gaps of 4 hours or more; give --load instead")
    tokens_h = tokens_h.interpolate(limit_direction="both")
    mean = tokens_h.to_numpy() / 3600.0
    requests = pd.to_numeric(frame["requests"], errors="coerce").to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where(requests > 0, tokens_h.to_numpy() / requests, np.nan)
    per_req = np.where(np.isfinite(own), own, tokens_per_req or 0.0)
    peak = pd.to_numeric(frame["peak_rps"], errors="coerce").to_numpy(dtype=float) * per_req
    has_peak = np.isfinite(peak) & (peak > mean)
    rest = np.where(has_peak, np.clip((mean * 60 - peak) / 59, 0.0, None), mean)
    minutes = np.repeat(rest, 60)
    middle = np.arange(len(hours)) * 60 + 30
    minutes[middle] = np.where(has_peak, peak, mean)
    index = pd.date_range(hours[0], periods=len(minutes), freq="min")
    return pd.Series(minutes, index=index, name="tokens_per_s")


def _decision_times(start: pd.Timestamp, end: pd.Timestamp, nightly_hour: int) -> list:
    first = start.floor("D") + pd.Timedelta(hours=nightly_hour)
    if first > start:
        first -= DAY
    times = []
    moment = first
    while moment < end:
        times.append(moment)
        moment += DAY
    return times


def _history_before(history: pd.DataFrame, moment: pd.Timestamp) -> pd.DataFrame:
    return history[history["hour"] < moment]


def _gpucast_decision(
    inputs: SeriesInputs,
    moment: pd.Timestamp,
    *,
    params: PlanParams,
    options: ReplayOptions,
    metric: str,
    peak_load: pd.Series | None,
) -> tuple[capacity.PlanDecision | None, str | None, str | None]:
    """The nightly run at ``moment`` and its plan; (None, None, error) when the run failed."""
    past = _history_before(inputs.history, moment)
    column = past[METRIC_COLUMNS[metric]]
    present = column.notna().to_numpy()
    item = WorkItem(
        series=inputs.series,
        metric=metric,
        hours_ns=past["hour"].to_numpy(dtype="datetime64[ns]").astype("int64")[present],
        values=column.to_numpy(dtype="float64")[present],
        horizon=24,
        models=options.models,
        windows=options.windows,
        events=inputs.events,
    )
    result = run_item(item)
    if result.status != "complete" or result.forecast is None:
        return None, None, f"{moment:%Y-%m-%d %H:%M}Z: forecast failed ({result.error})"
    factors = (
        capacity.peak_factors_from_load(peak_load[peak_load.index < moment])
        if peak_load is not None
        else None
    )
    plan, _, _ = plan_from_forecast(
        result.forecast,
        history=past,
        uses_tokens=metric == "tokens",
        profile=inputs.profile,
        params=params,
        series_name=inputs.series,
        peak_factors=factors,
    )
    decision = capacity.PlanDecision(
        at=moment, start=plan.frame["hour"].iloc[0], gpus=plan.frame["gpus"].to_numpy()
    )
    return decision, result.model, None


def _seasonal_mean_decision(
    tokens_h: pd.Series, moment: pd.Timestamp, *, params: PlanParams, profile: ProfileFigures
) -> capacity.PlanDecision:
    """The seeds' plan: for each of the next 24 hours the mean of the same hour over the
    previous 7 days (those present), through the user's conversion and the schedule rules."""
    past = tokens_h[tokens_h.index < moment]
    hours = pd.date_range(moment, periods=24, freq="h")
    means = []
    for hour in hours:
        same = [hour - k * DAY for k in range(1, 8)]
        values = past.reindex(same).dropna()
        means.append(float(values.mean()) if len(values) else float(past.iloc[-24:].mean()))
    frame = pd.DataFrame({"ds": hours, "yhat": means})
    plan, _, _ = plan_from_forecast(
        frame,
        history=pd.DataFrame(),
        uses_tokens=True,
        profile=profile,
        params=replace(params, band="yhat"),
        series_name="seasonal-mean",
        peak_factors=capacity.PeakFactors.none(),  # the seeds size for the mean
    )
    return capacity.PlanDecision(at=moment, start=hours[0], gpus=plan.frame["gpus"].to_numpy())


def _constant_decision(
    tokens_per_s: float, moment: pd.Timestamp, *, params: PlanParams, profile: ProfileFigures
) -> capacity.PlanDecision:
    gpus = capacity.gpus_for_load(
        tokens_per_s,
        profile.tokens_per_s_per_gpu,
        utilization_target=0.75,
        safety_factor=1.0,
        min_gpus=params.min_gpus,
        gpus_per_replica=profile.gpus_per_replica,
    )
    schedule = capacity.execute_schedule(
        np.repeat(gpus, 24), gpus_per_replica=profile.gpus_per_replica, rules=params.rules()
    )
    return capacity.PlanDecision(at=moment, start=moment, gpus=schedule.gpus)


def _oracle(
    load: pd.Series, warm: pd.Timestamp, end: pd.Timestamp, params: PlanParams, profile
) -> capacity.PlanDecision:
    window = load[(load.index >= warm) & (load.index < end)]
    busiest = window.groupby(window.index.floor("h")).max()
    gpus = capacity.gpus_for_load(
        busiest.to_numpy(),
        profile.tokens_per_s_per_gpu,
        utilization_target=0.75,
        safety_factor=1.0,
        min_gpus=params.min_gpus,
        gpus_per_replica=profile.gpus_per_replica,
    )
    rules = capacity.ScheduleRules(
        cold_start_s=params.cold_start_s,
        scale_down_hold_s=0,
        min_gpus=params.min_gpus,
        max_gpus=params.max_gpus,
    )
    schedule = capacity.execute_schedule(
        gpus, gpus_per_replica=profile.gpus_per_replica, rules=rules
    )
    return capacity.PlanDecision(at=warm, start=busiest.index[0], gpus=schedule.gpus)


def replay_series(
    inputs: SeriesInputs,
    *,
    params: PlanParams,
    options: ReplayOptions = ReplayOptions(),
    load: pd.Series | None = None,
) -> dict[str, Any]:
    """Replay the last ``options.days`` days of a series; returns the backtest object.

    load: tokens/s on a regular UTC index (a finer actual load), or None to replay the
    stored hours (see :func:`hourly_load`).
    """
    options.validate()
    try:
        rules = params.rules()
    except capacity.CapacityError as exc:
        raise InputError(str(exc)) from exc
    history = inputs.history
    if history.empty:
        raise InputError(f"series {inputs.series!r} has no observations to replay")
    has_tokens = history["total_tokens"].notna().any()
    per_req = None
    if history["requests"].notna().any() and has_tokens:
        per_req = tokens_per_request(history, series_name=inputs.series)
    stored = hourly_load(history, per_req)
    actual = load if load is not None else stored
    load_source = (
        "file"
        if load is not None
        else ("stored hours with peak_rps" if history["peak_rps"].notna().any() else "stored hours")
    )
    step = int((actual.index[1] - actual.index[0]).total_seconds())
    end = min(actual.index[-1] + pd.Timedelta(seconds=step), history["hour"].max() + HOUR)
    end = end.floor("h")
    start = end - options.days * DAY
    decisions_at = _decision_times(start, end, options.nightly_hour_utc)
    warm = decisions_at[0]
    first_hour = history["hour"].min()
    if warm - first_hour < MIN_HISTORY or actual.index[0] > warm:
        raise InputError(
            f"a {options.days}-day replay of {inputs.series!r} ends at {end:%Y-%m-%d %H:%M}Z and "
            f"needs history and load from at least {warm - MIN_HISTORY:%Y-%m-%d %H:%M}Z "
            f"(history from {first_hour:%Y-%m-%d %H:%M}Z, load from "
            f"{actual.index[0]:%Y-%m-%d %H:%M}Z); replay fewer days"
        )
    metric = "tokens" if has_tokens else "requests"
    tokens_h = (
        history.set_index("hour")["total_tokens"].astype(float)
        if has_tokens
        else history.set_index("hour")["requests"].astype(float) * (per_req or 0.0)
    )
    finer = load if load is not None else None
    gpucast, seasonal, static, notes, models = [], [], [], [], []
    for moment in decisions_at:
        decision, model, error = _gpucast_decision(
            inputs, moment, params=params, options=options, metric=metric, peak_load=finer
        )
        if decision is not None:
            gpucast.append(decision)
            models.append(model)
        else:
            notes.append(error)
        seasonal.append(
            _seasonal_mean_decision(tokens_h, moment, params=params, profile=inputs.profile)
        )
        past = actual[(actual.index < moment) & (actual.index >= moment - STATIC_PEAK_DAYS * DAY)]
        if past.empty:
            past = stored[(stored.index < moment) & (stored.index >= moment - 7 * DAY)]
        static.append(
            _constant_decision(float(past.max()), moment, params=params, profile=inputs.profile)
        )
    if not gpucast or gpucast[0].at != warm:
        raise InputError(
            f"gpucast's first nightly run of the replay ({warm:%Y-%m-%d %H:%M}Z) failed: "
            + "; ".join(n for n in notes if n)
        )
    profile = inputs.profile
    policies = [
        capacity.PlanPolicy(
            "gpucast",
            tuple(gpucast),
            recommended=True,
            description="what gpucast deploys: nightly forecast, band, peak factors, schedule",
        ),
        capacity.PlanPolicy(
            "static-peak",
            tuple(static),
            description="the previous 7 days' peak load at utilization 0.75, re-read nightly",
        ),
        capacity.ReactivePolicy(
            description="Kubernetes HPA alone at target 0.75 with the same behavior"
        ),
        capacity.PlanPolicy(
            "seasonal-mean",
            tuple(seasonal),
            description="the seeds' 7-day same-hour mean through the same conversion",
        ),
        capacity.PlanPolicy(
            "oracle",
            (_oracle(actual, warm, end, params, profile),),
            bound=True,
            description="perfect foresight of each hour's busiest moment at 0.75 (a bound)",
        ),
    ]
    before = actual[actual.index < warm]
    initial = float(before.iloc[-60:].mean()) if len(before) else float(stored.iloc[:60].mean())
    fleet = capacity.Fleet(
        per_gpu_tokens_per_s=profile.tokens_per_s_per_gpu,
        gpus_per_replica=profile.gpus_per_replica,
        rules=rules,
    )
    try:
        result = capacity.replay(
            actual,
            policies,
            fleet=fleet,
            start=start,
            end=end,
            warmup_start=warm,
            initial_tokens_per_s=initial,
            prices=profile.prices(),
        )
    except capacity.CapacityError as exc:
        raise InputError(str(exc)) from exc
    return _report(
        inputs,
        params,
        options,
        result,
        policies,
        load_source=load_source,
        notes=notes,
        models=models,
        decisions=len(decisions_at),
    )


def _nightly_plans(policy: capacity.PlanPolicy, models: list[str | None]) -> list[dict]:
    return [
        {
            "at": decision.at.to_pydatetime(),
            "start": decision.start.to_pydatetime(),
            "model": model,
            "gpus": [int(g) for g in decision.gpus],
        }
        for decision, model in zip(policy.decisions, models, strict=True)
    ]


def _report(inputs, params, options, result, policies, *, load_source, notes, models, decisions):
    table = result.table
    rows = []
    for policy in policies:
        kpis = table.loc[policy.name]
        rows.append(
            {
                "policy": policy.name,
                "recommended": bool(kpis["recommended"]),
                "bound": bool(kpis["bound"]),
                "description": policy.description,
                **{
                    key: (
                        int(kpis[key]) if key in ("scale_events", "peak_gpus") else float(kpis[key])
                    )
                    for key in capacity.REPLAY_KPIS
                },
            }
        )
    by_name = {row["policy"]: row for row in rows}
    ours, static = by_name["gpucast"], by_name["static-peak"]
    ratio = ours["gpu_hours"] / static["gpu_hours"] if static["gpu_hours"] else None
    return {
        "series": inputs.series,
        "profile": inputs.profile.name,
        "days": options.days,
        "resolution_s": int(result.resolution_s),
        "tick_s": int(result.tick_s),
        "start": result.start.to_pydatetime(),
        "end": result.end.to_pydatetime(),
        "load_source": load_source,
        "nightly_hour_utc": options.nightly_hour_utc,
        "decisions": decisions,
        "models": sorted({m for m in models if m}),
        "params": params.as_dict(),
        "priced": inputs.profile.prices() is not None,
        "policies": rows,
        "versus_static_peak": {
            "gpu_hours_ratio": ratio,
            "gpu_hours_saved": static["gpu_hours"] - ours["gpu_hours"],
            "time_over_capacity_share_difference": (
                ours["time_over_capacity_share"] - static["time_over_capacity_share"]
            ),
            "compared_with": "static-peak: the previous 7 days' peak at utilization 0.75",
        },
        "gpucast_plans": _nightly_plans(policies[0], models),
        "notes": [n for n in notes if n],
    }
