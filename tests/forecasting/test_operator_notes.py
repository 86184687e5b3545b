"""A forecast's notes are for operators: library warnings are translated when they matter and
otherwise kept out of the notes (in the debug log)."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from forecasting._quiet import operator_notes
from forecasting.models.arima import Arima

INTERPOLATION = (
    "InterpolationWarning: The test statistic is outside of the range of p-values available "
    "in the\nlook-up table. The actual p-value is greater than the p-value returned.\n"
)


def trending(hours: int = 24 * 21) -> pd.Series:
    index = pd.date_range("2026-01-01", periods=hours, freq="h", tz="UTC")
    t = np.arange(hours)
    noise = np.random.default_rng(0).normal(0, 3, hours)
    return pd.Series(100 + 5 * t + 30 * np.sin(2 * np.pi * t / 24) + noise, index=index)


def test_a_real_arima_fit_notes_no_raw_library_text(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="forecasting"):
        model = Arima().fit(trending())
    assert not any("Warning" in note or "look-up table" in note for note in model.notes_)
    assert "InterpolationWarning" in caplog.text  # still there for whoever debugs the fit


def test_what_matters_is_said_in_plain_words_once() -> None:
    lines = [
        INTERPOLATION,
        "ConvergenceWarning: Maximum Likelihood optimization failed to converge. Check mle_retvals",
        "ConvergenceWarning: Maximum Likelihood optimization failed to converge. Check mle_retvals",
        "UserWarning: Non-stationary starting autoregressive parameters found. Using zeros.",
        "cmdstanpy: Optimization terminated abnormally. Falling back to Newton.",
    ]
    assert operator_notes("arima", lines) == [
        "arima: the fit did not fully converge; its intervals may be less reliable (2 times)",
        "arima: the optimiser stopped early; the fit may be poorer than usual",
    ]


def test_unknown_library_text_stays_out_of_the_notes() -> None:
    assert operator_notes("prophet", ["cmdstanpy: Chain [1] start processing"]) == []
