"""Timestamp parsing shared by the ingest formats: everything becomes UTC."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from app.errors import IngestError, InputError

EARLIEST = pd.Timestamp("1970-01-01", tz="UTC")
MAX_FUTURE = timedelta(days=366)
UNIT_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_ISO_YEAR = re.compile(r"\s*(\d{4})-\d{2}")


def describe_row(position: int, *, kind: str) -> str:
    """Human row reference: CSV rows count data rows (the header is line 1)."""
    if kind == "csv":
        return f"row {position + 1} (line {position + 2})"
    return f"record {position + 1}"


def parse_timestamps(
    raw: pd.Series,
    *,
    column: str,
    timezone: str | None,
    kind: str,
    row_offset: int = 0,
) -> pd.Series:
    """Parse ISO-8601-like strings into a UTC ``datetime64`` Series.

    Values with an offset are converted to UTC; naive values are taken as UTC, or as local time
    in ``timezone`` when given. A file mixing naive and offset values is rejected. Each distinct
    string is parsed once (files with many series repeat the same hours).
    """
    codes, uniques = pd.factorize(raw.astype(object), use_na_sentinel=True)
    values = np.asarray(uniques, dtype=str) if len(uniques) else np.array([], dtype=str)
    blank = np.char.str_len(np.char.strip(values)) == 0 if len(values) else np.array([], bool)
    missing = (codes == -1) | blank[np.maximum(codes, 0)] if len(values) else codes == -1
    if missing.any():
        _fail(pd.Series(missing), row_offset, kind, column, "missing timestamp")
    has_offset = _has_offset(values)
    if has_offset.any() and not has_offset.all():
        pos = int(np.flatnonzero(~has_offset[codes])[0])
        raise IngestError(
            f"{describe_row(pos + row_offset, kind=kind)}, column {column!r}: "
            f"{values[codes[pos]]!r} has no UTC offset while other rows do; use one convention"
        )
    aware = bool(has_offset.all())
    parsed = pd.Series(pd.to_datetime(values, utc=aware, format="ISO8601", errors="coerce"))
    if parsed.isna().any():
        pos = int(np.flatnonzero(parsed.isna().to_numpy()[codes])[0])
        text = str(values[codes[pos]])
        raise IngestError(
            f"{describe_row(pos + row_offset, kind=kind)}, column {column!r}: "
            f"{text[:60]!r} {_why_unparsed(text)}"
        )
    if aware:
        parsed = parsed.dt.tz_convert("UTC").dt.tz_localize(None)
    else:
        parsed = _localize_unique(
            parsed, codes, timezone=timezone, column=column, kind=kind, row_offset=row_offset
        )
    return pd.Series(parsed.to_numpy()[codes], index=raw.index).dt.tz_localize("UTC")


def _why_unparsed(text: str) -> str:
    """Out of range (years pandas cannot hold, such as 0001 or 9999) or not a timestamp."""
    # A valid ISO 8601 time once its year is replaced by 2000 was refused for its year only.
    year = _ISO_YEAR.match(text)
    probe = f"2000{text[year.end(1) :]}" if year else ""
    if not year or pd.isna(pd.to_datetime(probe, format="ISO8601", errors="coerce")):
        return "is not a valid timestamp (use ISO 8601, e.g. 2026-11-30T14:00:00Z)"
    if int(year[1]) < EARLIEST.year:
        return "is not a valid timestamp here: it is before 1970-01-01"
    return "is not a valid timestamp here: it is more than a year in the future"


def _localize_unique(
    parsed: pd.Series,
    codes: np.ndarray,
    *,
    timezone: str | None,
    column: str,
    kind: str,
    row_offset: int,
) -> pd.Series:
    """Localize the distinct naive values; return them as naive UTC (tz added by the caller).

    A local time that a daylight-saving change skips, or repeats, names no single hour: the
    row is rejected with the reason (see :func:`dst_problem`), never guessed.
    """
    if timezone is None:
        return parsed
    try:
        local = parsed.dt.tz_localize(timezone, ambiguous="NaT", nonexistent="NaT")
    except (pd.errors.OutOfBoundsDatetime, OverflowError, ValueError) as exc:
        raise IngestError(
            f"column {column!r}: cannot interpret times in time zone {timezone!r}: {exc}"
        ) from exc
    invalid = (local.isna() & parsed.notna()).to_numpy()
    if invalid.any():
        pos = int(np.flatnonzero(invalid[codes])[0])
        raise IngestError(
            f"{describe_row(pos + row_offset, kind=kind)}, column {column!r}: "
            f"{dst_problem(parsed.iloc[codes[pos]].to_pydatetime(), timezone)}"
        )
    return local.dt.tz_convert("UTC").dt.tz_localize(None)


def dst_problem(local: datetime, timezone: str) -> str:
    """Why the naive ``local`` time names no single instant in ``timezone`` (a DST change)."""
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(timezone)
    first, second = (local.replace(tzinfo=zone, fold=fold) for fold in (0, 1))
    shown = f"{local:%Y-%m-%d %H:%M}"
    round_trip = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    if round_trip != local:
        return (
            f"{shown} does not exist in {timezone}: the clocks skip it when daylight saving "
            "time starts; give the timestamps with their UTC offset (or in UTC)"
        )
    offsets = " or ".join(_offset(moment) for moment in (first, second))
    return (
        f"{shown} occurs twice in {timezone} (UTC{offsets}): the clocks repeat it when "
        "daylight saving time ends; give the timestamps with their UTC offset (or in UTC)"
    )


def _offset(moment: datetime) -> str:
    seconds = int(moment.utcoffset().total_seconds())  # type: ignore[union-attr]
    sign, seconds = ("-" if seconds < 0 else "+"), abs(seconds)
    return f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"


def _has_offset(values: np.ndarray) -> np.ndarray:
    """True where an ISO 8601 string ends in ``Z`` or carries a ``±HH[:MM]`` offset.

    Vectorised over a character matrix: after the 10-character date part a ``+`` or ``-`` can
    only be an offset sign, since time-of-day fields contain neither.
    """
    width = values.dtype.itemsize // 4
    if width == 0 or len(values) == 0:
        return np.zeros(len(values), dtype=bool)
    chars = values.view("U1").reshape(len(values), width)
    lengths = np.char.str_len(values)
    last = chars[np.arange(len(values)), np.maximum(lengths - 1, 0)]
    tail = chars[:, 10:]
    signed = ((tail == "+") | (tail == "-")).any(axis=1) if tail.shape[1] else False
    return (last == "Z") | (last == "z") | signed


def validate_timezone(name: str | None) -> str | None:
    """``name`` if it is an IANA time zone (or None), else an :class:`InputError`."""
    if name is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
        # and one pandas converts to: its time zones come from pytz, which leaves out the
        # tz database's posix/, right/, Factory and localtime entries that ZoneInfo reads
        pd.Timestamp(0, tz="UTC").tz_convert(name)
    except (ZoneInfoNotFoundError, ValueError, KeyError) as exc:
        raise InputError(
            f"unknown time zone {name!r}; use an IANA name like Europe/Berlin"
        ) from exc
    return name


def numeric_to_utc(values: pd.Series, *, unit: str, origin: datetime | None) -> pd.Series:
    """Numbers to UTC timestamps: offsets from ``origin`` or, without one, Unix epoch."""
    seconds = values.to_numpy(dtype="float64") * UNIT_SECONDS[unit]
    base = pd.Timestamp(origin) if origin is not None else EARLIEST
    if base.tzinfo is None:
        base = base.tz_localize("UTC")
    nanos = np.round(seconds * 1e9).astype("int64")
    return pd.Series(base + pd.to_timedelta(nanos, unit="ns"), index=values.index)


def check_range(
    stamps: pd.Series, *, column: str, kind: str, row_offset: int = 0, now: datetime | None = None
) -> None:
    """Reject timestamps before 1970 or more than a year in the future."""
    latest = pd.Timestamp(now or datetime.now(UTC)) + MAX_FUTURE
    early = stamps < EARLIEST
    if early.any():
        _fail(early, row_offset, kind, column, "is before 1970-01-01", stamps)
    late = stamps > latest
    if late.any():
        _fail(late, row_offset, kind, column, "is more than a year in the future", stamps)


def _fail_unparsed(
    parsed: pd.Series, text: pd.Series, row_offset: int, kind: str, column: str
) -> None:
    bad = parsed.isna()
    if bad.any():
        pos = int(np.flatnonzero(bad.to_numpy(dtype=bool))[0])
        raise IngestError(
            f"{describe_row(pos + row_offset, kind=kind)}, column {column!r}: "
            f"{str(text.iloc[pos])[:60]!r} is not a valid timestamp (use ISO 8601, "
            "e.g. 2026-11-30T14:00:00Z)"
        )


def _fail(
    mask: pd.Series,
    row_offset: int,
    kind: str,
    column: str,
    what: str,
    values: pd.Series | None = None,
) -> None:
    pos = int(np.flatnonzero(mask.to_numpy(dtype=bool))[0])
    shown = "" if values is None else f"{values.iloc[pos].isoformat()} "
    raise IngestError(
        f"{describe_row(pos + row_offset, kind=kind)}, column {column!r}: {shown}{what}"
    )
