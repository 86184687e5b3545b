"""The guard where a simple model wins: a baseline that beats the anchored combination beyond
the folds' noise is served, and says so; where the combination wins it is kept."""

from __future__ import annotations

import numpy as np
import pytest

from forecasting import auto_forecast
from forecasting.models import Ensemble, SeasonalMA, SeasonalNaive

from .conftest import daily_pattern, fake, hourly
from .test_refresh import ar_daily


def drifting_profile(days: int, *, seed: int = 1) -> np.ndarray:
    """Each day's hourly profile is yesterday's plus a random step: tomorrow repeats today."""
    rng = np.random.default_rng(seed)
    profile = [rng.uniform(50, 300, 24)]
    for _ in range(days - 1):
        profile.append(np.clip(profile[-1] + rng.normal(0, 25, 24), 10, None))
    return np.concatenate(profile)


@pytest.mark.parametrize(
    ("y", "served", "label", "baseline"),
    [
        (daily_pattern(21, noise=2.0), "seasonal_ma", "7-day same-hour mean", SeasonalMA),
        (hourly(drifting_profile(21)), "seasonal_naive", "seasonal naive", SeasonalNaive),
    ],
    ids=["same-hour-mean-wins", "seasonal-naive-wins"],
)
def test_a_baseline_that_wins_by_far_is_served_and_says_so(y, served, label, baseline) -> None:
    # an "arima" that forecasts a flat level: the anchored combination loses on every fold
    level = float(y.mean())
    models = {
        "arima": fake(level=level, width=5.0),
        "profile_level": fake(level=1.2 * level, width=5.0),
        "ensemble": Ensemble,
    }
    result = auto_forecast(y, models=models)

    assert result.model == served
    assert label in result.reason and "instead of the anchored combination" in result.reason
    assert any(label in note for note in result.notes)
    expected = (SeasonalMA(days=7, trend=False) if served == "seasonal_ma" else baseline()).fit(y)
    np.testing.assert_allclose(result.forecast["yhat"], expected.predict(24)["yhat"], rtol=1e-9)
    assert result.state is not None and result.state["kind"] == served
    assert result.state.get("trend") in (None, False)  # the trend-free 7-day mean is stored


def test_the_combination_is_kept_where_it_wins() -> None:
    y = ar_daily(24 * 21)  # AR(1) errors: the last hours tell where tomorrow starts
    result = auto_forecast(y, models=["seasonal_naive", "seasonal_ma", "arima", "ensemble"])
    assert result.model == "ensemble"
    assert "instead of the anchored combination" not in result.reason
    assert not any("instead of the anchored combination" in note for note in result.notes)
