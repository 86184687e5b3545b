"""Peak-to-mean factors: learned per hour of day, robust, and fed into the conversion."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import capacity as cap
from tests.capacity.conftest import make_forecast


def _hours(days: int) -> pd.DatetimeIndex:
    return pd.date_range("2026-11-01", periods=24 * days, freq="h", tz="UTC")


def test_each_hour_of_day_gets_its_own_median_ratio() -> None:
    hours = _hours(7)
    mean = np.full(len(hours), 1000.0)
    peak = np.where(hours.hour == 9, 3000.0, 1200.0)
    peak[hours.hour == 9][0:1] = 9000.0  # one outlier among the 09:00 hours does not move it
    factors = cap.peak_factors(hours, mean, peak)
    assert factors.by_hour[9] == pytest.approx(3.0)
    assert factors.by_hour[3] == pytest.approx(1.2)
    assert factors.source == "peak_rps"
    assert factors.samples == len(hours)


def test_a_peak_below_the_mean_counts_as_flat_and_hours_without_peaks_borrow() -> None:
    hours = _hours(7)
    mean = np.full(len(hours), 100.0)
    peak = np.full(len(hours), 150.0)
    peak[hours.hour == 4] = 50.0  # below the mean: a measurement artefact, factor 1
    peak[hours.hour == 5] = np.nan  # no peak stored for 05:00: the all-hours quantile
    factors = cap.peak_factors(hours, mean, peak)
    assert factors.by_hour[4] == 1.0
    assert factors.by_hour[5] == pytest.approx(1.5)


def test_only_recent_days_count() -> None:
    hours = _hours(40)
    mean = np.full(len(hours), 100.0)
    peak = np.where(hours < hours[-1] - pd.Timedelta(days=28), 400.0, 200.0)
    assert cap.peak_factors(hours, mean, peak).by_hour[0] == pytest.approx(2.0)


def test_no_peak_information_keeps_factor_one_and_says_so() -> None:
    hours = _hours(2)
    factors = cap.peak_factors(hours, np.full(48, 10.0), np.full(48, np.nan))
    assert factors.by_hour == (1.0,) * 24
    assert factors.source == "none"
    assert "no peak information" in factors.note


def test_factors_from_a_finer_load_series() -> None:
    index = pd.date_range("2026-11-01", periods=6 * 24 * 3, freq="10min", tz="UTC")
    # every hour: five 10-minute windows at 100/s and one burst at 400/s -> mean 150, peak 400
    values = np.where(np.arange(len(index)) % 6 == 3, 400.0, 100.0)
    factors = cap.peak_factors_from_load(pd.Series(values, index=index))
    assert factors.source == "load"
    assert factors.by_hour[0] == pytest.approx(400 / 150)


def test_the_plan_sizes_the_busy_minutes_with_the_formula_unchanged() -> None:
    # 1,000 tokens/s mean with bursts of 3,000: the GPUs of 3,000 tokens/s
    forecast = make_forecast([1000 * 3600] * 3, spread=0.0)
    factors = cap.PeakFactors(
        by_hour=(3.0,) * 24, source="peak_rps", samples=24, quantile=0.5, days=28, note="x"
    )
    flat = cap.plan_gpus(forecast, per_gpu_tokens_per_s=1000)
    bursty = cap.plan_gpus(forecast, per_gpu_tokens_per_s=1000, peak_factors=factors)
    assert flat.frame["raw_gpus"].tolist() == [2, 2, 2]  # ceil(1000 / 750 * 1.2)
    assert bursty.frame["raw_gpus"].tolist() == [5, 5, 5]  # ceil(3000 / 750 * 1.2) = ceil(4.8)
    assert bursty.frame["peak_factor"].tolist() == [3.0, 3.0, 3.0]
    assert bursty.frame["sized_tokens_per_s"].tolist() == pytest.approx([3000.0] * 3)
    assert bursty.peak_factors is factors


def test_bad_inputs_are_named() -> None:
    hours = _hours(1)
    with pytest.raises(cap.InvalidParameterError, match="same length"):
        cap.peak_factors(hours, np.ones(3), np.ones(24))
    with pytest.raises(cap.InvalidParameterError, match=r"quantile must be in \(0, 1\]"):
        cap.peak_factors(hours, np.ones(24), np.ones(24), quantile=1.5)
    with pytest.raises(cap.InvalidParameterError, match="finite and >= 1"):
        cap.PeakFactors(
            by_hour=(0.5,) * 24, source="load", samples=1, quantile=0.5, days=1, note=""
        )
