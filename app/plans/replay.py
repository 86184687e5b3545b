"""The plan replay of one series: rebuild, at every past decision time, the plan each policy
would have deployed from data strictly before it, then run the actual load against it.

Policies (same load, same fleet rules, same prices):

- ``gpucast`` — what the service deploys: each nightly run at the nightly hour fits the same
  models with the same selection on the history before it, and the plan is built by the very
  function the capacity endpoint uses (band, peak factors, formula, schedule rules).
- ``static-peak`` — the previous 7 days' peak load at the utilization target, re-read each
  night from past load only.
- ``reactive-hpa`` — the Kubernetes HPA alone at target 0.75 with the same behavior; the
  same HPA at each of ``HPA_TARGETS`` is its cost/risk frontier (``reactive_frontier``), and
  ``reactive-at-equal-risk`` is the cheapest frontier target whose risk is at most gpucast's
  (time over capacity, or time over the SLO when the replay is scored at one: the risk band
  auto holds) — "is the forecast worth it versus KEDA alone?".
- ``seasonal-mean`` — the seeds' plan: the 7-day same-hour mean through the same conversion.
- ``hourly-perfect-foresight`` — each hour sized for its busiest moment at the utilization
  target, known in advance (it reads the future: a reference, never a choice, and not a bound).
- ``instant-bound`` — each minute's load at the utilization target, rounded up to whole
  replicas, no cold start (``bound: true``): the least GPU-hours at 0 % over capacity (of the
  SLO capacity at the minute's mix when scored at an SLO: the least at 0 % over the SLO).

The actual load is the stored hours (each hour's busiest minute at ``peak_rps`` when stored)
or a finer load given by the caller. Everything here is computed from values; the caller
reads the database first and stores nothing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

import capacity
from app.errors import InputError
from app.forecasts.work import METRIC_COLUMNS, WorkItem, run_item
from app.plans.calibration import (
    CALIBRATION_DAYS,
    FALLBACK_BAND,
    POINT_BAND,
    REFRESH_LAG,
    RISK_CAPACITY,
    RISK_WORDS,
    BandChoice,
    FittedState,
    HeadroomReplay,
    Sizing,
    backstop,
    band_decisions,
    hourly_forecasts,
    sized_at_known_mix,
)
from app.plans.load import hourly_load
from app.plans.params import PlanParams
from app.plans.sizing import (
    ProfileFigures,
    peak_factors_from_history,
    plan_from_forecast,
    tokens_per_request,
)
from app.plans.slo_sizing import SloSizing, slo_capacity_by_stored_hour

HOUR = pd.Timedelta(hours=1)
DAY = pd.Timedelta(days=1)
STATIC_PEAK_DAYS = 7
MIN_HISTORY = pd.Timedelta(days=2)  # before the first decision
#: Risk targets of the trade-off table (share of time over capacity).
TRADEOFF_TARGETS = (0.001, 0.005, 0.01, 0.02, 0.05)
POLICY_ORDER = (
    "gpucast",
    "static-peak",
    "reactive-hpa",
    "reactive-at-equal-risk",
    "seasonal-mean",
    "hourly-perfect-foresight",
    "instant-bound",
)
#: The reactive HPA's utilization targets replayed as its cost/risk frontier.
HPA_TARGETS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
EQUAL_RISK = "reactive-at-equal-risk"


@dataclass(frozen=True)
class ReplayOptions:
    days: int = 7
    nightly_hour_utc: int = 2
    models: tuple[str, ...] | None = None
    windows: int | None = None
    tradeoff: bool = False  # also replay gpucast at each of TRADEOFF_TARGETS (band auto)

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
    slo: SloSizing | None = None  # a load-test profile with an SLO: the replay scores it


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


def _nightly_fit(
    inputs: SeriesInputs, moment: pd.Timestamp, *, options: ReplayOptions, metric: str
) -> tuple[FittedState | None, str | None, str | None]:
    """The nightly run at ``moment`` on the history before it: (state, model, error)."""
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
    if result.status != "complete" or result.state is None:
        why = result.error or "the chosen model has no refresh state"
        return None, None, f"{moment:%Y-%m-%d %H:%M}Z: nightly fit failed ({why})"
    return FittedState(available_at=moment, state=result.state), result.model, None


def _sizing(
    inputs: SeriesInputs,
    moment: pd.Timestamp,
    *,
    params: PlanParams,
    metric: str,
    peak_load: pd.Series | None,
) -> Sizing:
    """How the plan made at ``moment`` sizes a forecast: tokens per request and peak factors
    from the data before it, as the capacity endpoint would have then."""
    past = _history_before(inputs.history, moment)
    per_request = (
        None if metric == "tokens" else tokens_per_request(past, series_name=inputs.series)
    )
    if peak_load is not None:
        factors = capacity.peak_factors_from_load(peak_load[peak_load.index < moment])
    else:
        factors = peak_factors_from_history(past)
    return Sizing(
        profile=inputs.profile,
        params=params,
        tokens_per_request=per_request,
        peak_factors=factors,
    )


@dataclass
class _Rolling:
    decisions: tuple[capacity.PlanDecision, ...]
    nights: list[dict[str, Any]]
    models: list[str | None]
    notes: list[str]
    # risk target -> (decisions, band chosen each night) for the trade-off table
    tradeoff: dict[float, tuple[tuple[capacity.PlanDecision, ...], list[str]]]


def _rolling_gpucast(
    inputs: SeriesInputs,
    *,
    params: PlanParams,
    options: ReplayOptions,
    metric: str,
    nights: list[pd.Timestamp],
    end: pd.Timestamp,
    actual: pd.Series,
    finer: pd.Series | None,
    fleet: capacity.Fleet,
    slo: pd.Series | None = None,
) -> _Rolling:
    """gpucast's rolling plan: a nightly fit at each night (data before it), a refresh and a
    plan at every hour from the hours before it, served from the hour + REFRESH_LAG; with
    band "auto" the quantile re-chosen each night by replaying the previous days' hourly
    plans against the load before the night (CALIBRATION_DAYS at most)."""
    warm = nights[0]
    first_hour = inputs.history["hour"].min()
    earliest = max(warm - CALIBRATION_DAYS * DAY, first_hour + MIN_HISTORY)
    fit_nights = [n for n in _decision_times(earliest, warm, options.nightly_hour_utc)]
    fit_nights = [n for n in fit_nights if n >= earliest] + nights
    fits, models, sizings = [], [], {}
    notes: list[str] = []
    for night in fit_nights:
        fit, model, error = _nightly_fit(inputs, night, options=options, metric=metric)
        if fit is None:
            notes.append(error or f"the nightly fit of {night} failed")
            continue
        fits.append(fit)
        if night >= warm:
            models.append(model)
        sizings[night] = _sizing(inputs, night, params=params, metric=metric, peak_load=finer)
    if not fits or fits[-1].available_at < warm or fits[0].available_at > warm:
        raise InputError(
            f"gpucast's nightly fits for the replay failed: {'; '.join(n for n in notes if n)}"
        )
    y = _metric_history(inputs.history, metric)
    moments = pd.date_range(fits[0].available_at, end - HOUR, freq="h")
    forecasts = hourly_forecasts(fits, y, moments)
    fitted_at = np.array([f.available_at.value for f in fits])
    night_of = fitted_at[np.searchsorted(fitted_at, moments.asi8, side="right") - 1]
    per_moment = [sizings[pd.Timestamp(v, tz="UTC")] for v in night_of]
    if inputs.slo is not None:  # a plan at the SLO: at the capacity of the mix known then
        per_moment, mix_notes = sized_at_known_mix(
            per_moment, moments, inputs.slo, inputs.history, of_requests=metric == "requests"
        )
        notes.extend(mix_notes)
    if params.band != "auto":
        fixed = band_decisions(forecasts, moments, params.band, per_moment)
        decisions = tuple(d for d, m in zip(fixed, moments, strict=True) if m >= warm - HOUR)
        night_rows = [_night_row(night, moments, fixed, params.band, None) for night in nights]
        return _Rolling(decisions, night_rows, models, notes, {})
    auto = _AutoMargin(forecasts, moments, per_moment, actual, fleet=fleet, params=params, slo=slo)
    calibrations = {night: auto.calibrate(night) for night in nights}
    night_starts = np.array([n.value for n in nights])

    def decisions_for(choices: dict[pd.Timestamp, BandChoice]) -> tuple:
        # from the hour before the first night on, so that a plan is in force at its start
        out = []
        for row, moment in enumerate(moments):
            if moment < warm - HOUR:
                continue
            owner = max(int(np.searchsorted(night_starts, moment.value, side="right")) - 1, 0)
            out.append(auto.decisions(choices[nights[owner]])[row])
        return tuple(out)

    night_rows = []
    for night in nights:
        choice = calibrations[night]
        night_rows.append(_night_row(night, moments, auto.decisions(choice), choice.label, choice))
    tradeoff = {}
    for target in TRADEOFF_TARGETS if options.tradeoff else ():
        choices = {n: auto.calibrate(n, target) for n in nights}
        tradeoff[target] = (decisions_for(choices), [choices[n].label for n in nights])
    return _Rolling(decisions_for(calibrations), night_rows, models, notes, tradeoff)


def _night_row(
    night: pd.Timestamp,
    moments: pd.DatetimeIndex,
    decisions: list[capacity.PlanDecision],
    band: str,
    choice: BandChoice | None,
) -> dict[str, Any]:
    row = min(int(np.searchsorted(moments.asi8, night.value)), len(moments) - 1)
    decision = decisions[row]
    return {
        "at": night.to_pydatetime(),
        "start": decision.start.to_pydatetime(),
        "band": choice.band if choice else band,
        "headroom": choice.headroom if choice else None,
        "label": choice.label if choice else band,
        "calibration": choice.as_dict() if choice else None,
        "gpus": [int(g) for g in decision.gpus],
    }


class _AutoMargin:
    """Band auto inside the replay: the hourly plans at any headroom over the point forecast
    (built once per headroom), and each night's calibration on the plans of the previous days
    (CALIBRATION_DAYS at most) replayed against the load before the night, with the fleet's
    cold start and the reactive trigger the deployment runs."""

    def __init__(
        self,
        forecasts: dict[str, np.ndarray],
        moments: pd.DatetimeIndex,
        sizings: list[Sizing],
        actual: pd.Series,
        *,
        fleet: capacity.Fleet,
        params: PlanParams,
        slo: pd.Series | None = None,
    ) -> None:
        self._forecasts, self._moments, self._sizings = forecasts, moments, sizings
        self._actual, self._fleet, self._params = actual, fleet, params
        self._slo = slo
        self._by_headroom: dict[float, list[capacity.PlanDecision]] = {}
        self._fallback: list[capacity.PlanDecision] | None = None
        self._replays: dict[pd.Timestamp, HeadroomReplay | None] = {}

    def at_headroom(self, headroom: float) -> list[capacity.PlanDecision]:
        if headroom not in self._by_headroom:
            self._by_headroom[headroom] = band_decisions(
                self._forecasts, self._moments, POINT_BAND, self._sizings, headroom=headroom
            )
        return self._by_headroom[headroom]

    def decisions(self, choice: BandChoice) -> list[capacity.PlanDecision]:
        if choice.headroom is not None:
            return self.at_headroom(choice.headroom)
        if self._fallback is None:  # uncalibrated: the fallback band at its own default
            fallback = [
                replace(s, params=replace(s.params, band=FALLBACK_BAND)) for s in self._sizings
            ]
            self._fallback = band_decisions(self._forecasts, self._moments, FALLBACK_BAND, fallback)
        return self._fallback

    def _window(self, rows: np.ndarray, headroom: float) -> list[capacity.PlanDecision]:
        decisions = self.at_headroom(headroom)
        return [decisions[r] for r in rows]

    def calibrate(self, night: pd.Timestamp, target: float | None = None) -> BandChoice:
        """The choice made at ``night`` for ``target`` (default: the plan's)."""
        target = self._params.max_over_capacity if target is None else target
        if night not in self._replays:
            moments = self._moments
            rows = np.flatnonzero((moments >= night - CALIBRATION_DAYS * DAY) & (moments < night))
            self._replays[night] = (
                None
                if len(rows) == 0
                else HeadroomReplay(
                    functools.partial(self._window, rows),
                    self._actual[self._actual.index < night],
                    fleet=self._fleet,
                    start=moments[rows[0]] + REFRESH_LAG,
                    end=night,
                    backstop=backstop(self._params),
                    slo_tokens_per_s_per_replica=(
                        None if self._slo is None else self._slo[self._slo.index < night]
                    ),
                )
            )
        replay = self._replays[night]
        if replay is None:
            return BandChoice.uncalibrated(target, "no past plans")
        return replay.choose(target)


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


def _metric_history(history: pd.DataFrame, metric: str) -> pd.Series:
    column = history[METRIC_COLUMNS[metric]]
    present = column.notna().to_numpy()
    return pd.Series(
        column.to_numpy(dtype="float64")[present],
        index=pd.DatetimeIndex(history["hour"].to_numpy()[present], tz=None).tz_localize("UTC")
        if history["hour"].dt.tz is None
        else pd.DatetimeIndex(history["hour"])[present],
    )


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


def _hourly_perfect_foresight(
    load: pd.Series, warm: pd.Timestamp, end: pd.Timestamp, params: PlanParams, profile: Any
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
    profile = inputs.profile
    fleet = params.fleet(
        tokens_per_s_per_gpu=profile.tokens_per_s_per_gpu,
        gpus_per_replica=profile.gpus_per_replica,
    )
    slo, slo_notes = _slo_capacity(inputs, warm=min(warm, actual.index[0]))
    rolling = _rolling_gpucast(
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
    seasonal, static = [], []
    for moment in decisions_at:
        seasonal.append(
            _seasonal_mean_decision(tokens_h, moment, params=params, profile=inputs.profile)
        )
        past = actual[(actual.index < moment) & (actual.index >= moment - STATIC_PEAK_DAYS * DAY)]
        if past.empty:
            past = stored[(stored.index < moment) & (stored.index >= moment - 7 * DAY)]
        static.append(
            _constant_decision(float(past.max()), moment, params=params, profile=inputs.profile)
        )
    profile = inputs.profile
    policies: list[capacity.PlanPolicy | capacity.ReactivePolicy | capacity.InstantBound] = [
        capacity.PlanPolicy(
            "gpucast",
            rolling.decisions,
            reactive=backstop(params),
            recommended=True,
            description=_gpucast_description(params),
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
            "hourly-perfect-foresight",
            (_hourly_perfect_foresight(actual, warm, end, params, profile),),
            description="each hour sized for its busiest moment at 0.75, known in advance "
            "(reads the future: a reference, not a bound)",
        ),
        capacity.InstantBound()
        if slo is None
        else capacity.InstantBound(
            description="each minute's load at utilization 0.75 of the SLO capacity at its "
            "hour's mix, rounded up to whole replicas, no cold start: the least GPU-hours at "
            "0 % over the SLO (a bound, never a choice)"
        ),
    ]
    extra: list[capacity.PlanPolicy | capacity.ReactivePolicy | capacity.InstantBound] = [
        capacity.ReactivePolicy(
            name=_frontier_name(target),
            reactive=capacity.ReactiveSpec(target_utilization=target),
            description=f"Kubernetes HPA alone at target {target:g}",
        )
        for target in HPA_TARGETS
    ]
    if options.tradeoff and params.band == "auto":
        for target, (decisions, _) in rolling.tradeoff.items():
            extra.append(
                capacity.PlanPolicy(_tradeoff_name(target), decisions, reactive=backstop(params))
            )
    before = actual[actual.index < warm]
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
    return _report(
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
        tradeoff=_tradeoff_rows(result, rolling) if rolling.tradeoff else None,
    )


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
    notes = []
    if slo.index[0] > warm:
        notes.append(
            f"the hours before {slo.index[0]:%Y-%m-%d %H:%M}Z hold no measured mix: scored at "
            "the SLO at the first measured one"
        )
        slo = pd.concat([pd.Series([slo.iloc[0]], index=[warm]), slo])
    return slo, notes


def _frontier_name(target: float) -> str:
    return f"reactive-hpa@{target:.2f}"


def _tradeoff_name(target: float) -> str:
    return f"gpucast@{target:.1%}"


def _tradeoff_rows(result: capacity.ReplayResult, rolling: _Rolling) -> list[dict[str, Any]]:
    """What each risk target would have cost and risked over the replayed days."""
    rows = []
    for target, (_, bands) in rolling.tradeoff.items():
        kpis = result.table.loc[_tradeoff_name(target)]
        rows.append(
            {
                "max_over_capacity": target,
                "gpu_hours": float(kpis["gpu_hours"]),
                "cost_usd": float(kpis["cost_usd"]),
                "time_over_capacity_share": float(kpis["time_over_capacity_share"]),
                "requests_over_capacity_share": float(kpis["requests_over_capacity_share"]),
                "bands": bands,
            }
        )
    return rows


def _nightly_plans(nights: list[dict], models: list[str | None]) -> list[dict]:
    """Each night: the band chosen (and its calibration) and the plan of its first hour."""
    return [night | {"model": model} for night, model in zip(nights, models, strict=False)]


def _kpi_row(table: pd.DataFrame, name: str) -> dict[str, Any]:
    kpis = table.loc[name]
    keys = [*capacity.REPLAY_KPIS, *([capacity.SLO_KPI] if capacity.SLO_KPI in kpis else [])]
    return {
        key: int(kpis[key]) if key in ("scale_events", "peak_gpus") else float(kpis[key])
        for key in keys
    }


def _frontier(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The reactive HPA's cost/risk at each of HPA_TARGETS."""
    return [
        {"target_utilization": target} | _kpi_row(table, _frontier_name(target))
        for target in HPA_TARGETS
    ]


def _equal_risk(
    frontier: list[dict[str, Any]], risk: float, kpi: str = RISK_CAPACITY
) -> dict[str, Any] | None:
    """The cheapest frontier point whose ``kpi`` (the risk band auto holds: time over the
    SLO when the replay is scored at one, else time over capacity) is at most ``risk``."""
    meeting = [p for p in frontier if p[kpi] <= risk + 1e-12]
    return min(meeting, key=lambda p: p["gpu_hours"]) if meeting else None


def _versus(ours: dict[str, Any], other: dict[str, Any] | None, label: str) -> dict[str, Any]:
    if other is None:
        return {"gpu_hours_ratio": None, "compared_with": label}
    differences = {
        f"{kpi}_difference": ours[kpi] - other[kpi]
        for kpi in (RISK_CAPACITY, capacity.SLO_KPI)
        if kpi in ours and kpi in other
    }
    return {
        "gpu_hours_ratio": ours["gpu_hours"] / other["gpu_hours"] if other["gpu_hours"] else None,
        "gpu_hours_saved": other["gpu_hours"] - ours["gpu_hours"],
        **differences,
        "compared_with": label,
    }


def _report(
    inputs: Any,
    params: Any,
    options: Any,
    result: Any,
    policies: Any,
    *,
    load_source: Any,
    notes: Any,
    models: Any,
    decisions: Any,
    nights: Any,
    tradeoff: Any,
) -> Any:
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
                **_kpi_row(table, policy.name),
            }
        )
    by_name = {row["policy"]: row for row in rows}
    ours, static = by_name["gpucast"], by_name["static-peak"]
    frontier = _frontier(table)
    risk = capacity.SLO_KPI if capacity.SLO_KPI in table.columns else RISK_CAPACITY
    words = RISK_WORDS[risk]
    equal = _equal_risk(frontier, ours[risk], risk)
    if equal is not None:
        target = equal["target_utilization"]
        row = {
            "policy": EQUAL_RISK,
            "recommended": False,
            "bound": False,
            "description": f"the reactive HPA alone at target {target:g}: the cheapest target "
            f"whose {words} is at most gpucast's",
            "target_utilization": target,
            **{
                key: equal[key] for key in (*capacity.REPLAY_KPIS, capacity.SLO_KPI) if key in equal
            },
        }
        rows.insert(next(i for i, r in enumerate(rows) if r["policy"] == "reactive-hpa") + 1, row)
    else:
        notes = [
            *notes,
            f"no reactive HPA target of {', '.join(f'{t:g}' for t in HPA_TARGETS)} reached "
            f"gpucast's {words} ({ours[risk]:.2%})",
        ]
    bound = by_name["instant-bound"]
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
        "slo": (
            None
            if inputs.slo is None
            else {
                "ttft_p95_s": inputs.slo.slo.ttft_p95_s,
                "tpot_p95_s": inputs.slo.slo.tpot_p95_s,
                "scored": capacity.SLO_KPI in result.table.columns,
            }
        ),
        "policies": rows,
        "versus_instant_bound": _versus(
            ours,
            bound,
            "instant-bound: each minute's load at 0.75 in whole replicas, no cold start",
        ),
        "versus_reactive_at_equal_risk": _versus(
            ours,
            equal,
            (
                f"reactive HPA alone at target {equal['target_utilization']:g}, the cheapest "
                f"whose {words} is at most gpucast's"
                if equal is not None
                else f"no reactive HPA target reached gpucast's {words}"
            ),
        )
        | {"target_utilization": equal["target_utilization"] if equal else None, "risk": risk},
        "versus_static_peak": _versus(
            ours, static, "static-peak: the previous 7 days' peak at utilization 0.75"
        ),
        "reactive_frontier": frontier,
        "gpucast_plans": _nightly_plans(nights, models),
        "tradeoff": tradeoff,
        "notes": [n for n in notes if n],
    }
