"""The fast paths compute what the straightforward code computes.

Every vectorised or shortcut version is compared with the per-origin loop (or the pandas or
numpy call) it replaces, on series with gaps, zeros and short histories.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from forecasting import InvalidSeriesError, clean_history
from forecasting._refresh_arima import model_inputs, run_filter
from forecasting._same_hour import nanmedian_columns
from forecasting._series import as_hourly, interpolated, regular
from forecasting.backtest import backtest
from forecasting.hygiene import ANOMALY_COLUMNS
from forecasting.metrics import mase, summarize
from forecasting.models import Arima, ProfileLevel, SeasonalMA, SeasonalMAWeekly, SeasonalNaive
from forecasting.models.profile_level import _offset, _profiles, level_signal, step_bands
from forecasting.refresh import (
    _base,
    _one_step,
    _without_outages,
    refresh,
    refresh_state,
)

from .conftest import daily_pattern, hourly


def _histories() -> dict[str, pd.Series]:
    rng = np.random.default_rng(7)
    noisy = daily_pattern(30, noise=8.0, seed=1)
    trending = noisy * np.linspace(0.8, 1.3, len(noisy))
    gaps = trending.copy()
    gaps.iloc[100:140] = np.nan  # a long gap, filled as a refresh fills it
    gaps.iloc[300:302] = np.nan
    zeros = noisy.where(rng.random(len(noisy)) > 0.3, 0.0)  # intermittent
    outage = noisy.copy()
    outage.iloc[500:506] = 0.0
    return {
        "trending": trending,
        "gaps": gaps,
        "zeros": zeros,
        "outage": outage,
        "all_zero": hourly(np.zeros(200)),
        "short_30": noisy.iloc[:30],
        "short_50": noisy.iloc[:50],
        "short_190": noisy.iloc[:190],
    }


HISTORIES = _histories()


def _states(y: pd.Series) -> list[dict]:
    states: list[dict] = [
        {"kind": "seasonal_naive", "season": 24},
        {"kind": "seasonal_naive", "season": 168},
    ]
    for model in (SeasonalMA(), SeasonalMA(days=3, trend=False), SeasonalMA(days=14)):
        states.append(
            {"kind": model.name, "period": 24, "periods": model.days, "trend": model.trend}
        )
    for model in (SeasonalMAWeekly(), SeasonalMAWeekly(weeks=2)):
        states.append({"kind": model.name, "period": 168, "periods": model.weeks, "trend": True})
    for days in (7, 3):
        model = ProfileLevel(days=days)
        beta = model.fit(y).beta_ if len(y) >= model.min_history() else np.linspace(0.9, 0.1, 24)
        states.append({"kind": "profile_level", "days": days, "beta": list(beta)})
    return states


@pytest.mark.parametrize("name", sorted(HISTORIES))
def test_one_step_forecasts_equal_the_forecast_from_every_origin(name: str) -> None:
    y = HISTORIES[name]
    values = _without_outages(y.to_numpy())
    targets = np.arange(1, len(values) + 1)  # every origin, the first hour to the end
    for state in _states(y):
        expected = [_base(state, values[:t], y.index[:t], 1)[0] for t in targets]
        np.testing.assert_allclose(
            _one_step(state, values, y.index, targets), expected, rtol=1e-12, err_msg=str(state)
        )


def test_prophet_one_step_forecasts_equal_its_path_from_every_origin() -> None:
    rng = np.random.default_rng(2)
    index = pd.date_range("2026-01-05", periods=500, freq="h", tz="UTC")
    state = {
        "kind": "prophet",
        "path_start": index[400].isoformat(),
        "path": list(rng.random(72)),
        "fitted": list(rng.random(300)),
    }
    values = rng.random(len(index))
    targets = np.arange(1, len(index) + 1)  # before, inside and after the stored path
    expected = [_base(state, values[:t], index[:t], 1)[0] for t in targets]
    np.testing.assert_array_equal(_one_step(state, values, index, targets), expected)


def _residuals_per_origin(model: ProfileLevel, values: np.ndarray) -> np.ndarray:
    """ProfileLevel._residuals written as the loop over origins it replaces."""
    n, day = len(values), 24
    c = _offset(values)
    profile = _profiles(values, model.days)[:n]
    ell = level_signal(values, profile, c)
    rows = []
    for o in range(max(model.min_history(), n - 14 * day - day + 1), n - day + 1):
        if np.isfinite(ell[o]):
            yhat = np.clip((profile[o : o + day] + c) * np.exp(model.beta_ * ell[o]) - c, 0, None)
            rows.append(values[o : o + day] - yhat)
    return np.asarray(rows).reshape(-1, day)


@pytest.mark.parametrize("name", ["trending", "gaps", "zeros", "outage"])
@pytest.mark.parametrize("days", [7, 3])
def test_profile_level_residuals_equal_the_loop_over_origins(name: str, days: int) -> None:
    y = clean_history(HISTORIES[name]).y
    if days == 3:
        y = y.iloc[: 24 * 5]  # short: fewer origins than the two weeks
    model = ProfileLevel(days=days).fit(y)
    values = y.to_numpy()
    np.testing.assert_allclose(
        model._residuals(values), _residuals_per_origin(model, values), rtol=1e-12
    )


def test_nanmedian_columns_is_numpys_nanmedian_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    for rows in (1, 2, 3, 6, 7, 14):
        stack = rng.choice([0.0, 1.0, 2.5, 3.0, 1e14, np.nan], size=(rows, 500))
        stack[:, rng.random(500) < 0.5] = rng.normal(100, 30, size=(rows, 1))
        stack[rng.random(stack.shape) < 0.3] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
            expected = np.nanmedian(stack, axis=0)
        np.testing.assert_array_equal(nanmedian_columns(stack), expected)


def test_interpolated_is_pandas_linear_interpolation_both_ways() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        values = rng.normal(50, 10, 60)
        values[rng.random(60) < rng.random()] = np.nan
        expected = pd.Series(values).interpolate(limit_direction="both").to_numpy()
        out = interpolated(values)
        np.testing.assert_array_equal(out, expected)
        assert out is not values
    assert np.isnan(interpolated(np.full(5, np.nan))).all()


def test_a_valid_hourly_series_is_used_as_it_is() -> None:
    y = daily_pattern(3)
    assert as_hourly(y) is y
    assert regular(y) is y
    copy = y.copy()
    clean_history(y)
    SeasonalNaive().fit(y)
    pd.testing.assert_series_equal(y, copy)  # and nobody wrote into it


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (-1.0, "negative value"),
        (np.inf, "infinite values"),
        (1e16, "1e\\+15 or more"),
    ],
)
def test_the_fast_path_still_rejects_bad_values(value: float, match: str) -> None:
    y = daily_pattern(2)
    y.iloc[5] = value
    with pytest.raises(InvalidSeriesError, match=match):
        as_hourly(y)


def test_regular_still_fills_absent_hours_and_drops_nan_at_the_ends() -> None:
    y = daily_pattern(2)
    y.iloc[[0, 1, -1]] = np.nan
    holey = y.drop(y.index[[10, 11]])
    out = regular(as_hourly(holey))
    assert out.index[0] == y.index[2] and out.index[-1] == y.index[-2]
    assert len(out) == len(y) - 3 and out.isna().sum() == 2


def test_summarize_scores_each_window_on_the_history_up_to_its_cutoff() -> None:
    y = clean_history(HISTORIES["gaps"])
    frame = backtest(SeasonalMA, y.y, 24, windows=4, observed=y.observed)
    frame = frame.sample(frac=1.0, random_state=0)  # windows interleaved
    frame.loc[frame.index[:5], "y"] = np.nan
    observed = y.observed
    expected = [
        mase(g["y"], g["yhat"], y_insample=observed[observed.index <= cutoff])
        for cutoff, g in frame.groupby("cutoff", sort=True)
    ]
    scores = summarize(frame, observed)
    assert scores["mase"] == np.mean(expected)
    assert scores["n_points"] == frame["y"].notna().sum()


def test_a_refresh_at_the_fits_origin_reuses_the_states_filter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from statsmodels.tsa.statespace.sarimax import SARIMAX

    from forecasting import _refresh_arima as module

    y = daily_pattern(30, noise=5.0, seed=3)
    state = refresh_state(Arima().fit(y), y)
    filters: list[int] = []
    original = SARIMAX.filter

    def counted(self, *args, **kwargs):
        filters.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SARIMAX, "filter", counted)
    reused = refresh(state, y)
    assert filters == []
    module._last_filter.clear()
    pd.testing.assert_frame_equal(refresh(state, y), reused)
    assert filters == [1]


def test_the_refresh_filter_stores_what_the_full_filter_computes() -> None:
    from forecasting.models.arima import _difference

    y = daily_pattern(30, noise=5.0, seed=4)
    state = refresh_state(Arima().fit(y), y)
    x, _, _ = model_inputs(state, y.to_numpy(), y.index)
    model, lean = run_filter(state, x)
    full = model.filter(np.asarray(state["params"]), cov_type="none")
    assert lean.forecasts_error.shape == (1, len(_difference(x, state["order"][1])))
    for name in ("forecasts_error", "forecasts_error_cov", "predicted_state"):
        np.testing.assert_array_equal(getattr(lean, name), getattr(full, name))


@pytest.mark.parametrize("missing", [False, True])
def test_profile_level_bands_are_the_nan_ignoring_quantiles(missing: bool) -> None:
    rng = np.random.default_rng(5)
    residuals = rng.normal(0, 10, size=(300, 24))
    if missing:
        residuals[rng.random(residuals.shape) < 0.05] = np.nan
    yhat = rng.uniform(50, 100, 30)
    bands = step_bands(yhat, residuals)
    steps, widen = np.minimum(np.arange(30), 23), np.sqrt(np.arange(30) // 24 + 1)
    for level, (alpha, beta) in {80: (0.1, 0.9), 95: (0.025, 0.975)}.items():
        lo, hi = np.nanquantile(residuals, [alpha, beta], axis=0)
        np.testing.assert_array_equal(bands[level][0], yhat + np.minimum(lo[steps], 0) * widen)
        np.testing.assert_array_equal(bands[level][1], yhat + np.maximum(hi[steps], 0) * widen)


def test_a_history_without_anomalies_gets_its_own_empty_frame() -> None:
    first = clean_history(daily_pattern(7)).anomalies
    expected = pd.DataFrame([], columns=list(ANOMALY_COLUMNS)).sort_values("ds", ignore_index=True)
    pd.testing.assert_frame_equal(first, expected, check_index_type=True, check_column_type=True)
    first.loc[0] = [pd.Timestamp("2026-01-05", tz="UTC"), "spike", 1.0, 1.0, 9.0]
    assert clean_history(daily_pattern(7)).anomalies.empty


@pytest.mark.parametrize(
    "model",
    [
        SeasonalMA(),
        SeasonalMA(days=3, trend=False),
        SeasonalMA(days=14),
        SeasonalMAWeekly(),
        SeasonalMAWeekly(weeks=2),
    ],
    ids=repr,
)
@pytest.mark.parametrize("name", ["trending", "gaps", "zeros", "short_50", "short_190"])
def test_seasonal_ma_residuals_equal_the_forecast_from_each_day(model, name: str) -> None:
    y = clean_history(HISTORIES[name]).y
    if len(y) < model.min_history():
        return
    model.fit(y)
    values = y.to_numpy()
    errors = [
        values[origin : origin + 24] - model._forecast(values[:origin], 24)
        for origin in range(len(values) - 24, len(values) - 24 * 15, -24)
        if origin >= model.min_history()
    ]
    expected = np.concatenate(errors) if errors else np.diff(values)
    np.testing.assert_allclose(model.residuals_, expected, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("weights", [None, (0.8, 0.2)])
def test_combine_equals_replacing_the_value_columns_of_a_copy(weights) -> None:
    from forecasting.models.ensemble import VALUE_COLUMNS, combine

    y = clean_history(HISTORIES["trending"]).y
    frames = [
        backtest(factory, y, 24, windows=2).iloc[24:] for factory in (SeasonalMA, SeasonalNaive)
    ]
    expected = frames[0].copy()
    w = None if weights is None else np.asarray(weights) / np.sum(weights)
    for column in VALUE_COLUMNS:
        stack = np.column_stack([f[column].to_numpy() for f in frames])
        expected[column] = np.median(stack, axis=1) if w is None else stack @ w
    pd.testing.assert_frame_equal(combine(frames, weights), expected, check_exact=True)


@pytest.mark.parametrize("name", ["trending", "gaps"])
def test_per_fold_mase_is_summarizes_mase_fold_by_fold(name: str) -> None:
    from forecasting.race import fold_scores

    y = _histories()[name]
    frame = backtest(SeasonalMA, y, 24, windows=4)
    frame.loc[frame.index[::7], "yhat"] = np.nan  # missing predictions are left out
    shuffled = frame.sample(frac=1.0, random_state=0)  # rows in any order, folds unsorted
    scores = fold_scores(shuffled, y, "mase")
    scored = frame.dropna(subset=["y", "yhat"])  # the hours both known
    expected = {
        cutoff: summarize(group, y)["mase"] for cutoff, group in scored.groupby("cutoff", sort=True)
    }
    assert list(scores.index) == sorted(expected)
    np.testing.assert_allclose(scores.to_numpy(), [expected[c] for c in scores.index], rtol=1e-12)
