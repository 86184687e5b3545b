"""What the replay decides at each time, from data strictly before it: gpucast's rolling plan
(a nightly fit, an hourly refresh and plan, band auto's nightly calibration) and the plans of
the reference policies (the seeds' seasonal mean, the previous week's static peak, the
hourly perfect foresight)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

import capacity
from app.common.cancel import checkpoint
from app.errors import InputError
from app.forecasts.work import METRIC_COLUMNS, WorkItem, run_item
from app.plans.band_fleet import AUTO, replayed_band, sized_band
from app.plans.calibration import (
    CALIBRATION_DAYS,
    FALLBACK_BAND,
    BandChoice,
    HeadroomReplay,
)
from app.plans.params import PlanParams
from app.plans.past_plans import (
    REFRESH_LAG,
    FittedState,
    Sizing,
    backstop,
    band_decisions,
    hourly_forecasts,
    sized_at_known_mix,
)
from app.plans.replay.inputs import (
    DAY,
    HOUR,
    MIN_HISTORY,
    TRADEOFF_TARGETS,
    ReplayOptions,
    SeriesInputs,
    decision_times,
    history_before,
    metric_history,
)
from app.plans.sizing import (
    ProfileFigures,
    peak_factors_from_history,
    plan_from_forecast,
    tokens_per_request,
)


def _nightly_fit(
    inputs: SeriesInputs, moment: pd.Timestamp, *, options: ReplayOptions, metric: str
) -> tuple[FittedState | None, str | None, str | None]:
    """The nightly run at ``moment`` on the history before it: (state, model, error)."""
    past = history_before(inputs.history, moment)
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
    past = history_before(inputs.history, moment)
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
class Rolling:
    decisions: tuple[capacity.PlanDecision, ...]
    nights: list[dict[str, Any]]
    models: list[str | None]
    notes: list[str]
    # risk target -> (decisions, each night's row as it would have published it) for the
    # trade-off table
    tradeoff: dict[float, tuple[tuple[capacity.PlanDecision, ...], list[dict[str, Any]]]]


def calibration_nights(
    warm: pd.Timestamp, first_hour: pd.Timestamp, nightly_hour: int
) -> list[pd.Timestamp]:
    """The nightly fits before the first replayed night that band auto's first calibration
    replays: the CALIBRATION_DAYS before it, once the history allows a fit."""
    earliest = max(warm - CALIBRATION_DAYS * DAY, first_hour + MIN_HISTORY)
    return [n for n in decision_times(earliest, warm, nightly_hour) if n >= earliest]


def load_needed_from(
    warm: pd.Timestamp, first_hour: pd.Timestamp, *, params: PlanParams, nightly_hour: int
) -> pd.Timestamp:
    """Where the load of a replay whose first night is ``warm`` must start: that night, and
    for band auto the first plan its calibration replays (up to CALIBRATION_DAYS before)."""
    before = calibration_nights(warm, first_hour, nightly_hour) if params.band == "auto" else []
    return before[0] + REFRESH_LAG if before else warm


def rolling_gpucast(
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
) -> Rolling:
    """gpucast's rolling plan: a nightly fit at each night (data before it), a refresh and a
    plan at every hour from the hours before it, served from the hour + REFRESH_LAG; with
    band "auto" the quantile re-chosen each night by replaying the previous days' hourly
    plans against the load before the night (CALIBRATION_DAYS at most)."""
    warm = nights[0]
    first_hour = inputs.history["hour"].min()
    fit_nights = calibration_nights(warm, first_hour, options.nightly_hour_utc) + nights
    fits, models, sizings = [], [], {}
    notes: list[str] = []
    for night in fit_nights:
        checkpoint()  # a fit per night: stop between them when the replay was abandoned
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
    y = metric_history(inputs.history, metric)
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
    auto = _AutoMargin(forecasts, moments, per_moment, actual, fleet=fleet, params=params, slo=slo)
    if params.band != "auto":
        # an explicit band: its own plans, and each night the measurement its expected fleet
        # is published from (the live plan's app.plans.band_fleet: one replay of the window)
        fixed = auto.at_headroom(1.0)
        decisions = tuple(d for d, m in zip(fixed, moments, strict=True) if m >= warm - HOUR)
        measured = {night: auto.calibrate(night) for night in nights}
        night_rows = [  # a night too early to measure publishes no expected fleet
            _night_row(night, moments, fixed, params.band, c if c.fleet_ratios else None)
            for night, c in measured.items()
        ]
        return Rolling(decisions, night_rows, models, notes, {})
    calibrations = {night: auto.calibrate(night) for night in nights}
    night_starts = np.array([n.value for n in nights])
    # the hour before the first night is served by the night before it (decided from the load
    # before that night, or uncalibrated): the first night's choice reads load up to warm
    previous = warm - DAY

    def decisions_for(choices: dict[pd.Timestamp, BandChoice], before: BandChoice) -> tuple:
        # from the hour before the first night on, so that a plan is in force at its start
        out = []
        for row, moment in enumerate(moments):
            if moment < warm - HOUR:
                continue
            owner = int(np.searchsorted(night_starts, moment.value, side="right")) - 1
            choice = before if owner < 0 else choices[nights[owner]]
            out.append(auto.decisions(choice)[row])
        return tuple(out)

    night_rows = []
    for night in nights:
        choice = calibrations[night]
        night_rows.append(_night_row(night, moments, auto.decisions(choice), choice.label, choice))
    tradeoff = {}
    for target in TRADEOFF_TARGETS if options.tradeoff else ():
        choices = {n: auto.calibrate(n, target) for n in nights}
        tradeoff[target] = (
            decisions_for(choices, auto.calibrate(previous, target)),
            [_night_row(n, moments, auto.decisions(c), c.label, c) for n, c in choices.items()],
        )
    decisions = decisions_for(calibrations, auto.calibrate(previous))
    return Rolling(decisions, night_rows, models, notes, tradeoff)


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
        "sized_load_gpus": (
            None if decision.load_gpus is None else [float(g) for g in decision.load_gpus]
        ),
    }


class _AutoMargin:
    """Band auto inside the replay: the hourly plans at any headroom over the point forecast
    (built once per headroom), and each night's calibration on the plans of the previous days
    (CALIBRATION_DAYS at most) replayed against the load before the night, with the fleet's
    cold start and the reactive trigger the deployment runs. For an explicit band the plans
    are the band's own (headroom 1) and a night's calibration is their one replay over the
    same window (:func:`app.plans.band_fleet.replayed_band`, as the live plan measures it)."""

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
                self._forecasts,
                self._moments,
                sized_band(self._params),
                self._sizings,
                headroom=headroom,
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
        if self._params.band != AUTO:
            return replayed_band(replay, replace(self._params, max_over_capacity=target))
        return replay.choose(target)


def seasonal_mean_decision(
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


def constant_decision(
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


def hourly_perfect_foresight(
    load: pd.Series, warm: pd.Timestamp, end: pd.Timestamp, params: PlanParams, profile: Any
) -> capacity.PlanDecision:
    window = load[(load.index >= warm) & (load.index < end)]
    # an hour with no observed minute (telemetry lost) holds the busiest of the hour before
    busiest = window.groupby(window.index.floor("h")).max().ffill().bfill()
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
