"""Rolling-origin backtest: refit at each cutoff, forecast the next ``horizon`` hours.

Each fold trains on what was known at its cutoff: :func:`fold_histories` cleans every fold's
training slice on its own (gaps, outages, level shifts, spikes judged from the hours before
the cutoff only), so no fold sees the future through the cleaning of the whole history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ._series import as_hourly, check_horizon, regular
from .errors import (
    ForecastingError,
    InsufficientHistoryError,
    InvalidParameterError,
    ModelFitError,
)
from .hygiene import clean_history
from .models.base import Forecaster

__all__ = ["BACKTEST_COLUMNS", "backtest", "cutoff_positions", "fold_histories"]

BACKTEST_COLUMNS = (
    "cutoff",
    "ds",
    "step",
    "y",
    "yhat",
    "lo_80",
    "hi_80",
    "lo_95",
    "hi_95",
    "model",
)


def cutoff_positions(n: int, horizon: int, windows: int, step: int) -> list[int]:
    """Training lengths of the ``windows`` folds, oldest first; the last fold ends at ``n``."""
    if isinstance(windows, bool) or not isinstance(windows, int | np.integer) or windows < 1:
        raise InvalidParameterError(f"windows must be a positive integer, got {windows!r}")
    if isinstance(step, bool) or not isinstance(step, int | np.integer) or step < 1:
        raise InvalidParameterError(f"step must be a positive number of hours, got {step!r}")
    ends = [n - horizon - i * step for i in range(windows)]
    if ends[-1] < 1:
        raise InsufficientHistoryError(
            f"{windows} backtest window(s) of {horizon} h every {step} h need more than "
            f"{horizon + (windows - 1) * step} hours of history, got {n}"
        )
    return ends[::-1]


def fold_histories(
    y: pd.Series,
    ends: list[int],
    *,
    events: pd.DataFrame | None = None,
) -> dict[int, pd.Series]:
    """Training history of every fold: ``end`` → ``clean_history(y[:end]).y``.

    ``y`` is the raw (uncleaned) history, ``ends`` the training lengths from
    :func:`cutoff_positions`. Each fold is cleaned from its own slice only.
    """
    series = regular(as_hourly(y))
    return {end: clean_history(series.iloc[:end], events=events).y for end in ends}


def backtest(
    factory: Callable[[], Forecaster],
    y: pd.Series,
    horizon: int = 24,
    *,
    windows: int = 3,
    step: int = 24,
    events: pd.DataFrame | None = None,
    observed: pd.Series | None = None,
    histories: Mapping[int, pd.Series] | None = None,
    ends: list[int] | None = None,
    previous: Forecaster | None = None,
    fitted: list[Forecaster] | None = None,
) -> pd.DataFrame:
    """Rolling-origin evaluation of the forecasters built by ``factory``.

    For each of ``windows`` cutoffs (``step`` hours apart, the last one ``horizon`` hours
    before the end of ``y``) a fresh forecaster is fitted on the history up to the cutoff and
    asked for ``horizon`` hours; each fit is offered the previous one for a warm start.
    ``observed`` (default ``y``) gives the actuals to compare with; NaN actuals stay NaN.
    ``histories`` (from :func:`fold_histories`) gives each fold's own cleaned training data
    instead of a slice of ``y``. ``ends`` gives the folds' training lengths explicitly (oldest
    first) instead of ``windows`` and ``step``. ``previous``: a forecaster fitted at an earlier
    cutoff, offered to the first fold for a warm start. ``fitted``: a list that receives every
    fold's fitted forecaster.

    Returns a long frame with ``BACKTEST_COLUMNS``: ``cutoff`` is the last training hour,
    ``step`` runs 1..horizon. Raises :class:`InsufficientHistoryError` when the oldest fold is
    shorter than the model needs, :class:`ModelFitError` when a fit or prediction fails.
    """
    horizon = check_horizon(horizon)
    series = regular(as_hourly(y))
    actual = series if observed is None else regular(as_hourly(observed)).reindex(series.index)
    if ends is None:
        ends = cutoff_positions(len(series), horizon, windows, step)
    folds: list[dict[str, Any]] = []
    for end in ends:
        model = factory()
        if end < model.min_history():
            raise InsufficientHistoryError(
                f"{model.name} needs {model.min_history()} hours before the first backtest "
                f"cutoff; {windows} window(s) of {horizon} h leave {end} of {len(series)}"
            )
        if previous is not None:
            model.warm_start(previous)
        try:
            train = series.iloc[:end] if histories is None else histories[end]
            model.fit(train, events=events)
            columns = _predicted(model, horizon)
        except ForecastingError:
            raise
        except Exception as exc:  # noqa: BLE001 - any model failure is reported, not raised raw
            raise ModelFitError(
                f"{model.name} failed at cutoff {series.index[end - 1]}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        folds.append(
            {
                "cutoff": series.index[np.full(horizon, end - 1)],
                "ds": columns["ds"],
                "step": np.arange(1, horizon + 1),
                "y": actual.iloc[end : end + horizon].to_numpy(),
                **{name: values for name, values in columns.items() if name != "ds"},
                "model": np.full(horizon, model.name, dtype=object),
            }
        )
        previous = model
        if fitted is not None:
            fitted.append(model)
    return stacked_folds(folds)


def _predicted(model: Forecaster, horizon: int) -> Mapping[str, Any]:
    """The model's forecast columns: arrays, or a frame's columns as indexes when the model
    has its own ``predict``."""
    if type(model).predict is Forecaster.predict:
        return model.predict_columns(horizon)
    frame = model.predict(horizon)
    return {str(column): pd.Index(frame[column]) for column in frame.columns}


def stacked_folds(folds: list[dict[str, Any]]) -> pd.DataFrame:
    """One long frame of the folds' columns (each fold's rows in turn, a fresh RangeIndex):
    ``pd.concat`` of one frame per fold, without building those frames."""
    if not folds:
        raise ValueError("No objects to concatenate")
    names = list(folds[0])
    if any(list(fold) != names for fold in folds):  # folds disagree: align as concat does
        return pd.concat([pd.DataFrame(fold) for fold in folds], ignore_index=True)
    return pd.DataFrame({name: _stacked([fold[name] for fold in folds]) for name in names})


def _stacked(parts: list[Any]) -> Any:
    first = parts[0]
    if isinstance(first, pd.Index):
        return first.append(parts[1:]) if len(parts) > 1 else first
    return np.concatenate(parts)
