"""Cleaning that holds on real traffic: no look-ahead, level shifts kept, sparse and weekly
patterns left alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting import auto_forecast, clean_history
from forecasting.backtest import backtest, cutoff_positions, fold_histories
from forecasting.errors import InvalidSeriesError
from forecasting.models import SeasonalMA

START = pd.Timestamp("2026-01-05", tz="UTC")  # a Monday


def hourly(values) -> pd.Series:
    values = np.asarray(values, dtype=float)
    return pd.Series(values, index=pd.date_range(START, periods=len(values), freq="h"))


def daily(days: int, noise: float = 0.02, seed: int = 7) -> np.ndarray:
    t = np.arange(days * 24)
    rng = np.random.default_rng(seed)
    return (1000 + 400 * np.sin(2 * np.pi * t / 24)) * rng.lognormal(0, noise, len(t))


def _tampered(y: pd.Series, after: int, level: float = 3.0) -> pd.Series:
    """``y`` with everything from position ``after`` on changed the ways that used to leak:
    a gap right after the cutoff (interpolated across it), a new level, spikes and dips on
    the following day (which judged the hours before them)."""
    values = y.to_numpy().copy()
    values[after:] *= level
    values[after + 10 : after + 13] *= 20.0
    values[after + 20] = 0.0
    tampered = pd.Series(values, index=y.index)
    return tampered.drop(tampered.index[after : after + 2])


@pytest.mark.parametrize("fold", [0, 2, 3])
def test_changing_the_history_after_a_cutoff_leaves_that_folds_training_data(fold) -> None:
    y = hourly(daily(28))
    y.iloc[300] = 9000.0  # a spike before every cutoff, repaired in every fold
    ends = cutoff_positions(len(y), 24, 5, 24)
    cutoff = ends[fold]
    before = fold_histories(y, ends)[cutoff]
    after = fold_histories(_tampered(y, cutoff), ends)[cutoff]
    pd.testing.assert_series_equal(before, after)
    assert before.iloc[300] < 2000  # the spike was still cleaned


def test_the_backtest_forecast_of_a_fold_ignores_what_came_after_its_cutoff() -> None:
    y = hourly(daily(28))
    ends = cutoff_positions(len(y), 24, 5, 24)
    tampered = _tampered(y, ends[2])
    frames = []
    for series in (y, tampered):
        regular = series.reindex(y.index)
        histories = fold_histories(regular, ends)
        frames.append(
            backtest(SeasonalMA, clean_history(regular).y, 24, histories=histories, ends=ends)
        )
    first, second = (f[f["cutoff"] <= y.index[ends[2] - 1]] for f in frames)
    np.testing.assert_allclose(first["yhat"], second["yhat"])
    assert not np.allclose(frames[0]["yhat"], frames[1]["yhat"])  # later folds did change


def test_auto_forecast_backtests_on_folds_cleaned_at_their_cutoff() -> None:
    y = hourly(daily(28))
    ends = cutoff_positions(len(y), 24, 5, 24)
    runs = [
        auto_forecast(series, 24, models=["seasonal_ma"], calibrate=False).backtest
        for series in (y, _tampered(y, ends[1], level=1.0))
    ]
    early = [r[r["cutoff"] <= y.index[ends[1] - 1]] for r in runs]
    np.testing.assert_allclose(early[0]["yhat"], early[1]["yhat"])


@pytest.mark.parametrize("factor", [2.0, 0.5])
def test_a_level_shift_48_hours_old_is_followed_with_bounded_bands(factor) -> None:
    values = daily(31)
    values[-72:] *= factor  # the step: 48 h before the origin, then the 24 h to forecast
    y = hourly(values)
    history, actual = y.iloc[:-24], y.iloc[-24:].to_numpy()
    result = auto_forecast(history, 24)
    ratio = result.forecast.yhat.to_numpy() / actual
    assert ratio.min() >= 0.85 and ratio.max() <= 1.15, (result.model, ratio.round(2))
    assert (result.forecast.hi_95.to_numpy() / actual).max() <= 2.0
    shift = result.anomalies[result.anomalies.kind == "level_shift"]
    assert len(shift) == 1 and abs(shift.ds.iloc[0] - y.index[-72]) <= pd.Timedelta(hours=3)
    assert shift.score.iloc[0] == pytest.approx(factor, rel=0.05)
    assert any(note.startswith("level shift: the last 4") for note in result.notes)
    assert not (result.anomalies.kind.isin(["spike", "dip"])).any()


def test_a_short_trailing_run_is_not_a_level_shift() -> None:
    values = daily(28)
    values[-30:] *= 0.3  # a storm of 30 hours: left to the models, history not rescaled
    clean = clean_history(hourly(values))
    assert clean.level_shift is None
    np.testing.assert_allclose(clean.y.to_numpy()[:-30], values[:-30], rtol=0.5)


@pytest.mark.parametrize("zero_share", [0.5, 0.8, 0.95])
def test_a_sparse_series_is_not_flagged_hour_by_hour(zero_share) -> None:
    rng = np.random.default_rng(11)
    n = 28 * 24
    values = np.where(rng.random(n) < zero_share, 0.0, rng.integers(1, 40, n).astype(float))
    clean = clean_history(hourly(values))
    assert not clean.anomalies.kind.isin(["spike", "dip"]).any()
    assert any("sparse series" in note for note in clean.notes)
    np.testing.assert_array_equal(clean.y.to_numpy(), values)


def test_a_series_equal_to_its_neighbouring_days_is_not_flagged() -> None:
    values = np.tile(np.r_[np.zeros(20), [5.0, 9.0, 5.0, 1.0]], 21)
    values[200] = 7.0  # one odd hour: with a robust scale of zero everything would flag
    clean = clean_history(hourly(values))
    assert not clean.anomalies.kind.isin(["spike", "dip"]).any()


def test_a_weekly_dip_with_two_weeks_of_history_is_not_repaired() -> None:
    values = daily(14, noise=0.01)
    dip = [24 * 2 + 10, 24 * 9 + 10]  # Wednesdays 10:00, both weeks
    values[dip] = 58.5
    clean = clean_history(hourly(values))
    assert not clean.anomalies.ds.isin(hourly(values).index[dip]).any()
    np.testing.assert_allclose(clean.y.to_numpy()[dip], 58.5)


@pytest.mark.parametrize("value", [1e15, 3.5e300])
def test_values_the_models_cannot_compute_with_are_rejected(value) -> None:
    values = daily(10)
    values[100] = value
    with pytest.raises(InvalidSeriesError, match="or more per hour"):
        auto_forecast(hourly(values), 24)
