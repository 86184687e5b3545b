"""Shared fixtures: deterministic hourly series and a fake forecaster with known errors."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from forecasting.models.base import Forecaster

START = pd.Timestamp("2026-01-05", tz="UTC")  # a Monday


def hourly(values, start: pd.Timestamp = START) -> pd.Series:
    values = np.asarray(values, dtype=float)
    return pd.Series(values, index=pd.date_range(start, periods=len(values), freq="h"))


def daily_pattern(
    days: int, *, base: float = 100.0, amplitude: float = 40.0, noise: float = 0.0, seed: int = 0
) -> pd.Series:
    t = np.arange(days * 24)
    values = base + amplitude * np.sin(2 * np.pi * t / 24)
    if noise:
        values = values + np.random.default_rng(seed).normal(0, noise, len(t))
    return hourly(np.clip(values, 0, None))


class ConstantFake(Forecaster):
    """Forecasts ``level`` for every hour with bands ``± width``; counts its fits."""

    name = "fake"
    complexity = 50
    fits: ClassVar[list[int]] = []

    def __init__(
        self, *, level: float = 0.0, width: float = 1.0, fail: bool = False, need: int = 1
    ) -> None:
        self.level = level
        self.width = width
        self.fail = fail
        self.need = need
        self.warm_from_: Forecaster | None = None

    def min_history(self) -> int:
        return self.need

    def warm_start(self, previous: Forecaster, *, refit: bool = False) -> None:
        self.warm_from_ = previous

    def _fit(self, values, index, events) -> None:
        if self.fail:
            raise ArithmeticError("fake model diverged")
        ConstantFake.fits.append(len(values))

    def _predict(self, horizon, ds):
        yhat = np.full(horizon, self.level)
        bands = {
            80: (yhat - self.width, yhat + self.width),
            95: (yhat - 2 * self.width, yhat + 2 * self.width),
        }
        return yhat, bands


def fake(**kwargs):
    """A factory for ``ConstantFake`` with fixed hyperparameters (and a complexity rank)."""
    complexity = kwargs.pop("complexity", 50)

    def factory() -> ConstantFake:
        return ConstantFake(**kwargs)

    factory.complexity = complexity
    return factory


@pytest.fixture(autouse=True)
def _reset_fake_fits():
    ConstantFake.fits.clear()
    yield
