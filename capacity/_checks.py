"""Parameter checks shared by the capacity modules; messages name the parameter and the fix."""

from __future__ import annotations

import math

from capacity.errors import InvalidParameterError


def require_finite(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"{name} must be a number, got {value!r}") from exc
    if not math.isfinite(number):
        raise InvalidParameterError(f"{name} must be a finite number, got {value!r}")
    return number


def require_positive(name: str, value: float) -> float:
    number = require_finite(name, value)
    if number <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {value!r}")
    return number


def require_non_negative(name: str, value: float) -> float:
    number = require_finite(name, value)
    if number < 0:
        raise InvalidParameterError(f"{name} must be >= 0, got {value!r}")
    return number


def require_fraction(name: str, value: float, *, allow_zero: bool = False) -> float:
    """A share in (0, 1] (or [0, 1] when allow_zero)."""
    number = require_finite(name, value)
    low_ok = number >= 0 if allow_zero else number > 0
    if not low_ok or number > 1:
        bound = "[0, 1]" if allow_zero else "(0, 1]"
        raise InvalidParameterError(f"{name} must be in {bound}, got {value!r}")
    return number


def require_int(name: str, value: int, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise InvalidParameterError(f"{name} must be a whole number, got {value!r}")
    if int(value) < minimum:
        raise InvalidParameterError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)
