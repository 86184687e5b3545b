"""What the replay executes: the actual load (stored hours or a finer load), the policies
built from the decisions, and :func:`capacity.replay` running them on one fleet."""

from __future__ import annotations

from typing import Any

import pandas as pd

import capacity
from app.common.options import resolved_fallback_behavior
from app.errors import InputError
from app.plans.calibration import CALIBRATION_DAYS
from app.plans.load import hourly_load
from app.plans.params import PlanParams
from app.plans.past_plans import backstop, reactive_spec
from app.plans.replay.daily import daily_rows, nightly_fallbacks
from app.plans.replay.decisions import (
    constant_decision,
    hourly_perfect_foresight,
    load_needed_from,
    rolling_gpucast,
    seasonal_mean_decision,
)
from app.plans.replay.inputs import (
    DAY,
    HOUR,
    HPA_TARGETS,
    MIN_HISTORY,
    STATIC_PEAK_DAYS,
    ReplayOptions,
    SeriesInputs,
    decision_times,
)
from app.plans.replay.scoring import frontier_name, report, tradeoff_name, tradeoff_rows
from app.plans.sizing import (
    tokens_per_request,
)
from app.plans.slo_sizing import slo_capacity_by_stored_hour


def _calibration_reach(params: PlanParams) -> str:
    if params.band != "auto":
        return ""
    return (
        f" and, for band auto, up to {CALIBRATION_DAYS} days before them (each night's margin is "
        "calibrated on the load of the week before it)"
    )


def _gpucast_description(params: PlanParams) -> str:
    band = "the point forecast x the calibrated headroom" if params.band == "auto" else params.band
    trigger = (
        " and the reactive trigger beside it (KEDA's second trigger)"
        if params.reactive_backstop
        else ", the plan trigger alone"
    )
    return (
        f"what gpucast deploys: nightly fit, hourly refresh and plan on {band}, peak factors, "
        f"schedule rules{trigger}"
    )


