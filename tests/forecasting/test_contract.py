"""Every registered model honours the forecaster contract."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting import MODELS, InsufficientHistoryError, NotFittedError

from .conftest import daily_pattern, hourly

HORIZON = 30


@pytest.fixture(scope="module")
def history() -> pd.Series:
    return daily_pattern(21, noise=3.0)


@pytest.fixture(scope="module", params=sorted(MODELS))
def fitted(request, history):
    original = history.copy()
    model = MODELS[request.param]().fit(history)
    pd.testing.assert_series_equal(history, original)  # input not mutated
    return model


def test_frame_shape_and_columns(fitted, history) -> None:
    frame = fitted.predict(HORIZON)
    assert list(frame.columns) == ["ds", "yhat", "lo_80", "hi_80", "lo_95", "hi_95"]
    assert len(frame) == HORIZON
    expected = pd.date_range(history.index[-1] + pd.Timedelta(hours=1), periods=HORIZON, freq="h")
    pd.testing.assert_index_equal(pd.DatetimeIndex(frame["ds"]), expected, check_names=False)
    assert str(frame["ds"].dt.tz) == "UTC"


def test_bands_are_ordered_and_non_negative(fitted) -> None:
    frame = fitted.predict(HORIZON)
    values = frame.drop(columns="ds").to_numpy()
    assert np.isfinite(values).all()
    assert (values >= 0).all()
    assert (frame.lo_95 <= frame.lo_80).all() and (frame.lo_80 <= frame.yhat).all()
    assert (frame.yhat <= frame.hi_80).all() and (frame.hi_80 <= frame.hi_95).all()


def test_point_forecast_tracks_a_clean_daily_cycle(fitted, history) -> None:
    frame = fitted.predict(24)
    truth = 100 + 40 * np.sin(2 * np.pi * np.arange(len(history), len(history) + 24) / 24)
    assert np.mean(np.abs(frame.yhat.to_numpy() - truth)) < 8.0


@pytest.mark.parametrize("name", sorted(MODELS))
def test_predict_before_fit_raises(name: str) -> None:
    with pytest.raises(NotFittedError, match="must be fitted before predict"):
        MODELS[name]().predict(24)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_too_short_history_raises_or_degrades(name: str) -> None:
    model = MODELS[name]()
    if model.min_history() <= 1:
        frame = model.fit(hourly([5.0])).predict(3)
        assert frame.yhat.tolist() == [5.0, 5.0, 5.0]
        return
    short = hourly(np.ones(model.min_history() - 1))
    with pytest.raises(InsufficientHistoryError, match=f"{model.name} needs at least"):
        model.fit(short)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_hyperparameters_are_keyword_only(name: str) -> None:
    with pytest.raises(TypeError):
        MODELS[name](1)
