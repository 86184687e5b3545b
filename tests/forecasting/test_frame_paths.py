"""The array paths of the backtest frames compute what the per-fold pandas code computed.

``auto_forecast`` is run twice on the same series: as it is, and with the per-fold pandas
formulations they replaced patched back in (a frame per fold with inserted columns and a
concat; concat and sort to merge race rounds; a filtered frame and a combined frame per
nested fold; ``pd.factorize`` and boolean masks for the folds of a frame). Everything it
returns must be equal, not merely close.
"""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from forecasting import _fold_frames, _tail, auto, guard, metrics, nested, race
from forecasting.auto import auto_forecast
from forecasting.backtest import backtest, stacked_folds
from forecasting.models.ensemble import combine

from .conftest import daily_pattern, hourly

# the package exports the function ``backtest`` under the module's name
backtest_module = importlib.import_module("forecasting.backtest")

NO_PROPHET = ["profile_level", "seasonal_naive", "seasonal_ma", "seasonal_ma_weekly", "arima"]


def _reference_stacked(folds: list[dict]) -> pd.DataFrame:
    """What the backtest built: the model's frame per fold, three inserted columns, concat."""
    frames = []
    for fold in folds:
        frame = pd.DataFrame({k: v for k, v in fold.items() if k not in ("cutoff", "step", "y")})
        frame = frame.drop(columns="model")
        frame.insert(0, "cutoff", fold["cutoff"][0])
        frame.insert(2, "step", fold["step"])
        frame.insert(3, "y", fold["y"])
        frame["model"] = fold["model"][0]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _reference_merged(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    merged = pd.concat([f for f in (old, new) if not f.empty], ignore_index=True)
    return merged.sort_values(["cutoff", "step"], ignore_index=True)


def _reference_fold(frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    cutoff = frame["cutoff"].iloc[rows[0]]
    return frame[frame["cutoff"] == cutoff].reset_index(drop=True)


def _reference_taken(folds):
    return pd.concat([_reference_fold(f, rows) for f, rows in folds], ignore_index=True)


def _reference_combined(folds, weights=None):
    parts = [
        combine([_reference_fold(f, rows) for f, rows in members], weights) for members in folds
    ]
    return pd.concat(parts, ignore_index=True)


def _reference_fold_codes(frame: pd.DataFrame):
    return pd.factorize(frame["cutoff"], sort=True)


def _reference_known_before(index, cutoffs):
    return lambda k: index <= cutoffs[k]


def _patch_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backtest_module, "stacked_folds", _reference_stacked)
    monkeypatch.setattr(race, "_merged", _reference_merged)
    monkeypatch.setattr(nested, "taken", _reference_taken)
    monkeypatch.setattr(nested, "combined", _reference_combined)
    monkeypatch.setattr(metrics, "fold_codes", _reference_fold_codes)
    monkeypatch.setattr(race, "fold_codes", _reference_fold_codes)
    monkeypatch.setattr(metrics, "_known_before", _reference_known_before)


def _series() -> list[tuple[pd.Series, list[str]]]:
    rng = np.random.default_rng(3)
    weekly = daily_pattern(30, noise=6.0, seed=2)
    weekly = weekly * np.where(weekly.index.dayofweek >= 5, 0.7, 1.0)
    trending = weekly * np.linspace(0.9, 1.3, len(weekly))
    gappy = trending.drop(trending.index[200:230])
    spiky = hourly(rng.gamma(4.0, 25.0, 30 * 24))
    return [
        (trending, [*NO_PROPHET, "ensemble"]),
        (gappy, [*NO_PROPHET, "ensemble"]),
        (weekly, ["profile_level", "seasonal_naive", "seasonal_ma", "ensemble"]),
        (spiky, NO_PROPHET),
    ]


def _assert_same(a, b) -> None:
    assert a.model == b.model
    assert a.reason == b.reason
    assert a.notes == b.notes
    assert a.state == b.state
    assert a.forecast.equals(b.forecast)
    assert a.backtest.equals(b.backtest)
    assert a.anomalies.equals(b.anomalies)
    assert a.scores.drop(columns="cpu_seconds").equals(b.scores.drop(columns="cpu_seconds"))


@pytest.mark.parametrize("case", range(4))
def test_auto_forecast_is_what_the_per_fold_frames_gave(case, monkeypatch) -> None:
    y, models = _series()[case]
    fast = auto_forecast(y, 24, models=models)
    with monkeypatch.context() as patch:
        _patch_reference(patch)
        slow = auto_forecast(y, 24, models=models)
    _assert_same(fast, slow)


def test_backtest_frame_is_the_concat_of_fold_frames(monkeypatch) -> None:
    from forecasting.models import SeasonalNaive

    y = daily_pattern(20, noise=4.0, seed=5)
    fast = backtest(SeasonalNaive, y, 24, windows=4)
    monkeypatch.setattr(backtest_module, "stacked_folds", _reference_stacked)
    slow = backtest(SeasonalNaive, y, 24, windows=4)
    assert fast.equals(slow)
    assert list(fast.dtypes) == list(slow.dtypes)


def test_merge_of_race_rounds_sorts_as_concat_and_sort() -> None:
    from forecasting.models import SeasonalNaive

    y = daily_pattern(20, noise=4.0, seed=6)
    whole = backtest(SeasonalNaive, y, 24, windows=5)
    cutoffs = sorted(whole["cutoff"].unique())
    parts = [
        whole[whole["cutoff"].isin(c)].reset_index(drop=True) for c in (cutoffs[3:], cutoffs[:3])
    ]
    interleaved = [
        whole[whole["cutoff"].isin(c)].reset_index(drop=True)
        for c in ((cutoffs[0], cutoffs[4]), cutoffs[1:4])
    ]
    for old, new in (parts, parts[::-1], interleaved, (pd.DataFrame(), parts[0])):
        assert race._merged(old, new).equals(_reference_merged(old, new))


def test_fold_codes_are_factorize() -> None:
    y = daily_pattern(20, noise=4.0, seed=8)
    from forecasting.models import SeasonalNaive

    frame = backtest(SeasonalNaive, y, 24, windows=3).sample(frac=1.0, random_state=1)
    codes, cutoffs = metrics.fold_codes(frame)
    want_codes, want_cutoffs = pd.factorize(frame["cutoff"], sort=True)
    assert np.array_equal(codes, want_codes)
    assert cutoffs.equals(want_cutoffs)


def test_stacked_folds_of_disagreeing_folds_concatenates() -> None:
    one = {"a": np.array([1.0, 2.0]), "b": np.array([3, 4])}
    other = {"b": np.array([5]), "a": np.array([6.0])}
    assert stacked_folds([one, other]).equals(
        pd.concat([pd.DataFrame(one), pd.DataFrame(other)], ignore_index=True)
    )


def test_reference_patches_reach_every_caller() -> None:
    """The modules the reference formulations are patched into are the ones that call them."""
    assert nested.taken is _fold_frames.taken and nested.combined is _fold_frames.combined
    assert race.fold_codes is metrics.fold_codes
    assert _tail.backtest is backtest and guard.backtest is backtest and auto is not None
