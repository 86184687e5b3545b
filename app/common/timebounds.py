"""The one range of date-times gpucast accepts: in the API, on the command line, in every ingest.

A date-time is accepted when it is written with a year from 1970 to 2099 (naive values are
UTC). The rule is on the year as written, so the OpenAPI schema can state it exactly
(:data:`DATETIME_PATTERN`); every such value converts to UTC without overflow and lies far
inside what pandas (1677 .. 2262), PostgreSQL and SQLite hold. Observations are stricter still:
on or after 1970-01-01T00:00Z and at most a year ahead (``app.ingest.timestamps``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from app.errors import InputError

__all__ = [
    "DATETIME_PATTERN",
    "FIRST_YEAR",
    "LAST_YEAR",
    "RANGE_TEXT",
    "check_datetime",
    "check_query_bound",
    "in_range",
    "outside_utc",
    "parse_datetime",
]

FIRST_YEAR = 1970
LAST_YEAR = 2099
RANGE_TEXT = f"use a year from {FIRST_YEAR} to {LAST_YEAR}"
FIRST_UTC = pd.Timestamp("1970-01-01", tz="UTC")
END_UTC = pd.Timestamp("2100-01-01", tz="UTC")
# Years 1970 .. 2099 at the start of an ISO 8601 date-time (with ``format: date-time``).
DATETIME_PATTERN = r"^(19[7-9][0-9]|20[0-9][0-9])-"


def outside_utc(stamps: pd.Series) -> np.ndarray:
    """Where parsed file timestamps (aware, any unit) fall outside 1970-01-01 .. 2100-01-01
    UTC: files are checked on the instant, as every row is converted to UTC when read."""
    return ((stamps < FIRST_UTC) | (stamps >= END_UTC)).to_numpy(dtype=bool)


def in_range(value: datetime) -> bool:
    """Whether ``value`` (as written, naive or aware) has a year gpucast accepts."""
    return FIRST_YEAR <= value.year <= LAST_YEAR


def check_datetime(value: datetime, *, what: str) -> datetime:
    """``value`` as an aware UTC datetime (naive is UTC), or an :class:`InputError`."""
    if not in_range(value):
        raise InputError(f"{what} {value.isoformat()} is outside the supported range: {RANGE_TEXT}")
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def parse_datetime(text: str, *, what: str) -> datetime:
    """ISO 8601 text (``Z`` or an offset; naive is UTC) as an aware UTC datetime in range."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise InputError(
            f"{what} {text[:60]!r} is not an ISO 8601 date-time such as 2026-11-30T00:00:00Z"
        ) from exc
    return check_datetime(moment, what=what)


def check_query_bound(value: datetime | None, *, what: str) -> datetime | None:
    """A ``start``/``end`` query parameter: it must carry a UTC offset and lie in range."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise InputError(f"{what} must include a UTC offset, e.g. 2026-11-30T00:00:00Z")
    return check_datetime(value, what=what)


def pydantic_check(value: Any) -> Any:
    """For pydantic ``AfterValidator``: a ``ValueError`` (a 422 naming the field) when out of
    range; the value unchanged otherwise (naive ones too: each field has its rule for them)."""
    if isinstance(value, datetime) and not in_range(value):
        raise ValueError(f"{value.isoformat()} is outside the supported range: {RANGE_TEXT}")
    return value


def pydantic_utc(value: Any) -> Any:
    """:func:`pydantic_check`, then aware values converted to UTC (what is stored)."""
    value = pydantic_check(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    return value
