from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.models import ProphetModel
from forecasting.models._shape import choose_seasonality_mode

from .conftest import START, daily_pattern


def test_event_hours_are_learnt_and_forecast() -> None:
    y = daily_pattern(21, noise=2.0)
    starts = [START + pd.Timedelta(days=d, hours=12) for d in (3, 8, 13, 18, 21)]
    events = pd.DataFrame(
        {"name": "promo", "start": starts, "end": [s + pd.Timedelta(hours=3) for s in starts]}
    )
    boosted = y.copy()
    for start in starts[:-1]:
        boosted[(boosted.index >= start) & (boosted.index < start + pd.Timedelta(hours=3))] += 80
    model = ProphetModel().fit(boosted, events=events)
    assert model.event_names_ == ["event_promo"]
    frame = model.predict(24).set_index("ds")
    inside = frame.loc[starts[-1] : starts[-1] + pd.Timedelta(hours=2), "yhat"]
    plain = ProphetModel().fit(boosted).predict(24).set_index("ds").loc[inside.index, "yhat"]
    assert (inside - plain).mean() > 40


def test_fit_is_silent(capfd) -> None:
    ProphetModel().fit(daily_pattern(7, noise=1.0)).predict(24)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_seasonality_mode_follows_the_swing() -> None:
    t = np.arange(24 * 14)
    level = np.linspace(50, 300, len(t))
    assert choose_seasonality_mode(level * (1 + 0.5 * np.sin(2 * np.pi * t / 24))) == (
        "multiplicative"
    )
    assert choose_seasonality_mode(level + 20 * np.sin(2 * np.pi * t / 24)) == "additive"
    assert choose_seasonality_mode(np.ones(48)) == "additive"


def test_warm_start_takes_the_previous_fit() -> None:
    y = daily_pattern(10, noise=1.0)
    first = ProphetModel().fit(y.iloc[:-24])
    second = ProphetModel()
    second.warm_start(first)
    assert set(second._init) == {"k", "m", "sigma_obs", "delta", "beta"}
    assert len(second.fit(y).predict(24)) == 24
