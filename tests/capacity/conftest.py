"""Shared helpers for capacity tests: small forecast frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def make_forecast(yhat: list[float] | np.ndarray, *, spread: float = 0.1) -> pd.DataFrame:
    """A forecast frame (ds, yhat, lo/hi 80/95) with symmetric relative intervals, and the
    quantiles q50 … q99 at yhat x (1 + spread x 0, 0.5, 1, 1.5, 2, 2.5, 3)."""
    values = np.asarray(yhat, dtype=float)
    ds = pd.date_range("2026-12-02", periods=len(values), freq="h", tz="UTC")
    quantiles = {
        f"q{level}": values * (1 + spread * k / 2)
        for k, level in enumerate((50, 60, 70, 80, 90, 95, 99))
    }
    return pd.DataFrame(
        {
            "ds": ds,
            "yhat": values,
            "lo_80": values * (1 - spread),
            "hi_80": values * (1 + spread),
            "lo_95": values * (1 - 2 * spread),
            "hi_95": values * (1 + 2 * spread),
            **quantiles,
        }
    )


@pytest.fixture
def forecast_24h() -> pd.DataFrame:
    hours = np.arange(24)
    tokens_per_hour = 3600 * (20_000 + 15_000 * np.sin(np.pi * hours / 24))
    return make_forecast(tokens_per_hour)
