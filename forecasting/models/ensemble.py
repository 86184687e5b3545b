"""``ensemble`` — the median of several models' forecasts (by default of the best two).

Bands are the medians of the members' bands (with two members: their averages). In
:func:`forecasting.auto_forecast` the ensemble of the two best candidates is scored from their
existing backtests at no extra cost and kept only if it wins.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .._series import FRAME_COLUMNS
from .base import Bands, Forecaster

VALUE_COLUMNS = FRAME_COLUMNS[1:]


def combine(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Element-wise median of forecast frames with identical ``ds`` (other columns kept)."""
    first = frames[0]
    out = first.copy()
    for column in VALUE_COLUMNS:
        out[column] = np.median(np.column_stack([f[column].to_numpy() for f in frames]), axis=1)
    return out


class Ensemble(Forecaster):
    """Median of the forecasts of ``members`` (names in ``forecasting.MODELS``)."""

    name = "ensemble"
    complexity = 5

    def __init__(self, *, members: Sequence[str] = ("seasonal_ma", "arima")) -> None:
        self.members = tuple(members)

    def _member_models(self) -> list[Forecaster]:
        from . import MODELS

        return [MODELS[name]() for name in self.members]

    def min_history(self) -> int:
        return max(model.min_history() for model in self._member_models())

    def _fit(
        self, values: np.ndarray, index: pd.DatetimeIndex, events: pd.DataFrame | None
    ) -> None:
        history = pd.Series(values, index=index)
        self.models_ = [m.fit(history, events=events) for m in self._member_models()]
        for model in self.models_:
            self.notes_.extend(model.notes_)

    def _predict(self, horizon: int, ds: pd.DatetimeIndex) -> tuple[np.ndarray, Bands]:
        frame = combine([model.predict(horizon) for model in self.models_])
        bands = {
            level: (frame[f"lo_{level}"].to_numpy(), frame[f"hi_{level}"].to_numpy())
            for level in (80, 95)
        }
        return frame["yhat"].to_numpy(), bands
