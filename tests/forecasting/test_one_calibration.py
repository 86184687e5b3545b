"""One calibrated distribution per forecast hour: the band ends are its 0.025/0.1/0.9/0.975
quantiles and the stored quantiles come from it, on nightly and refresh runs alike."""

from __future__ import annotations

import json

import numpy as np
import pytest

from forecasting import auto_forecast
from forecasting._calibrated import through_knots
from forecasting.refresh import QUANTILE_COLUMNS, refresh

from .test_refresh import servegen_tokens

BANDS = ("lo_95", "lo_80", "hi_80", "hi_95")


def _assert_one_distribution(frame) -> None:
    """hi_80 is q90 itself; the other band ends bracket the stored quantiles as q2.5, q10 and
    q97.5 must; every column is monotone in the level and non-negative."""
    np.testing.assert_array_equal(frame["hi_80"].to_numpy(), frame["q90"].to_numpy())
    ordered = frame[["lo_95", "lo_80", "q50", "q60", "q70", "q80", "q90", "q95", "hi_95", "q99"]]
    assert (ordered.to_numpy() >= 0).all()
    assert (np.diff(ordered.to_numpy(), axis=1) >= -1e-9).all()


@pytest.mark.parametrize("models", [["arima"], ["seasonal_ma"], None])
def test_the_nightly_bands_are_the_stored_quantiles_of_one_distribution(models) -> None:
    y = servegen_tokens().iloc[:240]
    result = auto_forecast(y, models=models)
    _assert_one_distribution(result.forecast)
    assert set(result.state["band_ratios"]) == set(BANDS)


@pytest.mark.parametrize("models", [["arima"], ["seasonal_ma"], None])
def test_a_refresh_keeps_the_nightly_calibration(models) -> None:
    y = servegen_tokens()
    result = auto_forecast(y.iloc[:240], models=models)
    state = json.loads(json.dumps(result.state))  # what the database stores
    at_origin = refresh(state, y.iloc[:240])
    later = refresh(state, y.iloc[:250])
    for frame in (at_origin, later):
        _assert_one_distribution(frame)
    # from the nightly's own origin the refresh bands are as wide in total as the nightly's
    # (lo_95 at most: where the widened band would cross zero it stops at zero)
    nightly = result.forecast
    for band in BANDS:
        wide = np.abs(nightly[band] - nightly["yhat"]).sum()
        again = np.abs(at_origin[band] - at_origin["yhat"]).sum()
        if band == "lo_95":
            assert wide * 0.95 <= again <= wide * 1.001
        else:
            assert again == pytest.approx(wide, rel=1e-3), band


def test_quantiles_map_through_the_band_ends_monotonely() -> None:
    # raw: a symmetric spread; calibrated bands twice as wide above, the same below
    raw = {"yhat": np.array([100.0]), "lo_95": np.array([80.0]), "lo_80": np.array([90.0])}
    raw |= {"hi_80": np.array([110.0]), "hi_95": np.array([120.0])}
    values = (100, 102, 105, 107, 110, 115, 130)
    raw |= {c: np.array([v]) for c, v in zip(QUANTILE_COLUMNS, values, strict=True)}
    knots = {"lo_95": np.array([80.0]), "lo_80": np.array([90.0])}
    knots |= {"hi_80": np.array([120.0]), "hi_95": np.array([140.0])}
    out = through_knots(raw, knots)
    for band in BANDS:
        assert out[band][0] == knots[band][0]
    assert out["q90"][0] == 120.0
    assert out["q50"][0] == pytest.approx(90 + (100 - 90) / 20 * 30)  # linear between q10, q90
    assert out["q95"][0] == pytest.approx(120 + (115 - 110) / 10 * 20)
    assert out["q99"][0] == pytest.approx(140 + (130 - 120) * 2)  # the q90 → q97.5 slope
