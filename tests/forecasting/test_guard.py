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


def test_one_bad_fold_of_the_combination_does_not_hand_over_to_a_baseline() -> None:
    from forecasting.backtest import backtest, cutoff_positions, fold_histories
    from forecasting.guard import simple_guard

    y = daily_pattern(21, noise=8.0, seed=4)
    ends = cutoff_positions(len(y), 24, 5, 24)
    histories = fold_histories(y, ends)
    actual = backtest(SeasonalNaive, y, 24, histories=histories, ends=ends)
    y_true = actual["y"].to_numpy()
    cutoffs = sorted(actual["cutoff"].unique())

    def combination(off: float) -> object:
        # a combination 0.5 per hour from the truth, ``off`` per hour on the last fold only
        frame = actual.copy()
        last = (frame["cutoff"] == cutoffs[-1]).to_numpy()
        frame["yhat"] = y_true + np.where(last, off, 0.5)
        return frame

    from forecasting.race import fold_scores

    kwargs = {"horizon": 24, "events": None, "metric": "mase"}
    noisy = fold_scores(combination(400.0), y, "mase")
    naive = fold_scores(actual, y, "mase")
    assert noisy.mean() > naive.mean() and (noisy.iloc[:-1] < naive.iloc[:-1]).all()
    # four folds far better than the baselines, one far worse: the mean favours a baseline,
    # the paired test does not
    assert simple_guard(combination(400.0), y, y, histories, ends, **kwargs) is None
    # every fold as bad as the last one: the baselines win beyond noise
    worse = actual.copy()
    worse["yhat"] = y_true + 400.0
    guarded = simple_guard(worse, y, y, histories, ends, **kwargs)
    assert guarded is not None and "paired t" in guarded.reason
