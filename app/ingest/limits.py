"""Bounds on the numbers ingest stores, shared by every format and by :func:`app.ingest.store`.

Every hourly value (``requests``, the token counts and their total, ``peak_rps``) is finite,
non-negative and below :data:`MAX_HOURLY_VALUE` (1e15 per hour). That is far above any real
fleet (1e15 tokens an hour is ~280 billion tokens/s) and far below where the models' and the
plans' arithmetic on a few weeks of hours loses precision or overflows; the forecasting library
refuses histories from the same bound on.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.errors import IngestError

__all__ = ["MAX_HOURLY_VALUE", "LIMIT_TEXT", "check_frame", "too_large"]

MAX_HOURLY_VALUE = 1e15
LIMIT_TEXT = "is too large: hourly values must be below 1e15"
VALUE_COLUMNS = ("requests", "prompt_tokens", "completion_tokens", "total_tokens", "peak_rps")


def too_large(values: np.ndarray) -> np.ndarray:
    """Where ``values`` (float) reach the bound; NaN (a missing value) never does."""
    with np.errstate(invalid="ignore"):
        return np.abs(values) >= MAX_HOURLY_VALUE


def check_frame(frame: pd.DataFrame) -> None:
    """The last line of defence before a canonical frame is written: every value finite,
    non-negative and below the bound, and every hour with its requests. Parsers report a
    problem with its row and column first; this names the series and hour."""
    for column in VALUE_COLUMNS:
        values = frame[column].to_numpy(dtype="float64")
        problems = (
            (np.isnan(values) if column == "requests" else np.zeros(len(values), bool), "missing"),
            (np.isinf(values), "is not a finite number"),
            (values < 0, "is negative; counts must be >= 0"),
            (too_large(values), LIMIT_TEXT),
        )
        for mask, what in problems:
            if mask.any():
                pos = int(np.flatnonzero(mask)[0])
                hour = pd.Timestamp(frame["hour"].iloc[pos]).isoformat()
                shown = "" if what == "missing" else f"{values[pos]:g} "
                raise IngestError(
                    f"series {frame['series'].iloc[pos]!r}, hour {hour}: {column} {shown}{what}"
                )
