from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.intervals import apply_factors, conformal_factors, residual_bands


def test_residual_bands_use_empirical_quantiles_and_scale() -> None:
    residuals = np.arange(-50.0, 51.0)  # 101 values, 10 % quantile = -40
    bands = residual_bands(np.array([100.0, 100.0]), residuals, np.array([1.0, 2.0]))
    lo, hi = bands[80]
    assert lo == pytest.approx([60.0, 20.0])
    assert hi == pytest.approx([140.0, 180.0])


def test_conformal_factor_widens_too_narrow_bands() -> None:
    n = 40
    errors = np.tile([1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0, 9.0, -10.0], n // 10)
    frame = pd.DataFrame(
        {
            "y": 100 + errors,
            "yhat": 100.0,
            "lo_80": 99.0,
            "hi_80": 101.0,
            "lo_95": 98.0,
            "hi_95": 102.0,
        }
    )
    factors = conformal_factors(frame, margin=0.0)
    # |error| / half-width 1: the ceil(41*0.8)/40 = 0.825 quantile of 1..10 (each x4) is 9
    assert factors[80] == pytest.approx(9.0)
    # default margin 0.5 aims at 90 %: the ceil(41*0.9)/40 = 0.925 quantile is 10
    assert conformal_factors(frame)[80] == pytest.approx(10.0)
    scaled = apply_factors(frame.head(1), factors)
    assert scaled.loc[0, "hi_80"] == pytest.approx(109.0)
    assert scaled.loc[0, "lo_80"] == pytest.approx(91.0)


def test_too_few_points_give_no_calibration() -> None:
    frame = pd.DataFrame(
        {"y": [1.0] * 5, "yhat": 1.0, "lo_80": 0.0, "hi_80": 2.0, "lo_95": 0.0, "hi_95": 3.0}
    )
    assert conformal_factors(frame) is None
