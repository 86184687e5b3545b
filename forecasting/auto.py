"""``auto_forecast``: clean, race the candidates fold by fold, choose nested, refit, calibrate."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ._calibrated import KNOTS, through_knots, width_ratios
from ._series import as_hourly, check_horizon, regular
from ._tail import older_errors
from .backtest import cutoff_positions, fold_histories
from .errors import ForecastingError, InvalidParameterError
from .events import apply_multipliers, validate_events
from .guard import simple_guard
from .hygiene import LEVEL_SHIFT_MIN_HOURS, CleanHistory, clean_history
from .intervals import apply_factors, conformal_factors
from .metrics import METRICS, summarize
from .models.base import Forecaster
from .models.ensemble import Ensemble, combine
from .models.seasonal_naive import SeasonalNaive
from .nested import ANCHOR, choose
from .race import Entry, race
from .refresh import refresh, refresh_state
from .selection import (
    DEFAULT_WINDOWS,
    MIN_TRAIN_HOURS,
    SCORE_COLUMNS,
    ForecastResult,
    _resolve,
)

__all__ = ["auto_forecast"]

logger = logging.getLogger(__name__)

Factory = Callable[[], Forecaster]
#: An ensemble's member names and weights (None: their median).
Members = tuple[tuple[str, ...], tuple[float, ...] | None]
NO_MEMBERS: Members = ((), None)


def _row(name: str, status: str, reason: str | None = None, **values: object) -> dict:
    row: dict[str, object] = {column: np.nan for column in SCORE_COLUMNS}
    row.update(model=name, status=status, reason=reason, selected=False, **values)
    return row


def _usable_windows(
    n: int, horizon: int, windows: int, step: int, min_train: int = MIN_TRAIN_HOURS
) -> int:
    spare = n - horizon - min_train
    return 0 if spare < 0 else min(windows, spare // step + 1)


def _without_break(
    ends: list[int], history: CleanHistory, horizon: int, notes: list[str]
) -> list[int]:
    """The folds that could not know a detected level shift but are scored on hours after its
    start are left out: their training data (cleaned as of their cutoff) had not yet seen the
    new level held for ``LEVEL_SHIFT_MIN_HOURS``, so every model misses it alike — the errors
    say nothing about the models and would blow the bands up for the new level, to which the
    final fit's history is rescaled."""
    if history.level_shift is None:
        return ends
    start = int(history.y.index.get_loc(history.level_shift))
    kept = [end for end in ends if end + horizon <= start or end >= start + LEVEL_SHIFT_MIN_HOURS]
    if len(kept) < len(ends) and kept:
        notes.append(
            f"{len(ends) - len(kept)} backtest fold(s) scored after the level shift of "
            f"{history.level_shift:%Y-%m-%d %H:%M} but trained before it was established are "
            "left out of selection and calibration"
        )
        return kept
    return ends


def _rows(entries: list[Entry], observed: pd.Series) -> tuple[list[dict], list]:
    """Score rows of the raced candidates, compared on the folds all ``ok`` ones share."""
    ok = [e for e in entries if e.status == "ok" and not e.frame.empty]
    common = sorted(set.intersection(*(set(e.frame["cutoff"]) for e in ok))) if ok else []
    rows = []
    for entry in entries:
        if entry in ok:
            frame = entry.frame[entry.frame["cutoff"].isin(common)]
            scores = summarize(frame, observed)
            rows.append(
                _row(
                    entry.name,
                    "ok",
                    None,
                    cpu_seconds=entry.cpu_seconds,
                    n_windows=len(common),
                    **scores,
                )
            )
            continue
        partial = {}
        if not entry.frame.empty:  # raced out: its first-round scores
            partial = summarize(entry.frame, observed)
            partial["n_windows"] = int(entry.frame["cutoff"].nunique())
        rows.append(
            _row(entry.name, entry.status, entry.reason, cpu_seconds=entry.cpu_seconds, **partial)
        )
    return rows, common


