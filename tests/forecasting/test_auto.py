"""auto_forecast with deterministic fakes whose backtest errors are known in advance."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from forecasting import (
    EmptySeriesError,
    ForecastResult,
    InvalidParameterError,
    InvalidSeriesError,
    UnknownModelError,
    auto_forecast,
    select,
)
from forecasting.models import Ensemble

from .conftest import ConstantFake, daily_pattern, fake, hourly

FLAT = hourly(np.tile([10.0, 30.0], 24 * 5))  # mean 20, non-constant


def test_picks_the_lowest_error_and_refits_it() -> None:
    models = {"near": fake(level=21.0), "far": fake(level=35.0), "zero": fake(level=0.0)}
    result = auto_forecast(FLAT, horizon=12, models=models, windows=2, metric="mae")
    assert isinstance(result, ForecastResult)
    assert result.model == "near"
    scores = result.scores.set_index("model")
    # actuals alternate 10/30: errors 11/9 -> MAE 10; 25/5 -> 15; 10/30 -> 20
    assert scores.loc["near", "mae"] == pytest.approx(10.0)
    assert scores.loc["far", "mae"] == pytest.approx(15.0)
    assert scores.loc["zero", "mae"] == pytest.approx(20.0)
    assert scores.loc["near", "selected"] and not scores.loc["far", "selected"]
    assert len(result.forecast) == 12 and (result.forecast.yhat == 21.0).all()


def test_ties_go_to_the_simpler_model() -> None:
    models = {"complex": fake(level=21.0, complexity=9), "simple": fake(level=19.0, complexity=1)}
    result = auto_forecast(FLAT, horizon=12, models=models, windows=2, metric="mae")
    assert result.model == "simple"
    assert "chose the simpler" in result.reason


def test_a_failing_candidate_is_recorded_and_skipped() -> None:
    models = {"broken": fake(fail=True), "ok": fake(level=20.0)}
    result = auto_forecast(FLAT, horizon=12, models=models, windows=2)
    row = result.scores.set_index("model").loc["broken"]
    assert row["status"] == "failed"
    assert "ArithmeticError: fake model diverged" in row["reason"]
    assert result.model == "ok"


def test_candidate_needing_more_history_is_skipped_with_reason() -> None:
    models = {"greedy": fake(level=20.0, need=10_000), "ok": fake(level=25.0)}
    result = auto_forecast(FLAT, horizon=12, models=models, windows=2)
    row = result.scores.set_index("model").loc["greedy"]
    assert row["status"] == "skipped"
    assert "greedy needs 10000 h of training history; 240 h leave it 0 of 2" in row["reason"]
    assert result.model == "ok"


def test_candidates_are_compared_on_the_windows_they_share() -> None:
    # 240 h, 4 windows of 12 h: training lengths 156, 180, 204, 228; "late" needs 170
    models = {"late": fake(level=20.0, need=170), "early": fake(level=21.0)}
    result = auto_forecast(FLAT, horizon=12, models=models, windows=4, metric="mae")
    scores = result.scores.set_index("model")
    assert scores.loc["late", "status"] == "ok"
    assert scores.loc["late", "n_windows"] == 3 and scores.loc["early", "n_windows"] == 3
    assert sorted(ConstantFake.fits) == sorted([156, 180, 204, 228, 180, 204, 228, 240])


def test_every_candidate_failing_falls_back_to_seasonal_naive() -> None:
    result = auto_forecast(FLAT, horizon=4, models={"broken": fake(fail=True)}, windows=1)
    assert result.model == "seasonal_naive"
    assert result.forecast.yhat.tolist() == [10.0, 30.0, 10.0, 30.0]
    assert any("falling back to seasonal_naive" in note for note in result.notes)


def test_too_little_history_for_any_backtest_falls_back() -> None:
    result = auto_forecast(hourly(np.arange(30.0)), horizon=24)
    assert result.model == "seasonal_naive"
    assert (result.scores.status == "skipped").all()
    assert "one backtest window of 24 h needs at least 48" in result.reason
    assert result.forecast.yhat.tolist() == list(np.arange(6.0, 30.0))


def test_fewer_windows_than_asked_is_noted() -> None:
    result = auto_forecast(
        hourly(np.tile([1.0, 3.0], 40)), horizon=24, windows=5, models=["seasonal_naive"]
    )
    assert "allow only 2 of 5 backtest windows" in " ".join(result.notes)


def test_constant_history_gives_a_constant_forecast() -> None:
    result = auto_forecast(hourly(np.full(200, 7.0)), horizon=5)
    assert result.forecast.yhat.tolist() == [7.0] * 5
    assert (result.forecast.hi_95 == 7.0).all()
    assert "history is constant at 7" in result.notes


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"models": ["nope"]}, UnknownModelError, "unknown model.*'nope'"),
        ({"metric": "mape"}, InvalidParameterError, "unknown metric 'mape'"),
        ({"windows": 0}, InvalidParameterError, "windows must be a positive integer"),
        ({"horizon": 0}, InvalidParameterError, "horizon must be a positive"),
    ],
)
def test_bad_arguments(kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        auto_forecast(FLAT, **kwargs)


def test_bad_series() -> None:
    with pytest.raises(EmptySeriesError, match="no finite observation"):
        auto_forecast(hourly([np.nan] * 50))
    with pytest.raises(InvalidSeriesError, match="negative"):
        auto_forecast(hourly([1.0, -1.0] * 50))


def test_scores_are_json_ready() -> None:
    result = auto_forecast(
        FLAT, horizon=12, models={"a": fake(level=20.0), "b": fake(fail=True)}, windows=2
    )
    text = json.dumps(result.scores_records())
    assert '"status": "failed"' in text and "NaN" not in text


def test_event_multiplier_scales_the_forecast_hours_inside_it() -> None:
    start = FLAT.index[-1] + pd.Timedelta(hours=3)
    events = pd.DataFrame(
        {
            "name": ["promo"],
            "start": [start],
            "end": [start + pd.Timedelta(hours=2)],
            "multiplier": [2.0],
        }
    )
    result = auto_forecast(
        FLAT, horizon=6, models={"a": fake(level=20.0)}, windows=2, events=events
    )
    assert result.forecast.yhat.tolist() == [20.0, 20.0, 40.0, 40.0, 20.0, 20.0]
    assert "event 'promo': forecast x2 for 2 hour(s)" in result.notes


def test_intervals_are_calibrated_to_backtest_errors() -> None:
    # the fake's band is ±1 but its errors are ±10: calibration must widen the 80 % band
    result = auto_forecast(FLAT, horizon=12, models={"a": fake(level=20.0, width=1.0)}, windows=3)
    assert result.forecast.hi_80.to_numpy() == pytest.approx(np.full(12, 30.0))
    assert result.forecast.lo_80.to_numpy() == pytest.approx(np.full(12, 10.0))


def test_select_without_finite_scores_raises() -> None:
    scores = pd.DataFrame({"model": ["a"], "status": ["failed"], "mase": [np.nan]})
    with pytest.raises(ValueError, match="no candidate produced a finite backtest score"):
        select(scores, "mase")


def test_real_models_end_to_end_on_a_clean_cycle() -> None:
    y = daily_pattern(21, noise=3.0)
    result = auto_forecast(y.drop(y.index[[100, 101]]), horizon=24)
    assert len(result.forecast) == 24
    assert set(result.scores.model) == {
        "profile_level",
        "seasonal_naive",
        "seasonal_ma",
        "seasonal_ma_weekly",
        "arima",
        "prophet",
        "ensemble",
    }
    scores = result.scores.set_index("model")
    # every candidate backtested: kept to the end, or raced out after the first round (Prophet,
    # the expensive one, possibly after its first fold)
    raced = scores[scores.status != "ok"]
    after_one = raced.reason.str.startswith("raced out after 1 fold:")
    assert (raced.index[after_one] == "prophet").all(), raced.reason
    assert raced[~after_one].reason.str.startswith("raced out after 2 fold(s)").all()
    assert (raced.n_windows == np.where(after_one, 1, 2)).all()
    assert (scores.loc[scores.status == "ok", "n_windows"] == 5).all()
    assert scores.loc[result.model, "status"] == "ok"
    assert scores.loc[result.model, "mase"] <= scores.loc[scores.status == "ok", "mase"].min() * 1.2
    truth = 100 + 40 * np.sin(2 * np.pi * np.arange(len(y), len(y) + 24) / 24)
    assert np.mean(np.abs(result.forecast.yhat.to_numpy() - truth)) < 5.0


def _expensive(**kwargs):
    factory = fake(**kwargs)
    factory.expensive = True
    return factory


def test_an_expensive_clear_loser_costs_one_fit() -> None:
    # actuals alternate 10/30: "near" scores MAE 10, the expensive "far" 35 (beyond ×1.3)
    models = {"near": fake(level=21.0), "far": _expensive(level=55.0, width=2.0)}
    result = auto_forecast(FLAT, horizon=12, models=models, windows=4, metric="mae")
    far = result.scores.set_index("model").loc["far"]
    assert far["status"] == "skipped" and far["n_windows"] == 1
    assert far["reason"].startswith("raced out after 1 fold: 35 against the best 10")
    # near: four folds and the final fit; far: its one fold
    assert len(ConstantFake.fits) == 4 + 1 + 1


def test_an_expensive_candidate_within_reach_runs_every_fold() -> None:
    models = {"near": fake(level=21.0), "close": _expensive(level=22.0)}
    result = auto_forecast(FLAT, horizon=12, models=models, windows=4, metric="mae")
    close = result.scores.set_index("model").loc["close"]
    assert close["status"] == "ok" and close["n_windows"] == 4


def test_ensemble_combines_candidates_on_their_shared_windows() -> None:
    models = {
        "late": fake(level=20.0, need=170, complexity=1),
        "early": fake(level=24.0, complexity=2),
        "ensemble": Ensemble,
    }
    result = auto_forecast(FLAT, horizon=12, models=models, windows=4, metric="mae")
    row = result.scores.set_index("model").loc["ensemble"]
    assert row["status"] == "ok" and row["reason"].startswith(
        "median of late and early; scored nested"
    )
    assert row["n_windows"] == 3
    assert row["mae"] == pytest.approx(10.0)  # median of 20 and 24 is 22: errors 12 and 8


def test_an_internal_error_in_selection_falls_back_with_a_note(monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("forecasting.auto.race", broken)
    result = auto_forecast(FLAT, horizon=4, models={"a": fake(level=20.0)}, windows=2)
    assert result.model == "seasonal_naive"
    assert result.scores.status.tolist() == ["failed"]
    assert any("model selection failed (RuntimeError: boom)" in n for n in result.notes)
