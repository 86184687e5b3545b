"""One converter for every number a user gives (Grafana payload values, CLI flags): parsed,
finite and within the caller's range, or an :class:`~app.errors.InputError` that names it.

Python's ``int`` has no bound and JSON carries any integer, so ``float(10**400)`` raises
``OverflowError`` and ``float("1e400")`` is ``inf``; both are a user's input, never a 500.
"""

from __future__ import annotations

import math
from typing import Any

from app.errors import InputError

__all__ = ["MAX_MAGNITUDE", "bounded_number"]

# Beyond any count, rate, price or duration gpucast plans with; float64 holds it exactly.
MAX_MAGNITUDE = 1e15


def bounded_number(
    value: Any,
    *,
    what: str,
    low: float = -MAX_MAGNITUDE,
    high: float = MAX_MAGNITUDE,
    whole: bool = False,
    error: type[InputError] = InputError,
) -> float | int:
    """``value`` (a number or its text) as a float in [low, high] (an int when ``whole``).

    Booleans are refused (``True`` is no count); text is stripped; ``2.0`` is whole, ``2.5``
    is not. Every failure raises ``error`` with ``what`` and the allowed range.
    """
    shown = _shown(value)
    noun = "a whole number" if whole else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise error(f"{what} must be {noun}, got {shown}")
    if isinstance(value, int):
        number = (
            float(value) if abs(value) <= MAX_MAGNITUDE else (math.inf if value > 0 else -math.inf)
        )
    else:
        try:
            number = float(value)
        except (ValueError, OverflowError):
            raise error(f"{what} must be {noun}, got {shown}") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise error(f"{what} must be between {low:g} and {high:g}, got {shown}")
    if whole:
        if not number.is_integer():
            raise error(f"{what} must be a whole number, got {shown}")
        return int(number)
    return number


def _shown(value: Any) -> str:
    from app.common.names import echo

    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_MAGNITUDE:
        # str() of a huge int is slow, and refused beyond 4,300 digits
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    return echo(value, 40)
