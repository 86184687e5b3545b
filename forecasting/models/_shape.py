"""Shape tests on an hourly history shared by several models (private)."""

from __future__ import annotations

import numpy as np

DAY = 24


def choose_seasonality_mode(values: np.ndarray) -> str:
    """``"multiplicative"`` when the daily swing scales with the daily level, else additive."""
    days = len(values) // DAY
    if days < 4:
        return "additive"
    block = values[len(values) - days * DAY :].reshape(days, DAY)
    means, stds = block.mean(axis=1), block.std(axis=1)
    if means.mean() <= 0 or np.ptp(stds) == 0 or np.ptp(means) == 0:
        return "additive"
    moving = means.std() / means.mean() > 0.10
    scaling = np.corrcoef(means, stds)[0, 1] > 0.5
    return "multiplicative" if moving and scaling else "additive"