def _fresh(
    name: str, factories: Mapping[str, Factory], warm: Mapping[str, Forecaster]
) -> Forecaster:
    """A new forecaster for the final fit, warm-started from its most recent backtest fold:
    a full fit whose optimiser starts from that fold's parameters (ARIMA refits here although
    its later backtest folds only filtered: parameters from days before the origin forecast
    worse, see :mod:`forecasting.models.arima`)."""
    model = factories[name]()
    previous = warm.get(name)
    if previous is not None:
        model.warm_start(previous, refit=True)
    return model


def _refit(
    name: str,
    factories: Mapping[str, Factory],
    members: Members,
    history: CleanHistory,
    events: pd.DataFrame | None,
    horizon: int,
    warm: Mapping[str, Forecaster],
) -> tuple[pd.DataFrame, Forecaster]:
    if name == "ensemble":
        names, weights = members
        if not names:
            raise ForecastingError("no ensemble was chosen")
        parts = [_fresh(m, factories, warm).fit(history.y, events=events) for m in names]
        ensemble = Ensemble(members=names, weights=weights)
        frame = combine([p.predict(horizon) for p in parts], weights)
        ensemble.notes_ = [note for p in parts for note in p.notes_]
        ensemble.members_ = parts
        return frame, ensemble
    model = _fresh(name, factories, warm).fit(history.y, events=events)
    return model.predict(horizon), model


def _fallback(history: CleanHistory, horizon: int) -> tuple[pd.DataFrame, Forecaster]:
    model = SeasonalNaive().fit(history.y)
    return model.predict(horizon), model


def auto_forecast(
    y: pd.Series,
    horizon: int = 24,
    *,
    models: Sequence[str] | Mapping[str, Factory] | None = None,
    windows: int | None = None,
    metric: str = "mase",
    events: pd.DataFrame | None = None,
    step: int = 24,
    tie_tolerance: float = 0.0,
    calibrate: bool = True,
) -> ForecastResult:
    """Forecast ``horizon`` hours of ``y`` with the candidate that backtests best.

    ``y``: non-negative float Series on a UTC hourly ``DatetimeIndex``; missing hours may be
    absent. ``models``: names from ``MODELS`` (default: all, ensemble included) or a mapping
    name → factory. ``windows``: backtest folds (default 5), ``step`` hours apart. ``metric``:
    a key of ``METRICS``. ``events``: optional frame ``name, start, end[, multiplier]``.
    Candidates within ``tie_tolerance`` (relative) of the best are tied; ties go to the
    simpler model. Raises :class:`ForecastingError` subclasses only for unusable input (not a
    series, negative values, no finite value, bad arguments) — never because a model failed.
    """
    horizon = check_horizon(horizon)
    if metric not in METRICS:
        raise InvalidParameterError(f"unknown metric {metric!r}; choose from {sorted(METRICS)}")
    windows = DEFAULT_WINDOWS if windows is None else windows
    if isinstance(windows, bool) or not isinstance(windows, int | np.integer) or windows < 1:
        raise InvalidParameterError(f"windows must be a positive integer, got {windows!r}")
    factories = _resolve(models)
    events = validate_events(events)
    history = clean_history(y, events=events)
    raw = regular(as_hourly(y))
    notes = list(history.notes)
    try:
        rows, frames, members, name, reason, calibration, warm = _choose(
            factories, history, raw, horizon, windows, step, events, metric, tie_tolerance, notes
        )
    except Exception as exc:  # noqa: BLE001 - a batch never dies because of one series
        logger.warning("model selection failed; using seasonal_naive", exc_info=True)
        rows = [_row(n, "failed", f"selection error: {exc}") for n in factories]
        frames, members, calibration, warm = {}, NO_MEMBERS, pd.DataFrame(), {}
        name, reason = "seasonal_naive", f"model selection failed ({type(exc).__name__}: {exc})"
        notes.append(f"{reason}; falling back to seasonal_naive")

    forecast, model, name = _final_fit(
        name, factories, members, history, events, horizon, rows, metric, notes, warm
    )
    notes.extend(model.notes_)
    winner_frame = frames.get(name, pd.DataFrame())
    if calibrate and not calibration.empty:
        tail = None
        if ANCHOR in factories and (name == ANCHOR or ANCHOR in members[0]):
            tail = older_errors(
                factories[ANCHOR],
                history,
                raw,
                horizon,
                windows,
                step,
                events=events,
                keep=lambda ends: _without_break(ends, history, horizon, []),
            )
        factors = conformal_factors(calibration, windows=windows, tail=tail)
        if factors is not None:
            forecast = apply_factors(forecast, factors)
            notes.append(
                "intervals rescaled from out-of-sample (nested) backtest errors: "
                + ", ".join(f"{k} % ×{v:.2f}" for k, v in factors.items())
            )
    state = _state(model, history, forecast, notes)
    if state is not None:
        forecast = _with_quantiles(forecast, state, history)
    skip = {c.removeprefix("event_") for c in getattr(model, "event_names_", [])}
    forecast, event_notes = apply_multipliers(forecast, events, skip=skip)
    notes.extend(event_notes)
    scores = pd.DataFrame(rows, columns=list(SCORE_COLUMNS))
    scores["selected"] = scores["model"] == name
    logger.debug("auto_forecast chose %s: %s", name, reason)
    return ForecastResult(
        model=name,
        forecast=forecast,
        scores=scores,
        notes=notes,
        anomalies=history.anomalies,
        backtest=winner_frame,
        reason=reason,
        state=state,
    )