FALLBACK_WORDS = {
    "static": "each night's expected P99 peak",
    "currentReplicas": "the count it held (fallback.behavior currentReplicas)",
    "currentReplicasIfHigher": "the larger of the count it held and each night's expected P99 "
    "peak (fallback.behavior currentReplicasIfHigher)",
}


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
        params.rules()  # unusable schedule rules are the user's mistake: a 4xx
    except capacity.CapacityError as exc:
        raise InputError(str(exc)) from exc
    history = inputs.history
    if history.empty:
        raise InputError(f"series {inputs.series!r} has no observations to replay")
    has_tokens = history["total_tokens"].notna().any()
    per_req = None
    if history["requests"].notna().any() and has_tokens:
        per_req = tokens_per_request(history, series_name=inputs.series, days=None)
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
    decisions_at = decision_times(start, end, options.nightly_hour_utc)
    warm = decisions_at[0]
    first_hour = history["hour"].min()
    needed = load_needed_from(
        warm, first_hour, params=params, nightly_hour=options.nightly_hour_utc
    )
    if load is not None and warm - first_hour >= MIN_HISTORY and load.index[0] > needed:
        raise InputError(
            f"the load file starts at {load.index[0]:%Y-%m-%d %H:%M}Z, but this {options.days}-"
            f"day replay (to {end:%Y-%m-%d %H:%M}Z) needs load from {needed:%Y-%m-%d %H:%M}Z: "
            f"the replayed days{_calibration_reach(params)}; give a file that covers "
            f"{needed:%Y-%m-%d %H:%M}Z .. {end:%Y-%m-%d %H:%M}Z or replay fewer days"
        )
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
    profile = inputs.profile
    fleet = params.fleet(
        tokens_per_s_per_gpu=profile.tokens_per_s_per_gpu,
        gpus_per_replica=profile.gpus_per_replica,
    )
    slo, slo_notes = _slo_capacity(inputs, warm=min(warm, actual.index[0]))
    try:
        rolling = rolling_gpucast(
            inputs,
            params=params,
            options=options,
            metric=metric,
            nights=decisions_at,
            end=end,
            actual=actual,
            finer=finer,
            fleet=fleet,
            slo=slo,
        )
    except capacity.CapacityError as exc:  # what the inputs cannot replay: a 4xx, exit 2
        raise InputError(str(exc)) from exc
    fallback_behavior = resolved_fallback_behavior(
        options.fallback_behavior, reactive=params.reactive_backstop
    )
    seasonal, static = [], []
    for moment in decisions_at:
        past = actual[(actual.index < moment) & (actual.index >= moment - STATIC_PEAK_DAYS * DAY)]
        past = past.dropna()  # the load observed before the night
        if past.empty:
            past = stored[(stored.index < moment) & (stored.index >= moment - 7 * DAY)]
        try:  # a load too large to size (a GPU count beyond 2**53) is the input's: a 4xx
            seasonal.append(
                seasonal_mean_decision(tokens_h, moment, params=params, profile=inputs.profile)
            )
            static.append(
                constant_decision(float(past.max()), moment, params=params, profile=inputs.profile)
            )
        except capacity.CapacityError as exc:
            raise InputError(str(exc)) from exc
    profile = inputs.profile

    def fallbacks(nights: list[dict[str, Any]]) -> tuple[tuple[pd.Timestamp, int], ...] | None:
        return nightly_fallbacks(
            nights, gpus_per_replica=profile.gpus_per_replica, max_gpus=params.max_gpus
        )

    policies: list[capacity.PlanPolicy | capacity.ReactivePolicy | capacity.InstantBound] = [
        capacity.PlanPolicy(
            "gpucast",
            rolling.decisions,
            reactive=backstop(params),
            recommended=True,
            description=_gpucast_description(params),
            fallback_replicas=fallbacks(rolling.nights),
            fallback_behavior=fallback_behavior,
        ),
        capacity.PlanPolicy(
            "static-peak",
            tuple(static),
            description="the previous 7 days' peak load at utilization 0.75, re-read nightly",
        ),
        capacity.ReactivePolicy(
            reactive=reactive_spec(params, 0.75),
            description="Kubernetes HPA alone at target 0.75 with the same behavior",
        ),
        capacity.PlanPolicy(
            "seasonal-mean",
            tuple(seasonal),
            description="the seeds' 7-day same-hour mean through the same conversion",
        ),
        capacity.PlanPolicy(
            "hourly-perfect-foresight",
            (hourly_perfect_foresight(actual, warm, end, params, profile),),
            description="each hour sized for its busiest moment at 0.75, known in advance "
            "(reads the future: a reference, not a bound)",
        ),
        capacity.InstantBound(
            description="each minute's load on the capacity line ("
            + ("the SLO capacity at its hour's mix" if slo is not None else "100 % of the profile")
            + "), rounded up to whole replicas, no cold start: the least GPU-hours at 0 % over "
            "it (a bound, never a choice)"
        ),
    ]
    extra: list[capacity.PlanPolicy | capacity.ReactivePolicy | capacity.InstantBound] = [
        capacity.ReactivePolicy(
            name=frontier_name(target),
            reactive=reactive_spec(params, target),
            description=f"Kubernetes HPA alone at target {target:g}",
        )
        for target in HPA_TARGETS
    ]
    if options.tradeoff and params.band == "auto":
        # each target's row runs as its own ScaledObject would: its nights' fallbacks, read
        # by the same fallback.behavior as gpucast's row
        for target, (decisions, nights) in rolling.tradeoff.items():
            extra.append(
                capacity.PlanPolicy(
                    tradeoff_name(target),
                    decisions,
                    reactive=backstop(params),
                    fallback_replicas=fallbacks(nights),
                    fallback_behavior=fallback_behavior,
                )
            )
    before = actual[actual.index < warm].dropna()
    initial = float(before.iloc[-60:].mean()) if len(before) else float(stored.iloc[:60].mean())
    try:
        result = capacity.replay(
            actual,
            policies + extra,
            fleet=fleet,
            start=start,
            end=end,
            warmup_start=warm,
            initial_tokens_per_s=initial,
            prices=profile.prices(),
            slo_tokens_per_s_per_replica=slo,
        )
    except capacity.CapacityError as exc:
        raise InputError(str(exc)) from exc
    out = report(
        inputs,
        params,
        options,
        result,
        policies,
        load_source=load_source,
        notes=[*slo_notes, *rolling.notes],
        models=rolling.models,
        decisions=len(rolling.decisions),
        nights=rolling.nights,
        tradeoff=tradeoff_rows(result, rolling) if rolling.tradeoff else None,
    )
    out["unobserved_share"] = result.unobserved_share
    out["fallback_behavior"] = fallback_behavior
    if result.unobserved_share > 0:
        out["notes"].append(
            f"{result.unobserved_share:.2%} of the replayed load was not observed (empty cells "
            "of the load file): there the reactive trigger's reads failed as the ScaledObject's "
            "do (no scale-down, then its fallback: "
            + FALLBACK_WORDS[fallback_behavior]
            + "), and those minutes are left out of time over capacity and every load KPI "
            "(their GPU-hours count); the instant bound bridges them with a straight line"
        )
    out["daily"], out["expected_fleet_accuracy"] = daily_rows(
        rolling.nights,
        result.timelines["gpucast"],
        start=start,
        end=end,
        gpus_per_replica=profile.gpus_per_replica,
        max_gpus=params.max_gpus,
    )
    return out


def _slo_capacity(inputs: SeriesInputs, *, warm: pd.Timestamp) -> tuple[pd.Series | None, list]:
    """What one replica sustains within the SLO at each stored hour's measured mix (from
    ``warm`` on), and notes; None without an SLO or without a measured mix."""
    if inputs.slo is None:
        return None, []
    slo = slo_capacity_by_stored_hour(
        inputs.slo, inputs.history, gpus_per_replica=inputs.profile.gpus_per_replica
    )
    if slo is None:
        return None, [
            "not scored at the SLO: no stored hour holds prompt and completion tokens "
            "(the mix the SLO capacity depends on)"
        ]
    # each decision would see production hours observed after it: the replay stays on the lab
    notes = [
        "plans and the SLO line on the load test's model alone: the running fleet's production "
        "hours are not folded in (hours after a decision would be look-ahead)"
    ]
    if slo.index[0] > warm:
        notes.append(
            f"the hours before {slo.index[0]:%Y-%m-%d %H:%M}Z hold no measured mix: scored at "
            "the SLO at the first measured one"
        )
        slo = pd.concat([pd.Series([slo.iloc[0]], index=[warm]), slo])
    return slo, notes
