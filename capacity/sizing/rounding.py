"""The one place where fractional GPU and replica counts become whole numbers.

Every count in gpucast.capacity goes through :func:`round_up_count`, so that the rule
"never provision less than the arithmetic asks for" lives in exactly one function.
"""

from __future__ import annotations

import math

import numpy as np

from capacity.errors import InvalidParameterError

# Float noise such as 0.1 * 3 / 0.3 == 1.0000000000000002 must not buy an extra GPU:
# values are rounded to this many decimals before taking the ceiling.
_DECIMALS = 9
# Above 2**53 float64 no longer holds every whole number; no real plan gets near it, and an
# infinite or NaN count (a utilization target or per-GPU rate near zero) must not be cast.
_MAX_COUNT = float(2**53)


_TOO_LARGE = (
    "the GPU count is not a finite number below 2**53: check the utilization target, "
    "the safety factor and the per-GPU rate"
)


def round_up_count(value: float) -> int:
    """Smallest whole count >= value (values within 1e-9 of an integer count as that integer)."""
    value = float(value)
    if not (math.isfinite(value) and abs(value) < _MAX_COUNT):
        raise InvalidParameterError(_TOO_LARGE)
    return int(math.ceil(round(value, _DECIMALS)))


def round_up_counts(values: np.ndarray) -> np.ndarray:
    """Vectorised :func:`round_up_count` for an array of fractional counts; returns int64."""
    array = np.asarray(values, dtype=float)
    if array.size and not (np.isfinite(array).all() and np.abs(array).max() < _MAX_COUNT):
        raise InvalidParameterError(_TOO_LARGE)
    return np.ceil(np.round(array, _DECIMALS)).astype(np.int64)


def round_up_to_multiple(counts: np.ndarray, multiple: int) -> np.ndarray:
    """Round whole counts up to the next multiple (e.g. GPUs to whole replicas); returns int64."""
    counts = np.asarray(counts, dtype=np.int64)
    return -(-counts // multiple) * multiple