def _state(
    model: Forecaster, history: CleanHistory, forecast: pd.DataFrame, notes: list[str]
) -> dict | None:
    """The refresh state of the final model; None (with a note) when it cannot be built."""
    try:
        return refresh_state(model, history.y)
    except Exception as exc:  # noqa: BLE001 - a run without state is still a forecast
        logger.debug("refresh state failed", exc_info=True)
        notes.append(f"hourly refresh unavailable for {model.name} ({type(exc).__name__}: {exc})")
        return None


def _with_quantiles(forecast: pd.DataFrame, state: dict, history: CleanHistory) -> pd.DataFrame:
    """The run's quantile columns: the error distribution of the state at the fit's own
    origin, mapped through the backtest-calibrated bands (``hi_80 = q90``, ``lo_80 = q10``,
    ``hi_95 = q97.5``, ``lo_95 = q2.5``, :mod:`forecasting._calibrated`). The state keeps the
    bands' width ratios so that refresh runs calibrate alike."""
    out = forecast.copy()
    try:
        raw = refresh(state, history.y, horizon=len(forecast))
    except Exception:  # noqa: BLE001 - quantiles are optional on a nightly run
        logger.debug("quantiles failed", exc_info=True)
        return out
    raw_columns = {c: raw[c].to_numpy(dtype=float) for c in raw.columns if c != "ds"}
    bands = {c: out[c].to_numpy(dtype=float) for c in ("yhat", *KNOTS)}
    state["band_ratios"] = width_ratios(raw_columns, bands)
    for column, values in through_knots(raw_columns, bands).items():
        out[column] = values
    return out


