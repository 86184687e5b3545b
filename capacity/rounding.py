"""The one place where fractional GPU and replica counts become whole numbers.

Every count in gpucast.capacity goes through :func:`round_up_count`, so that the rule
"never provision less than the arithmetic asks for" lives in exactly one function.
"""

from __future__ import annotations

import math

import numpy as np

# Float noise such as 0.1 * 3 / 0.3 == 1.0000000000000002 must not buy an extra GPU:
# values are rounded to this many decimals before taking the ceiling.
_DECIMALS = 9


def round_up_count(value: float) -> int:
    """Smallest whole count >= value (values within 1e-9 of an integer count as that integer)."""
    return int(math.ceil(round(float(value), _DECIMALS)))


def round_up_counts(values: np.ndarray) -> np.ndarray:
    """Vectorised :func:`round_up_count` for an array of fractional counts; returns int64."""
    return np.ceil(np.round(np.asarray(values, dtype=float), _DECIMALS)).astype(np.int64)


def round_up_to_multiple(counts: np.ndarray, multiple: int) -> np.ndarray:
    """Round whole counts up to the next multiple (e.g. GPUs to whole replicas); returns int64."""
    counts = np.asarray(counts, dtype=np.int64)
    return -(-counts // multiple) * multiple
