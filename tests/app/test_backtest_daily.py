"""The backtest's ``daily`` rows: each night's published expected fleet beside what the
replayed deployment ran, for band auto and for an explicit band (measured as the live plan
measures it: its own plans replayed once over the calibration window)."""

from __future__ import annotations

import numpy as np
import pytest

from app.plans import PlanParams
from app.plans.replay import ReplayOptions, SeriesInputs, replay_series
from app.plans.text import backtest_lines
from tests.app.test_replay_no_lookahead import FAST, PROFILE, _history


def _replay(band: str) -> dict:
    inputs = SeriesInputs(series="svc", history=_history(), events=(), profile=PROFILE)
    return replay_series(
        inputs,
        params=PlanParams(band=band),
        options=ReplayOptions(days=4, models=FAST),
    )


@pytest.mark.parametrize("band", ["auto", "hi_80", "yhat"])
def test_every_band_publishes_an_expected_fleet_to_compare_with_what_ran(band: str) -> None:
    result = _replay(band)
    daily, accuracy = result["daily"], result["expected_fleet_accuracy"]
    measured = [row for row in daily if row["expected_gpu_hours"] is not None]
    assert len(measured) >= 3, daily
    assert accuracy is not None and accuracy["days"] == len(measured)
    for row in measured:
        # the expected fleet is never below the floor it was published with
        assert row["expected_gpu_hours"] >= row["floor_gpu_hours"] - 1e-6
        assert row["expected_gpu_hours_p90"] >= row["expected_gpu_hours"] - 1e-6
        assert row["executed_gpu_hours"] > 0
    errors = [
        abs(r["expected_gpu_hours"] - r["executed_gpu_hours"]) / r["executed_gpu_hours"]
        for r in measured
    ]
    assert accuracy["median_abs_error_share"] == pytest.approx(float(np.median(errors)))
    # a smooth daily shape: what each night published is close to what then ran
    assert accuracy["median_abs_error_share"] < 0.25, daily


def test_an_explicit_bands_nights_keep_their_band_and_carry_its_measurement() -> None:
    nights = _replay("hi_80")["gpucast_plans"]
    assert nights and all(n["band"] == "hi_80" and n["headroom"] is None for n in nights)
    calibrated = [n for n in nights if n["calibration"] is not None]
    assert calibrated, nights
    for night in calibrated:
        assert night["calibration"]["band"] == "hi_80"
        assert night["calibration"]["fleet_ratios"] is not None


@pytest.mark.parametrize(
    ("band", "heading"),
    [
        ("auto", "band auto, chosen each night from the previous days' replay:"),
        ("hi_80", "hi_80, measured each night on the previous days' replay of its own plans:"),
    ],
)
def test_the_text_says_what_each_nights_replay_was_for(band: str, heading: str) -> None:
    lines = backtest_lines(_replay(band))
    assert f"  {heading}" in lines
    assert any(
        line.startswith("  expected fleet as published each night vs what ran") for line in lines
    )
    other = "hi_80, measured" if band == "auto" else "band auto, chosen"
    assert not any(other in line for line in lines)
