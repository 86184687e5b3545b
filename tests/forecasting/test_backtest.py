from __future__ import annotations

import numpy as np
import pytest

from forecasting import InsufficientHistoryError, InvalidParameterError, ModelFitError, backtest
from forecasting.backtest import BACKTEST_COLUMNS

from .conftest import ConstantFake, fake, hourly


def test_windows_cutoffs_and_actuals() -> None:
    y = hourly(np.arange(100.0))
    frame = backtest(fake(level=5.0), y, horizon=10, windows=3, step=20)
    assert list(frame.columns) == list(BACKTEST_COLUMNS)
    assert frame.cutoff.unique().tolist() == [y.index[49], y.index[69], y.index[89]]
    assert ConstantFake.fits == [50, 70, 90]
    first = frame[frame.cutoff == y.index[49]]
    assert first.y.tolist() == list(np.arange(50.0, 60.0))
    assert first.step.tolist() == list(range(1, 11))
    assert (frame.yhat == 5.0).all() and (frame.model == "fake").all()


def test_each_fit_is_offered_the_previous_model() -> None:
    seen = []

    def factory():
        model = ConstantFake()
        seen.append(model)
        return model

    backtest(factory, hourly(np.ones(50)), horizon=5, windows=3, step=5)
    assert seen[0].warm_from_ is None
    assert seen[1].warm_from_ is seen[0] and seen[2].warm_from_ is seen[1]


def test_observed_actuals_with_nan() -> None:
    y = hourly(np.arange(30.0))
    observed = y.copy()
    observed.iloc[25] = np.nan
    frame = backtest(fake(), y, horizon=5, windows=1, observed=observed)
    assert np.isnan(frame.y.iloc[0]) and frame.y.iloc[1] == 26.0


def test_too_many_windows_raise_with_the_numbers() -> None:
    with pytest.raises(InsufficientHistoryError, match="need more than 72 hours.*got 50"):
        backtest(fake(), hourly(np.ones(50)), horizon=24, windows=3, step=24)
    with pytest.raises(InsufficientHistoryError, match="fake needs 40 hours before the first"):
        backtest(fake(need=40), hourly(np.ones(60)), horizon=24, windows=1)
    with pytest.raises(InvalidParameterError, match="windows must be a positive integer"):
        backtest(fake(), hourly(np.ones(60)), horizon=24, windows=0)


def test_a_failing_model_raises_model_fit_error() -> None:
    with pytest.raises(ModelFitError, match="fake failed at cutoff .*ArithmeticError: fake"):
        backtest(fake(fail=True), hourly(np.ones(60)), horizon=24, windows=1)
