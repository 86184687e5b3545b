"""The hourly refresh: a stored state conditions a fitted model on newer hours, no refit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecasting import auto_forecast
from forecasting.errors import InvalidParameterError
from forecasting.models import Arima, ProphetModel, SeasonalMA, SeasonalNaive
from forecasting.models.arima import _difference
from forecasting.refresh import (
    QUANTILE_COLUMNS,
    refresh,
    refresh_many,
    refresh_state,
)

from .conftest import hourly

SAMPLE = Path(__file__).resolve().parents[2] / "app" / "data" / "servegen_m_small_hourly.csv"


def servegen_tokens() -> pd.Series:
    """Real LLM-serving tokens per hour (ServeGen m-small, bundled sample; SOURCES.md)."""
    frame = pd.read_csv(SAMPLE)
    index = pd.DatetimeIndex(pd.to_datetime(frame["timestamp"], utc=True))
    tokens = (frame["prompt_tokens"] + frame["completion_tokens"]).to_numpy(dtype=float)
    return pd.Series(tokens, index=index)


def ar_daily(hours: int, *, seed: int = 3, phi: float = 0.8) -> pd.Series:
    """A daily shape plus AR(1) noise: errors that persist from one hour to the next."""
    rng = np.random.default_rng(seed)
    noise = np.zeros(hours)
    for t in range(1, hours):
        noise[t] = phi * noise[t - 1] + rng.normal(0, 6)
    t = np.arange(hours)
    return hourly(200 + 60 * np.sin(2 * np.pi * t / 24) + noise)


def test_arima_refresh_equals_the_fitted_filter_extended_over_the_new_hours() -> None:
    y = ar_daily(24 * 12)
    short, extra = y.iloc[: 24 * 10], 7
    model = Arima(weekly=False, log=False).fit(short)
    state = refresh_state(model, short)
    longer = y.iloc[: len(short) + extra]

    refreshed = refresh(state, longer, horizon=24)

    # statsmodels' own extension of the fitted results with the new observations, same
    # parameters, then the model's own prediction path
    z_longer = _difference(longer.to_numpy(), model.order_[1])
    model.result_ = model.result_.append(z_longer[-extra:])
    model.history_ = longer.to_numpy()[-(24 + 1) :]
    model.last_ds_ = longer.index[-1]
    expected = model.predict(24)
    assert refreshed["ds"].tolist() == expected["ds"].tolist()
    np.testing.assert_allclose(refreshed["yhat"], expected["yhat"], rtol=1e-6)
    np.testing.assert_allclose(refreshed["hi_80"] - refreshed["yhat"] > 0, True)


def test_a_refresh_never_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    from statsmodels.tsa.statespace.sarimax import SARIMAX

    y = servegen_tokens()
    fitted = {
        "arima": Arima().fit(y.iloc[:240]),
        "seasonal_ma": SeasonalMA().fit(y.iloc[:240]),
    }
    states = {name: refresh_state(model, y.iloc[:240]) for name, model in fitted.items()}
    fits: list[str] = []
    monkeypatch.setattr(SARIMAX, "fit", lambda *a, **k: fits.append("sarimax"))
    monkeypatch.setattr(Arima, "_fit", lambda *a, **k: fits.append("arima"))
    monkeypatch.setattr(SeasonalMA, "_fit", lambda *a, **k: fits.append("seasonal_ma"))
    for state in states.values():
        frame = refresh(state, y.iloc[:250])
        assert len(frame) == 24
        refresh_many(state, y, y.index[245:260])
    assert fits == []


@pytest.mark.parametrize("models", [["arima"], ["seasonal_ma"], ["seasonal_naive"], None])
def test_quantiles_are_monotone_non_negative_and_many_equals_one_by_one(models) -> None:
    y = servegen_tokens()
    result = auto_forecast(y.iloc[:240], models=models)
    state = json.loads(json.dumps(result.state))  # what the database stores
    origins = y.index[200:330:13]
    many = refresh_many(state, y, origins)
    for row, origin in enumerate(origins):
        one = refresh(state, y[y.index < origin])
        for column in ("yhat", "lo_80", "hi_80", "lo_95", "hi_95", *QUANTILE_COLUMNS):
            np.testing.assert_allclose(many[column][row], one[column], rtol=1e-9)
        levels = one.loc[:, list(QUANTILE_COLUMNS)].to_numpy()
        assert (levels >= 0).all()
        assert (np.diff(levels, axis=1) >= 0).all()
        assert (one["lo_95"] <= one["lo_80"]).all() and (one["lo_80"] <= one["yhat"]).all()
        assert (one["yhat"] <= one["hi_80"]).all() and (one["hi_80"] <= one["hi_95"]).all()
    # the nightly run itself carries the quantiles, from the same state at its own origin
    assert set(QUANTILE_COLUMNS) <= set(result.forecast.columns)


def test_the_level_correction_follows_a_new_level_within_hours() -> None:
    y = ar_daily(24 * 14)
    model = SeasonalMA().fit(y.iloc[: 24 * 13])
    state = refresh_state(model, y.iloc[: 24 * 13])
    assert state["rho"][0] > 0.3  # AR(1) noise: errors persist
    shifted = y.copy()
    shifted.iloc[24 * 13 :] += 150  # a new level, three hours old at the refresh
    history = shifted.iloc[: 24 * 13 + 3]
    nightly = model.predict(24)["yhat"].to_numpy()
    refreshed = refresh(state, history)["yhat"].to_numpy()
    actual = shifted.iloc[24 * 13 + 3 : 24 * 13 + 4].to_numpy()
    assert abs(refreshed[0] - actual[0]) < 0.5 * abs(nightly[3] - actual[0])


def test_an_outage_hour_a_day_old_does_not_blow_up_a_log_scale_arima() -> None:
    y = servegen_tokens()
    model = Arima(log=True).fit(y.iloc[:240])
    state = refresh_state(model, y.iloc[:240])
    broken = y.iloc[:270].copy()
    broken.iloc[245] = 0.0  # a collection outage: the same hour carried load the day before
    frame = refresh(state, broken)
    typical = float(y.iloc[200:270].median())
    assert frame["yhat"].max() < 5 * typical
    assert frame["q99"].max() < 20 * typical


def test_prophet_keeps_its_fit_and_corrects_the_level() -> None:
    y = servegen_tokens()
    model = ProphetModel().fit(y.iloc[:240])
    state = refresh_state(model, y.iloc[:240])
    assert len(state["path"]) == 72
    frame = refresh(state, y.iloc[:250])
    path = np.asarray(state["path"])[10:34]
    correction = frame["yhat"].to_numpy() - path
    # the correction is the last hour's error carried forward, shrinking with the steps ahead
    last_error = y.iloc[249] - np.asarray(state["path"])[9]
    assert correction[0] == pytest.approx(state["rho"][0] * last_error, rel=1e-6)
    assert np.all(np.abs(correction[1:]) <= np.abs(correction[:-1]) + 1e-6)


def test_an_unknown_state_is_refused() -> None:
    y = ar_daily(24 * 5)
    with pytest.raises(InvalidParameterError):
        refresh({"version": 999, "kind": "arima"}, y)
    with pytest.raises(InvalidParameterError):
        refresh({"version": 1, "kind": "mystery"}, y)
    state = refresh_state(SeasonalNaive().fit(y), y)
    with pytest.raises(InvalidParameterError):
        refresh_many(state, y, [y.index[0]])  # no history before the origin


def test_an_ensemble_refreshes_at_the_end_of_its_history() -> None:
    y = ar_daily(24 * 21)
    members = [auto_forecast(y, models=[m]).state for m in ("seasonal_naive", "seasonal_ma")]
    state = {"version": 1, "kind": "ensemble", "members": members}
    frame = refresh(state, y)  # the hourly refresh: its origin is one hour past the history
    parts = [refresh(member, y) for member in members]
    assert frame["ds"].iloc[0] == y.index[-1] + pd.Timedelta(hours=1)
    for column in ("yhat", *QUANTILE_COLUMNS):
        np.testing.assert_allclose(frame[column], np.median([p[column] for p in parts], axis=0))
    inside = refresh_many(state, y, y.index[-48:-24])
    assert inside["yhat"].shape == (24, 24)
