"""``seasonal_naive`` — tomorrow repeats today: the reference every model must beat."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..intervals import residual_bands
from .base import Bands, Forecaster, steps_ahead_in_seasons


class SeasonalNaive(Forecaster):
    """Repeat the last ``season`` hours.

    With less than one season of history it repeats the last value (plain naive) and says so
    in ``notes_``, so it can always serve as the last-resort fallback. Bands come from the
    empirical quantiles of the in-sample seasonal differences, widened by ``sqrt`` of the
    number of seasons ahead.
    """

    name = "seasonal_naive"
    complexity = 0

    def __init__(self, *, season: int = 24) -> None:
        self.season = season

    def _fit(self, values: np.ndarray, index: pd.DatetimeIndex, events: object) -> None:
        if len(values) >= self.season:
            self.pattern_ = values[-self.season :].copy()
            self.residuals_ = values[self.season :] - values[: -self.season]
        else:
            self.notes_.append(
                f"seasonal_naive: only {len(values)} h of history (< {self.season}); "
                "repeating the last value"
            )
            self.pattern_ = np.full(self.season, values[-1])
            self.residuals_ = np.diff(values)

    def _predict(self, horizon: int, ds: pd.DatetimeIndex) -> tuple[np.ndarray, Bands]:
        yhat = np.resize(self.pattern_, horizon)
        scale = np.sqrt(steps_ahead_in_seasons(horizon, self.season))
        return yhat, residual_bands(yhat, self.residuals_, scale)