def _choose(
    factories: dict[str, Factory],
    history: CleanHistory,
    raw: pd.Series,
    horizon: int,
    windows: int,
    step: int,
    events: pd.DataFrame | None,
    metric: str,
    tie_tolerance: float,
    notes: list[str],
) -> tuple[list[dict], dict[str, pd.DataFrame], Members, str, str, pd.DataFrame, dict]:
    """Race and score the candidates, choose by the nested rules (:mod:`forecasting.nested`).

    Returns rows, backtest frames, ensemble members, the choice, its reason, the frame of
    out-of-sample errors the intervals are calibrated on, and each candidate's most recent
    fitted fold (to warm-start the final fit). When :func:`forecasting.guard.simple_guard`
    serves a baseline instead of the anchored combination, ``factories`` gets its factory.
    """
    n = len(history.y)
    usable = _usable_windows(n, horizon, windows, step)
    empty = pd.DataFrame()
    if 0 < usable < windows:
        notes.append(f"{n} h of history allow only {usable} of {windows} backtest windows")
    if np.ptp(history.y.to_numpy()) == 0:
        rows = [_row(name, "skipped", "history is constant") for name in factories]
        return rows, {}, NO_MEMBERS, "seasonal_naive", "constant history: repeating it", empty, {}
    if usable == 0:
        need = horizon + MIN_TRAIN_HOURS
        why = f"{n} h of history; one backtest window of {horizon} h needs at least {need}"
        rows = [_row(name, "skipped", why) for name in factories]
        reason = f"too little history for any backtest ({why})"
        notes.append(f"{reason}; using seasonal_naive without backtest")
        return rows, {}, NO_MEMBERS, "seasonal_naive", reason, empty, {}
    ends = _without_break(cutoff_positions(n, horizon, usable, step), history, horizon, notes)
    histories = fold_histories(raw, ends, events=events)
    candidates = {k: f for k, f in factories.items() if f is not Ensemble and k != "ensemble"}
    entries = race(
        candidates,
        history.y,
        history.observed,
        histories,
        ends,
        horizon=horizon,
        events=events,
        metric=metric,
        keep=(ANCHOR,) if "ensemble" in factories else (),
    )
    rows, common = _rows(entries, history.observed)
    frames = {e.name: e.frame for e in entries if e.status == "ok"}
    ranks = {k: getattr(f, "complexity", 100) for k, f in factories.items()}
    ranks["ensemble"] = Ensemble.complexity
    choice = choose(
        entries,
        history.observed,
        metric,
        ranks,
        ensemble="ensemble" in factories,
        tie_tolerance=tie_tolerance,
    )
    if "ensemble" in factories:
        frame = None if choice is None else choice.ensemble_frame
        if choice is None or frame is None or frame.empty:
            rows.append(_row("ensemble", "skipped", "needs two candidates on two folds or more"))
        else:
            what = (
                f"median of {' and '.join(choice.ensemble_members)}"
                if choice.weights is None
                else " + ".join(
                    f"{w:g} × {m}"
                    for w, m in zip(choice.weights, choice.ensemble_members, strict=True)
                )
            )
            rows.append(
                _row(
                    "ensemble",
                    "ok",
                    f"{what}; scored nested (each fold with the partner chosen on the other folds)",
                    cpu_seconds=0.0,
                    n_windows=int(frame["cutoff"].nunique()),
                    **summarize(frame, history.observed),
                )
            )
            frames["ensemble"] = frame
    if choice is None:
        reason = "every candidate failed or was skipped"
        notes.append(f"{reason}; falling back to seasonal_naive without backtest")
        return rows, frames, NO_MEMBERS, "seasonal_naive", reason, empty, {}
    warm = {e.name: e.last for e in entries if e.status == "ok" and e.last is not None}
    if choice.weights is not None:  # the anchored combination: does a simple model win?
        guarded = simple_guard(
            choice.calibration,
            history.y,
            history.observed,
            histories,
            ends,
            horizon=horizon,
            events=events,
            metric=metric,
        )
        if guarded is not None:
            factories[guarded.name] = guarded.factory  # the final fit serves the baseline
            frames[guarded.name] = guarded.frame
            warm.pop(guarded.name, None)
            notes.append(guarded.reason)
            return rows, frames, NO_MEMBERS, guarded.name, guarded.reason, guarded.frame, warm
    if choice.name == "ensemble":
        parts = [frames[m][frames[m]["cutoff"].isin(common)] for m in choice.members]
        frames["ensemble"] = combine(
            [p.reset_index(drop=True) for p in parts], choice.weights
        ).assign(model="ensemble")
    members = (choice.members, choice.weights)
    return rows, frames, members, choice.name, choice.reason, choice.calibration, warm


def _final_fit(
    name: str,
    factories: Mapping[str, Factory],
    members: Members,
    history: CleanHistory,
    events: pd.DataFrame | None,
    horizon: int,
    rows: list[dict],
    metric: str,
    notes: list[str],
    warm: Mapping[str, Forecaster],
) -> tuple[pd.DataFrame, Forecaster, str]:
    """Refit the winner on all history; on failure try the runners-up, then seasonal_naive."""
    ranked = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: r[metric])
    order = [name] + [r["model"] for r in ranked if r["model"] != name]
    for candidate in order:
        if candidate not in factories and candidate != "ensemble":
            break
        try:
            frame, model = _refit(candidate, factories, members, history, events, horizon, warm)
            return frame, model, candidate
        except (ForecastingError, Exception) as exc:  # noqa: BLE001
            notes.append(f"refitting {candidate} on all history failed ({exc}); trying the next")
    frame, model = _fallback(history, horizon)
    return frame, model, "seasonal_naive"
