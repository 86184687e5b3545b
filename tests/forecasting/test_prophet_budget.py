"""Prophet's budget in ``auto_forecast``: one fit per backtest fold it runs plus the final
refit when it survives the race, one fit when the race drops it after its first fold."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting import auto_forecast
from forecasting.models.prophet import ProphetModel

from .conftest import hourly

pytestmark = pytest.mark.slow

WINDOWS = 5


@pytest.fixture
def prophet_fits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Lengths of the histories Prophet's model was fitted on (one optimisation each)."""
    calls: list[int] = []
    original = ProphetModel._optimise

    def counted(self, data, init, **kwargs):
        calls.append(int(data["T"]))
        return original(self, data, init, **kwargs)

    monkeypatch.setattr(ProphetModel, "_optimise", counted)
    return calls


def _smooth_daily_weekly(days: int = 30, seed: int = 0) -> pd.Series:
    t = np.arange(days * 24)
    daily = 1 + 0.6 * np.cos(2 * np.pi * (t % 24 - 15) / 24)
    daily += 0.15 * np.cos(4 * np.pi * (t % 24 - 15) / 24)
    weekly = np.where((t // 24) % 7 >= 5, 0.7, 1.0)
    trend = 1 + 0.3 * t / len(t)
    noise = np.random.default_rng(seed).lognormal(0, 0.05, len(t))
    return hourly(5000 * daily * weekly * trend * noise)


def test_on_smooth_daily_and_weekly_cycles_prophet_fits_once_per_fold_and_once_more(
    prophet_fits: list[int],
) -> None:
    result = auto_forecast(_smooth_daily_weekly(), 24, windows=WINDOWS)
    status = result.scores.set_index("model")["status"]
    assert status["prophet"] == "ok"  # it survived the race: a full candidate
    folds = int(result.scores.set_index("model").loc["prophet", "n_windows"])
    refit = max(prophet_fits) == 30 * 24  # the final fit on all history, when Prophet serves
    assert folds == WINDOWS
    assert len(prophet_fits) == folds + refit <= WINDOWS + 1
    assert len(set(prophet_fits)) == len(prophet_fits)  # no fold fitted twice


def test_a_clear_loser_costs_prophet_one_fit(prophet_fits: list[int]) -> None:
    # an on/off day (8 busy hours): the seasonal models repeat it, Prophet's smooth Fourier
    # terms cannot, and it is raced out after its first fold
    t = np.arange(30 * 24)
    noise = np.random.default_rng(5).normal(0, 5, len(t))
    y = hourly(np.where(t % 24 < 8, 1000.0, 10.0) + np.abs(noise))
    result = auto_forecast(y, 24, windows=WINDOWS)
    status = result.scores.set_index("model")["status"]
    assert status["prophet"] == "skipped"
    assert len(prophet_fits) == 1
