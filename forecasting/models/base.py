"""The forecaster contract shared by every model.

A forecaster is configured by keyword-only hyperparameters (no work in ``__init__``), learns
from ``fit(y)`` into trailing-underscore attributes and returns a frame from
``predict(horizon)``. Subclasses implement ``_fit(values)`` and ``_predict(horizon)`` on plain
numpy arrays; this base class does the validation, the gap filling and the frame building.
"""

from __future__ import annotations

from typing import ClassVar, Self

import numpy as np
import pandas as pd

from .._series import (
    as_hourly,
    check_horizon,
    forecast_columns,
    future_index,
    interpolated,
    regular,
)
from ..errors import InsufficientHistoryError, NotFittedError

Bands = dict[int, tuple[np.ndarray, np.ndarray]]


class Forecaster:
    """Base class: ``fit(y) -> self`` and ``predict(horizon) -> DataFrame``.

    ``y`` is a non-negative float Series on an hourly UTC ``DatetimeIndex``; missing hours may
    be absent or NaN (they are filled by linear interpolation before ``_fit``, so pass a
    cleaned history from :func:`forecasting.clean_history` for anything better).
    The frame has ``horizon`` rows: ``ds, yhat, lo_80, hi_80, lo_95, hi_95``.
    """

    name: ClassVar[str] = "forecaster"
    #: Rank used to break ties in model selection: the lower, the simpler.
    complexity: ClassVar[int] = 100
    #: Whether ``fit(..., events=...)`` learns event effects itself.
    handles_events: ClassVar[bool] = False
    #: Whether a fit costs an order of magnitude more than the others' (the backtest race
    #: gives it one fold to be within reach before a second, :mod:`forecasting.race`).
    expensive: ClassVar[bool] = False

    def min_history(self) -> int:
        """Hours of history this forecaster needs to fit."""
        return 1

    def fit(self, y: pd.Series, *, events: pd.DataFrame | None = None) -> Self:
        series = regular(as_hourly(y))
        if len(series) < self.min_history():
            raise InsufficientHistoryError(
                f"{self.name} needs at least {self.min_history()} hours of history, "
                f"got {len(series)}"
            )
        values = interpolated(series.to_numpy())  # a copy: models never see the caller's data
        self.last_ds_ = series.index[-1]
        self.n_obs_ = len(values)
        self.notes_: list[str] = []
        self._fit(values, series.index, events)
        return self

    def predict(self, horizon: int) -> pd.DataFrame:
        return pd.DataFrame(self.predict_columns(horizon))

    def predict_columns(self, horizon: int) -> dict[str, pd.DatetimeIndex | np.ndarray]:
        """The columns of ``predict(horizon)`` as arrays, without building the frame."""
        if not hasattr(self, "last_ds_"):
            raise NotFittedError(f"{self.name} must be fitted before predict(); call fit(y)")
        horizon = check_horizon(horizon)
        ds = future_index(self.last_ds_, horizon)
        yhat, bands = self._predict(horizon, ds)
        return forecast_columns(ds, yhat, bands)

    def warm_start(self, previous: Forecaster, *, refit: bool = False) -> None:
        """Reuse what a fitted forecaster of the same kind learnt (default: nothing).

        ``refit=True`` asks for a full fit that only starts from ``previous`` (the final fit
        on all history); otherwise a model may reuse ``previous`` outright (a backtest fold).
        """

    # -- to implement -------------------------------------------------------------------
    def _fit(
        self, values: np.ndarray, index: pd.DatetimeIndex, events: pd.DataFrame | None
    ) -> None:
        raise NotImplementedError

    def _predict(self, horizon: int, ds: pd.DatetimeIndex) -> tuple[np.ndarray, Bands]:
        raise NotImplementedError

    def __repr__(self) -> str:
        public = {k: v for k, v in vars(self).items() if not k.endswith("_") and k[0] != "_"}
        params = ", ".join(f"{k}={v!r}" for k, v in public.items())
        return f"{type(self).__name__}({params})"


def steps_ahead_in_seasons(horizon: int, season: int = 24) -> np.ndarray:
    """1 for the first ``season`` steps, 2 for the next … (how many seasons ahead a step is)."""
    return np.arange(horizon) // season + 1
