from __future__ import annotations

import numpy as np
import pytest

from forecasting import ModelFitError
from forecasting.models import Arima

from .conftest import hourly

RNG = np.random.default_rng(7)
T = np.arange(24 * 28)
DAILY = 100 + 30 * np.sin(2 * np.pi * T / 24)


def test_weekly_profile_is_used_only_when_strong() -> None:
    weekend = np.where((T // 24) % 7 >= 5, -40.0, 0.0)
    strong = Arima().fit(
        hourly(
            DAILY + weekend + RNG.normal(0, 2, len(T)),
        )
    )
    assert np.ptp(strong.weekly_profile_) > 30
    flat = Arima().fit(hourly(DAILY + RNG.normal(0, 2, len(T))))
    assert not flat.weekly_profile_.any()


def test_weekly_profile_is_forecast_in_phase() -> None:
    weekend = np.where((T // 24) % 7 >= 5, -40.0, 0.0)
    model = Arima(log=False).fit(hourly(DAILY + weekend))
    frame = model.predict(24 * 7)
    future = np.arange(len(T), len(T) + 24 * 7)
    truth = 100 + 30 * np.sin(2 * np.pi * future / 24) + np.where((future // 24) % 7 >= 5, -40, 0)
    assert np.abs(frame.yhat.to_numpy() - truth).max() < 5.0


def test_log_scale_when_the_daily_swing_grows_with_the_level() -> None:
    level = np.linspace(50, 200, len(T))
    growing = level * (1 + 0.5 * np.sin(2 * np.pi * T / 24))
    assert Arima().fit(hourly(growing + RNG.normal(0, 1, len(T)))).log_ is True
    assert Arima().fit(hourly(DAILY + RNG.normal(0, 1, len(T)))).log_ is False


def test_warm_start_reuses_the_previous_parameters() -> None:
    y = hourly(DAILY + RNG.normal(0, 3, len(T)))
    first = Arima(log=False, weekly=False).fit(y.iloc[:-24])
    second = Arima(log=False, weekly=False)
    second.warm_start(first)
    assert second._start[first.order_] == pytest.approx(np.asarray(first.result_.params))
    second.fit(y)
    assert second.order_ == first.order_


def test_no_fittable_order_raises(monkeypatch) -> None:
    def refuse(self, z, order, errors):
        errors.append(f"{order}: singular")
        return None

    monkeypatch.setattr(Arima, "_fit_order", refuse)
    with pytest.raises(ModelFitError, match=r"no order could be fitted \(\(1, \d, 1\): singular"):
        Arima().fit(hourly(DAILY))


def test_arima_runs_blas_single_threaded() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from forecasting.models.arima import one_blas_thread

    with one_blas_thread():
        blas = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
        assert blas and all(i["num_threads"] == 1 for i in blas)
