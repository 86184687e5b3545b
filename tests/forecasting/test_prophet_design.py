"""Prophet's inputs and forecast built with numpy (:mod:`forecasting.models._prophet_design`)
against Prophet's own pipeline: the same Stan data, the same parameters (with Prophet's Stan
optimiser, ``optimiser="stan"``), the same forecast."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.models.prophet import ProphetModel, event_columns

from .conftest import START, hourly


def _weekly_traffic(days: int, *, seed: int, trend: float = 0.3) -> pd.Series:
    t = np.arange(days * 24)
    rng = np.random.default_rng(seed)
    daily = 1 + 0.6 * np.cos(2 * np.pi * (t % 24 - 15) / 24)
    weekly = np.where((t // 24) % 7 >= 5, 0.7, 1.0)
    level = 1000 * (1 + trend * t / len(t))
    return hourly(level * daily * weekly * rng.lognormal(0, 0.05, len(t)))


def _events(y: pd.Series) -> pd.DataFrame:
    starts = [START + pd.Timedelta(days=d, hours=12) for d in (3, 8, 13, 20)]
    ends = [s + pd.Timedelta(hours=3) for s in starts]
    return pd.DataFrame({"name": "promo", "start": starts, "end": ends})


def _prophet_fit(model: ProphetModel, y: pd.Series, events: pd.DataFrame | None):
    """Prophet itself, configured and fitted on what ``model`` was fitted on."""
    values, index = y.to_numpy()[-model.max_history :], y.index[-model.max_history :]
    flags = event_columns(index, events)
    flags = flags.loc[:, flags.sum() > 0]
    reference = model.reference(values, flags)
    history = pd.concat([pd.DataFrame({"ds": index.tz_localize(None), "y": values}), flags], axis=1)
    inputs = reference.preprocess(history.copy())
    reference.history = None
    reference.fit(history)
    return reference, inputs, values, index, flags


@pytest.mark.parametrize("mode", ["additive", "multiplicative"])
@pytest.mark.parametrize("with_events", [False, True])
def test_inputs_parameters_and_forecast_equal_prophets(mode: str, with_events: bool) -> None:
    y = _weekly_traffic(24, seed=1)
    events = _events(y) if with_events else None
    model = ProphetModel(seasonality_mode=mode, optimiser="stan").fit(y, events=events)
    reference, inputs, values, index, flags = _prophet_fit(model, y, events)

    from forecasting.models._prophet_design import nanoseconds

    data, init = model.design_.stan_inputs(nanoseconds(index), values, flags.to_numpy(float))
    assert data["K"] == inputs.K == (20 + 10 + (1 if with_events else 0))
    assert (data["T"], data["S"], data["tau"]) == (inputs.T, inputs.S, inputs.tau)
    np.testing.assert_array_equal(data["y"], inputs.y.to_numpy())
    np.testing.assert_array_equal(data["t"], inputs.t.to_numpy())
    np.testing.assert_array_equal(data["t_change"], inputs.t_change)
    np.testing.assert_array_equal(data["X"], inputs.X.to_numpy())
    assert data["sigmas"] == list(inputs.sigmas)
    np.testing.assert_array_equal(data["s_a"], inputs.s_a.to_numpy())
    np.testing.assert_array_equal(data["s_m"], inputs.s_m.to_numpy())
    for name in ("k", "m", "delta", "beta", "sigma_obs"):
        np.testing.assert_array_equal(model.params_[name], reference.params[name])

    for horizon in (24, 72, 100):  # served from the fit, and evaluated beyond its hours
        served = model.predict(horizon)
        ds = pd.DatetimeIndex(served["ds"]).tz_convert("UTC")
        theirs = reference.predict(model._future(ds))["yhat"].clip(lower=0).to_numpy()
        np.testing.assert_allclose(served["yhat"].to_numpy(), theirs, rtol=1e-12)


def test_a_short_history_has_no_weekly_terms_like_prophet() -> None:
    y = _weekly_traffic(10, seed=2)
    model = ProphetModel(optimiser="stan").fit(y)
    reference, *_ = _prophet_fit(model, y, None)
    assert list(reference.seasonalities) == ["daily"]
    assert [s[0] for s in model.design_.seasonalities] == [1.0]
    for name in ("k", "m", "delta", "beta", "sigma_obs"):
        np.testing.assert_array_equal(model.params_[name], reference.params[name])


def test_a_constant_history_takes_prophets_shortcut() -> None:
    y = hourly(np.full(24 * 5, 7.0))
    model = ProphetModel().fit(y)
    reference, *_ = _prophet_fit(model, y, None)
    for name in ("k", "m", "delta", "beta", "sigma_obs"):
        np.testing.assert_array_equal(model.params_[name], reference.params[name])
    np.testing.assert_allclose(model.predict(24)["yhat"], 7.0)
