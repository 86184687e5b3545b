"""``auto_forecast``: clean, backtest every candidate, pick, refit, calibrate, forecast."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ._series import check_horizon
from .backtest import backtest
from .errors import ForecastingError, InsufficientHistoryError, InvalidParameterError
from .events import apply_multipliers, validate_events
from .hygiene import CleanHistory, clean_history
from .intervals import apply_factors, conformal_factors
from .metrics import METRICS, summarize
from .models.base import Forecaster
from .models.ensemble import Ensemble, combine
from .models.seasonal_naive import SeasonalNaive
from .refresh import QUANTILE_COLUMNS, refresh, refresh_state
from .selection import (
    DEFAULT_WINDOWS,
    MIN_TRAIN_HOURS,
    SCORE_COLUMNS,
    ForecastResult,
    _resolve,
    select,
)

__all__ = ["auto_forecast"]

logger = logging.getLogger(__name__)

Factory = Callable[[], Forecaster]


def _row(name: str, status: str, reason: str | None = None, **values: object) -> dict:
    row = {column: np.nan for column in SCORE_COLUMNS}
    row.update(model=name, status=status, reason=reason, selected=False, **values)
    return row


def _usable_windows(
    n: int, horizon: int, windows: int, step: int, min_train: int = MIN_TRAIN_HOURS
) -> int:
    spare = n - horizon - min_train
    return 0 if spare < 0 else min(windows, spare // step + 1)


def _score_candidates(
    factories: Mapping[str, Factory],
    history: CleanHistory,
    horizon: int,
    windows: int,
    step: int,
    events: pd.DataFrame | None,
) -> tuple[list[dict], dict[str, pd.DataFrame]]:
    """Backtest every candidate on the windows its history needs allow, score on common ones.

    A candidate whose minimum history leaves it fewer than half of the ``windows`` folds is
    skipped; the others are compared on the most recent folds that all of them have.
    """
    n, needed = len(history.y), -(-windows // 2)
    rows, frames, cpu = [], {}, {}
    for name, factory in factories.items():
        if factory is Ensemble or name == "ensemble":
            continue
        started = time.process_time()
        try:
            own = _usable_windows(n, horizon, windows, step, factory().min_history())
            if own < needed:
                raise InsufficientHistoryError(
                    f"{name} needs {factory().min_history()} h of training history; {n} h "
                    f"leave it {own} of {windows} backtest windows of {horizon} h"
                )
            frame = backtest(
                factory,
                history.y,
                horizon,
                windows=own,
                step=step,
                events=events,
                observed=history.observed,
            )
        except InsufficientHistoryError as exc:
            rows.append(_row(name, "skipped", str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - one bad candidate must not sink the batch
            logger.debug("candidate %s failed", name, exc_info=True)
            rows.append(_row(name, "failed", f"{type(exc).__name__}: {exc}"))
            continue
        frame["model"] = name
        frames[name], cpu[name] = frame, time.process_time() - started
    common = min((f["cutoff"].nunique() for f in frames.values()), default=0)
    for name, frame in frames.items():
        recent = frame[frame["cutoff"].isin(sorted(frame["cutoff"].unique())[-common:])]
        rows.append(
            _row(
                name,
                "ok",
                None,
                cpu_seconds=cpu[name],
                n_windows=common,
                **summarize(recent, history.observed),
            )
        )
    return rows, frames


def _add_ensemble(
    rows: list[dict], frames: dict[str, pd.DataFrame], metric: str, history: CleanHistory
) -> tuple[str, ...]:
    """Score the median of the two best candidates from their backtests (no refits)."""
    ok = sorted(
        (r for r in rows if r["status"] == "ok" and np.isfinite(r[metric])),
        key=lambda r: r[metric],
    )
    if len(ok) < 2:
        rows.append(_row("ensemble", "skipped", "needs two candidates that backtested"))
        return ()
    members = (ok[0]["model"], ok[1]["model"])
    try:
        common = sorted(set(frames[members[0]]["cutoff"]) & set(frames[members[1]]["cutoff"]))
        recent = common[-int(ok[0]["n_windows"]) :]
        parts = [
            frames[m][frames[m]["cutoff"].isin(common)].reset_index(drop=True) for m in members
        ]
        frame = combine(parts)
        frame["model"] = "ensemble"
        scores = summarize(frame[frame["cutoff"].isin(recent)], history.observed)
    except Exception as exc:  # noqa: BLE001 - the ensemble is optional
        rows.append(_row("ensemble", "failed", f"{type(exc).__name__}: {exc}"))
        return ()
    frames["ensemble"] = frame
    rows.append(
        _row(
            "ensemble",
            "ok",
            f"median of {members[0]} and {members[1]}",
            cpu_seconds=0.0,
            n_windows=len(recent),
            **scores,
        )
    )
    return members


def _refit(
    name: str,
    factories: Mapping[str, Factory],
    members: tuple[str, ...],
    history: CleanHistory,
    events: pd.DataFrame | None,
    horizon: int,
) -> tuple[pd.DataFrame, Forecaster]:
    if name == "ensemble":
        parts = [factories[m]().fit(history.y, events=events) for m in members]
        model: Forecaster = Ensemble(members=members)
        frame = combine([p.predict(horizon) for p in parts])
        model.notes_ = [note for p in parts for note in p.notes_]
        model.members_ = parts
        return frame, model
    model = factories[name]().fit(history.y, events=events)
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
    notes = list(history.notes)
    try:
        rows, frames, members, name, reason = _choose(
            factories, history, horizon, windows, step, events, metric, tie_tolerance, notes
        )
    except Exception as exc:  # noqa: BLE001 - a batch never dies because of one series
        logger.warning("model selection failed; using seasonal_naive", exc_info=True)
        rows = [_row(n, "failed", f"selection error: {exc}") for n in factories]
        frames, members = {}, ()
        name, reason = "seasonal_naive", f"model selection failed ({type(exc).__name__}: {exc})"
        notes.append(f"{reason}; falling back to seasonal_naive")

    forecast, model, name = _final_fit(
        name, factories, members, history, events, horizon, rows, metric, notes
    )
    notes.extend(model.notes_)
    winner_frame = frames.get(name, pd.DataFrame())
    if calibrate and not winner_frame.empty:
        factors = conformal_factors(winner_frame)
        if factors is not None:
            forecast = apply_factors(forecast, factors)
            notes.append(
                "intervals rescaled from backtest errors: "
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
    """The run's quantile columns, from the state at the fit's own origin (the bands stay the
    backtest-calibrated ones)."""
    out = forecast.copy()
    try:
        quantiles = refresh(state, history.y, horizon=len(forecast))
    except Exception:  # noqa: BLE001 - quantiles are optional on a nightly run
        logger.debug("quantiles failed", exc_info=True)
        return out
    for column in QUANTILE_COLUMNS:
        out[column] = quantiles[column].to_numpy()
    return out


def _choose(
    factories: Mapping[str, Factory],
    history: CleanHistory,
    horizon: int,
    windows: int,
    step: int,
    events: pd.DataFrame | None,
    metric: str,
    tie_tolerance: float,
    notes: list[str],
) -> tuple[list[dict], dict[str, pd.DataFrame], tuple[str, ...], str, str]:
    """Backtest and score the candidates; return rows, frames, ensemble members and choice."""
    n = len(history.y)
    usable = _usable_windows(n, horizon, windows, step)
    if 0 < usable < windows:
        notes.append(f"{n} h of history allow only {usable} of {windows} backtest windows")
    if np.ptp(history.y.to_numpy()) == 0:
        rows = [_row(name, "skipped", "history is constant") for name in factories]
        return rows, {}, (), "seasonal_naive", "constant history: repeating it"
    if usable == 0:
        need = horizon + MIN_TRAIN_HOURS
        why = f"{n} h of history; one backtest window of {horizon} h needs at least {need}"
        rows = [_row(name, "skipped", why) for name in factories]
        reason = f"too little history for any backtest ({why})"
        notes.append(f"{reason}; using seasonal_naive without backtest")
        return rows, {}, (), "seasonal_naive", reason
    rows, frames = _score_candidates(factories, history, horizon, usable, step, events)
    members: tuple[str, ...] = ()
    if "ensemble" in factories:
        members = _add_ensemble(rows, frames, metric, history)
    scores = pd.DataFrame(rows, columns=list(SCORE_COLUMNS))
    ranks = {k: getattr(f, "complexity", 100) for k, f in factories.items()}
    ranks["ensemble"] = Ensemble.complexity
    try:
        name, reason = select(scores, metric, complexity=ranks, tie_tolerance=tie_tolerance)
    except InsufficientHistoryError:
        name, reason = "seasonal_naive", "every candidate failed or was skipped"
        notes.append(f"{reason}; falling back to seasonal_naive without backtest")
    return rows, frames, members, name, reason


def _final_fit(
    name: str,
    factories: Mapping[str, Factory],
    members: tuple[str, ...],
    history: CleanHistory,
    events: pd.DataFrame | None,
    horizon: int,
    rows: list[dict],
    metric: str,
    notes: list[str],
) -> tuple[pd.DataFrame, Forecaster, str]:
    """Refit the winner on all history; on failure try the runners-up, then seasonal_naive."""
    ranked = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: r[metric])
    order = [name] + [r["model"] for r in ranked if r["model"] != name]
    for candidate in order:
        if candidate not in factories and candidate != "ensemble":
            break
        try:
            frame, model = _refit(candidate, factories, members, history, events, horizon)
            return frame, model, candidate
        except (ForecastingError, Exception) as exc:  # noqa: BLE001
            notes.append(f"refitting {candidate} on all history failed ({exc}); trying the next")
    frame, model = _fallback(history, horizon)
    return frame, model, "seasonal_naive"
