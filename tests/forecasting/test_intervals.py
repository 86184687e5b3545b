from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.intervals import (
    FACTOR_CAP,
    FACTOR_FLOOR,
    MIN_HALF_WIDTH,
    apply_factors,
    conformal_factors,
    residual_bands,
)


def test_residual_bands_use_empirical_quantiles_and_scale() -> None:
    residuals = np.arange(-50.0, 51.0)  # 101 values, 10 % quantile = -40
    bands = residual_bands(np.array([100.0, 100.0]), residuals, np.array([1.0, 2.0]))
    lo, hi = bands[80]
    assert lo == pytest.approx([60.0, 20.0])
    assert hi == pytest.approx([140.0, 180.0])


def test_conformal_factor_rescales_bands_to_the_nominal_level() -> None:
    n = 40
    errors = np.tile([1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0, 9.0, -10.0], n // 10)
    frame = pd.DataFrame(
        {
            "y": 100 + errors,
            "yhat": 100.0,
            "lo_80": 90.0,
            "hi_80": 110.0,
            "lo_95": 80.0,
            "hi_95": 120.0,
        }
    )
    factors = conformal_factors(frame, margin=0.0)
    # |error| / half-width 10: the ceil(41*0.8)/40 = 0.825 quantile of 0.1..1 (each x4) is 0.9
    assert factors[80] == pytest.approx(0.9)
    # no margin by default: the nominal level; a margin of 0.5 aims at 90 %, the
    # ceil(41*0.9)/40 = 0.925 quantile, 1.0
    assert conformal_factors(frame)[80] == pytest.approx(0.9)
    assert conformal_factors(frame, margin=0.5)[80] == pytest.approx(1.0)
    scaled = apply_factors(frame.head(1), factors)
    assert scaled.loc[0, "hi_80"] == pytest.approx(109.0)
    assert scaled.loc[0, "lo_80"] == pytest.approx(91.0)


def _frame(errors: np.ndarray, half_width: float, level: float = 100.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "y": np.clip(level + errors, 0.0, None),
            "yhat": level,
            "lo_80": level - half_width,
            "hi_80": level + half_width,
            "lo_95": level - 1.5 * half_width,
            "hi_95": level + 1.5 * half_width,
        }
    )


def test_factors_widen_too_narrow_bands_up_to_the_cap() -> None:
    rng = np.random.default_rng(3)
    errors = rng.normal(0, 10, 200)
    factors = conformal_factors(_frame(errors, half_width=4.0))
    assert 2.0 < factors[80] < 5.0  # 80 % of |N(0, 10)| is within 12.8: about ×3.2
    # errors a thousand times the band: the factor stops at the cap
    assert conformal_factors(_frame(errors * 1000, half_width=4.0))[95] == FACTOR_CAP


@pytest.mark.parametrize("errors", [np.zeros(48), np.full(48, 1e-9)])
def test_a_noiseless_backtest_cannot_collapse_the_bands(errors) -> None:
    frame = _frame(errors, half_width=0.0)
    factors = conformal_factors(frame)
    assert factors == {80: FACTOR_FLOOR, 95: FACTOR_FLOOR}
    scaled = apply_factors(frame.head(1), factors)
    # the floor: 2 % (80 %) and 3 % (95 %) of the forecast, times the floored factor
    assert scaled.loc[0, "hi_80"] - 100 == pytest.approx(MIN_HALF_WIDTH[80] * 100 * FACTOR_FLOOR)
    assert scaled.loc[0, "hi_95"] - 100 == pytest.approx(MIN_HALF_WIDTH[95] * 100 * FACTOR_FLOOR)


def test_a_mostly_zero_series_gets_bounded_factors() -> None:
    # 80 % zero hours, forecast 0.2 with zero-width bands: ratios against the width floor
    y = np.where(np.arange(100) % 5 == 0, 1.0, 0.0)
    frame = pd.DataFrame(
        {"y": y, "yhat": 0.2, "lo_80": 0.2, "hi_80": 0.2, "lo_95": 0.2, "hi_95": 0.2}
    )
    factors = conformal_factors(frame)
    assert all(FACTOR_FLOOR <= f <= FACTOR_CAP for f in factors.values())


def test_too_few_points_give_no_calibration() -> None:
    frame = pd.DataFrame(
        {"y": [1.0] * 5, "yhat": 1.0, "lo_80": 0.0, "hi_80": 2.0, "lo_95": 0.0, "hi_95": 3.0}
    )
    assert conformal_factors(frame) is None


def _folds(errors: np.ndarray, folds: int, half_width: float = 10.0) -> pd.DataFrame:
    """A backtest frame whose points are spread over ``folds`` daily cutoffs."""
    frame = _frame(errors, half_width)
    frame["cutoff"] = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(
        np.arange(len(frame)) * folds // len(frame), unit="D"
    )
    return frame


def test_a_backtest_short_of_folds_gets_wider_factors() -> None:
    errors = np.random.default_rng(5).normal(0, 10, 72)
    full = conformal_factors(_folds(errors, 3), windows=3)
    short = conformal_factors(_folds(errors, 3), windows=5)
    assert full == conformal_factors(_folds(errors, 3))  # all folds asked for: no correction
    for level in (80, 95):
        assert short[level] > full[level]
    # three of five folds: the allowed miss rate is 3/5 of nominal, 12 % at the 80 % level
    ratio = np.abs(_folds(errors, 3)["y"] - 100.0) / 10.0
    n = len(ratio)
    expected = np.quantile(ratio, np.ceil((n + 1) * 0.88) / n, method="higher")
    assert short[80] == pytest.approx(expected)


def test_older_folds_inform_the_95_factor_only() -> None:
    rng = np.random.default_rng(6)
    recent = _folds(rng.normal(0, 10, 120), 5)
    older = _folds(rng.normal(0, 30, 240), 10)
    alone = conformal_factors(recent, windows=5)
    deep = conformal_factors(recent, windows=5, tail=older)
    assert deep[80] == alone[80]
    assert deep[95] > alone[95]
    # the older folds' ratios join the recent ones for the 95 % level
    both = pd.concat([recent, older])
    ratio = np.abs(both["y"] - 100.0) / 15.0
    expected = np.quantile(ratio, np.ceil((len(ratio) + 1) * 0.95) / len(ratio), method="higher")
    assert deep[95] == pytest.approx(expected)


def test_the_95_factor_is_never_below_the_80_factor() -> None:
    # errors all just outside the 80 % band and inside the 95 % one: the 95 % quantile of the
    # ratios alone would narrow the 95 % band below its raw width while the 80 % band widens
    errors = np.tile([12.0, -12.0], 50)
    factors = conformal_factors(_frame(errors, half_width=10.0))
    assert factors[80] == pytest.approx(1.2)
    assert factors[95] == pytest.approx(1.2)
    bands = apply_factors(_frame(errors, half_width=10.0).head(1), factors)
    assert bands.loc[0, "hi_95"] - 100 == pytest.approx(1.5 * (bands.loc[0, "hi_80"] - 100))
