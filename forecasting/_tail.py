"""Older folds' out-of-sample errors for the 95 % band's calibration (:mod:`forecasting.intervals`).

The selection's ``windows`` daily folds hold about a dozen exceedances of a 95 % band; the
anchor ARIMA backtested on as many daily folds again, before them (each fold cleaned from its
own past), doubles that evidence. These errors did not drive the selection. To keep the cost
down the oldest of these folds fits and the later ones filter with its parameters (a model
with a ``refilter`` switch; parameters from an earlier cutoff, so still out of sample).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

import pandas as pd

from .backtest import backtest, fold_histories
from .hygiene import CleanHistory
from .models.base import Forecaster
from .selection import MIN_TRAIN_HOURS

logger = logging.getLogger(__name__)


def _refiltering(factory: Callable[[], Forecaster]) -> Forecaster:
    """A model from ``factory`` that, offered an earlier fold's fit, filters with its
    parameters instead of refitting (when the model has that switch)."""
    model = factory()
    if hasattr(model, "refilter"):
        model.refilter = True
    return model


def older_ends(n: int, horizon: int, windows: int, step: int, min_train: int) -> list[int]:
    """Training lengths of up to ``windows`` folds before the selection's ``windows`` ones
    (oldest first), each with at least ``min_train`` hours of history."""
    ends = [n - horizon - i * step for i in range(windows, 2 * windows)]
    return [end for end in ends[::-1] if end >= max(min_train, MIN_TRAIN_HOURS)]


def older_errors(
    factory: Callable[[], Forecaster],
    history: CleanHistory,
    raw: pd.Series,
    horizon: int,
    windows: int,
    step: int,
    *,
    events: pd.DataFrame | None = None,
    keep: Callable[[list[int]], list[int]] = lambda ends: ends,
) -> pd.DataFrame | None:
    """``factory``'s backtest on the older folds of :func:`older_ends` that ``keep`` keeps, or
    None when there are none or the backtest fails (the calibration then uses the selection's
    folds alone). ``history``: the cleaned history (its ``observed`` hours are the actuals);
    ``raw``: the uncleaned regular one each fold is cleaned from."""
    try:
        n = len(history.y)
        ends = keep(older_ends(n, horizon, windows, step, factory().min_history()))
        if not ends:
            return None
        histories = fold_histories(raw, ends, events=events)
        return backtest(
            partial(_refiltering, factory),
            history.y,
            horizon,
            ends=ends,
            events=events,
            observed=history.observed,
            histories=histories,
        )
    except Exception:  # noqa: BLE001 - less evidence, never a failed forecast
        logger.debug("older folds for the 95 %% calibration failed", exc_info=True)
        return None
