from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting import (
    EmptySeriesError,
    InvalidSeriesError,
    clean_history,
    detect_anomalies,
)

from .conftest import daily_pattern, hourly


def test_gaps_become_missing_and_are_filled() -> None:
    y = daily_pattern(7)
    holey = y.drop(y.index[[50, 51, 100, 101, 102, 103, 104, 105]])
    clean = clean_history(holey)
    assert len(clean.y) == len(y) and not clean.y.isna().any()
    assert clean.observed.isna().sum() == 8
    # short gap: linear interpolation; long gap: same hour on the neighbouring days
    assert clean.y.iloc[50] == pytest.approx(y.iloc[49] + (y.iloc[52] - y.iloc[49]) / 3)
    assert clean.y.iloc[100:106].to_numpy() == pytest.approx(y.iloc[100:106].to_numpy())
    assert "8 missing hour(s) in 2 gap(s)" in clean.notes[0]


def test_zero_run_with_load_on_neighbouring_days_is_an_outage() -> None:
    values = daily_pattern(7).to_numpy()
    values[80:85] = 0.0
    clean = clean_history(hourly(values))
    assert clean.observed.iloc[80:85].isna().all()
    # longer than 3 h: filled from the same hours of the surrounding days
    assert clean.y.iloc[80:85].to_numpy() == pytest.approx(values[56:61])
    assert clean.anomalies.kind.tolist() == ["outage"] * 5
    assert any("look like collection outages" in note for note in clean.notes)


def test_idle_night_zeros_are_demand() -> None:
    day = np.r_[np.zeros(6), np.full(18, 50.0)]
    clean = clean_history(hourly(np.tile(day, 7)))
    assert clean.anomalies.empty
    assert (clean.y.to_numpy() == np.tile(day, 7)).all()


def test_spike_is_flagged_and_replaced_for_fitting() -> None:
    values = daily_pattern(10, noise=2.0).to_numpy()
    values[130] += 400.0
    clean = clean_history(hourly(values))
    assert clean.anomalies.ds.tolist() == [hourly(values).index[130]]
    assert clean.anomalies.kind.iloc[0] == "spike"
    assert clean.observed.iloc[130] == values[130]  # scoring keeps what really happened
    assert abs(clean.y.iloc[130] - (values[130] - 400.0)) < 10.0
    assert detect_anomalies(hourly(values)).equals(clean.anomalies)


def test_spikes_inside_events_are_not_flagged() -> None:
    y = daily_pattern(10, noise=2.0)
    values = y.to_numpy().copy()
    values[130] += 400.0
    events = pd.DataFrame({"name": ["launch"], "start": [y.index[130]], "end": [y.index[131]]})
    assert detect_anomalies(hourly(values), events=events).empty


def test_negative_values_are_rejected() -> None:
    with pytest.raises(InvalidSeriesError, match="1 negative value.*load cannot be negative"):
        clean_history(hourly([1.0, -2.0, 3.0]))


def test_duplicates_and_non_hourly_stamps_are_rejected() -> None:
    index = pd.DatetimeIndex(["2026-01-01 00:00", "2026-01-01 00:00"], tz="UTC")
    with pytest.raises(InvalidSeriesError, match="duplicate hour"):
        clean_history(pd.Series([1.0, 2.0], index=index))
    index = pd.DatetimeIndex(["2026-01-01 00:30"], tz="UTC")
    with pytest.raises(InvalidSeriesError, match="whole hours"):
        clean_history(pd.Series([1.0], index=index))
    with pytest.raises(InvalidSeriesError, match="DatetimeIndex"):
        clean_history(pd.Series([1.0, 2.0]))


def test_all_nan_is_empty() -> None:
    with pytest.raises(EmptySeriesError, match="no finite observation"):
        clean_history(hourly([np.nan, np.nan]))


def test_naive_and_unsorted_input_is_noted_not_mutated() -> None:
    y = daily_pattern(2)
    shuffled = y.tz_localize(None).iloc[::-1]
    original = shuffled.copy()
    clean = clean_history(shuffled)
    assert str(clean.y.index.tz) == "UTC" and clean.y.index.is_monotonic_increasing
    assert "taken as UTC" in clean.notes[0] and "sorted" in clean.notes[1]
    pd.testing.assert_series_equal(shuffled, original)


def test_a_jump_in_the_last_day_is_kept_as_a_possible_new_level() -> None:
    values = daily_pattern(10, noise=2.0).to_numpy()
    values[-5:] += 400.0
    clean = clean_history(hourly(values))
    assert clean.anomalies.empty
    assert clean.y.iloc[-5:].to_numpy() == pytest.approx(values[-5:])
