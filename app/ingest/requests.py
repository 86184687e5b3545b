"""Aggregate raw per-request logs (one row per request) into hourly rows.

The log is read in chunks, so memory stays bounded by the chunk size and the number of distinct
busy seconds, never by the number of requests. ``peak_rps`` is the number of requests in the
busiest single second of each hour.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO

import numpy as np
import pandas as pd

from app.errors import IngestError
from app.ingest.columns import (
    REQUEST_INPUT_ALIASES,
    REQUEST_OUTPUT_ALIASES,
    REQUEST_TIMESTAMP_ALIASES,
)
from app.ingest.hourly import _rewind, read_header
from app.ingest.limits import LIMIT_TEXT, too_large
from app.ingest.timestamps import (
    UNIT_SECONDS,
    check_range,
    describe_row,
    numeric_to_utc,
    parse_timestamps,
)

DEFAULT_CHUNK_ROWS = 250_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST_S = 0.0  # 1970-01-01T00:00Z
END_S = datetime(2100, 1, 1, tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class RequestLogOptions:
    """Column mapping and time interpretation of a request log (None = detect)."""

    timestamp_column: str | None = None
    input_column: str | None = None
    output_column: str | None = None
    origin: datetime | None = None
    time_unit: str | None = None
    timezone: str | None = None
    chunk_rows: int = DEFAULT_CHUNK_ROWS


@dataclass(frozen=True)
class ResolvedColumns:
    timestamp: str
    input: str
    output: str


def resolve_columns(header: list[str], options: RequestLogOptions) -> ResolvedColumns:
    """Pick the timestamp / input-token / output-token columns from options or by name."""
    return ResolvedColumns(
        timestamp=_pick(
            header,
            options.timestamp_column,
            REQUEST_TIMESTAMP_ALIASES,
            "timestamp",
            "--timestamp-column",
        ),
        input=_pick(
            header, options.input_column, REQUEST_INPUT_ALIASES, "input-token", "--input-column"
        ),
        output=_pick(
            header, options.output_column, REQUEST_OUTPUT_ALIASES, "output-token", "--output-column"
        ),
    )


def _pick(
    header: list[str], given: str | None, aliases: tuple[str, ...], what: str, flag: str
) -> str:
    if given is not None:
        if given not in header:
            raise IngestError(f"{what} column {given!r} not found; the file has {header}")
        return given
    lowered = {name.lower(): name for name in header}
    for alias in aliases:
        if alias in lowered:
            return lowered[alias]
    raise IngestError(f"cannot find the {what} column in {header}; name it with {flag}")


def aggregate_request_log(
    source: str | IO[bytes] | IO[str],
    options: RequestLogOptions,
    *,
    on_chunk: Callable[[int], None] | None = None,
) -> pd.DataFrame:
    """Hourly frame (hour, requests, prompt/completion/total tokens, peak_rps) of a request log.

    ``on_chunk`` is called with the number of rows of each chunk processed (for progress bars).
    """
    per_hour: list[pd.DataFrame] = []
    per_second: list[pd.Series] = []
    seen = 0
    for chunk, columns in _chunks(source, options):
        stamps = _chunk_timestamps(chunk[columns.timestamp], columns.timestamp, options, seen)
        tokens_in = _chunk_tokens(chunk[columns.input], columns.input, seen)
        tokens_out = _chunk_tokens(chunk[columns.output], columns.output, seen)
        epoch_s = stamps.to_numpy(dtype="datetime64[ns]").astype("int64") // 1_000_000_000
        hour_s = epoch_s - epoch_s % 3600
        per_hour.append(
            pd.DataFrame(
                {
                    "hour_s": hour_s,
                    "requests": 1.0,
                    "prompt_tokens": tokens_in,
                    "completion_tokens": tokens_out,
                }
            )
            .groupby("hour_s")
            .sum()
        )
        per_second.append(pd.Series(epoch_s).value_counts())
        seen += len(chunk)
        if on_chunk is not None:
            on_chunk(len(chunk))
    if seen == 0:
        raise IngestError("empty log: no request rows after the header")
    hourly = pd.concat(per_hour).groupby(level=0).sum()
    seconds = pd.concat(per_second).groupby(level=0).sum()
    peak = seconds.groupby(seconds.index - seconds.index % 3600).max()
    hourly["total_tokens"] = hourly["prompt_tokens"] + hourly["completion_tokens"]
    _check_hourly_sums(hourly)
    hourly["peak_rps"] = peak.reindex(hourly.index).astype("float64")
    hourly.index = pd.to_datetime(hourly.index, unit="s", utc=True)
    return hourly.rename_axis("hour").reset_index()


def _chunks(
    source: str | IO[bytes] | IO[str], options: RequestLogOptions
) -> Iterator[tuple[pd.DataFrame, ResolvedColumns]]:
    """Chunks of the three needed columns; tokens parsed as floats by the C parser.

    A token cell that is not a number makes the fast reader fail; the log is then read again
    as text so that the error names the row and column.
    """
    columns = resolve_columns(read_header(source), options)
    wanted = [columns.timestamp, columns.input, columns.output]
    fast = {columns.timestamp: object, columns.input: "float64", columns.output: "float64"}
    try:
        yield from _read(source, options, wanted, fast, columns)
    except ValueError as exc:
        if isinstance(exc, IngestError):
            raise
        _rewind(source)
        yield from _read(source, options, wanted, dict.fromkeys(wanted, object), columns)


def _read(
    source: str | IO[bytes] | IO[str],
    options: RequestLogOptions,
    wanted: list[str],
    dtypes: dict[str, object],
    columns: ResolvedColumns,
) -> Iterator[tuple[pd.DataFrame, ResolvedColumns]]:
    try:
        reader = pd.read_csv(
            source,
            usecols=wanted,
            dtype=dtypes,
            chunksize=options.chunk_rows,
            keep_default_na=False,
            na_values=[""],
            skipinitialspace=True,
        )
        with reader:
            for chunk in reader:
                yield chunk, columns
    except pd.errors.EmptyDataError as exc:
        raise IngestError("empty file: expected a header row and request rows") from exc
    except pd.errors.ParserError as exc:
        raise IngestError(f"malformed CSV: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise IngestError(f"file is not valid UTF-8: {exc.reason}") from exc


def _chunk_timestamps(
    raw: pd.Series, column: str, options: RequestLogOptions, row_offset: int
) -> pd.Series:
    if _looks_numeric(raw):
        numbers = pd.to_numeric(raw, errors="coerce")
        if numbers.isna().any():
            pos = int(np.flatnonzero(numbers.isna().to_numpy(dtype=bool))[0])
            raise IngestError(
                f"{describe_row(pos + row_offset, kind='csv')}, column {column!r}: "
                f"{raw.iloc[pos]!r} is not a number, unlike the timestamps before it"
            )
        unit = options.time_unit or _unit_from_name(column)
        _check_numeric_span(
            raw, numbers, unit=unit, options=options, column=column, row_offset=row_offset
        )
        stamps = numeric_to_utc(numbers, unit=unit, origin=options.origin)
        if options.origin is None and stamps.min() < pd.Timestamp("2000-01-01", tz="UTC"):
            raise IngestError(
                f"column {column!r} holds numbers that read as dates before 2000 when taken "
                "as Unix time; if they are offsets from the start of the trace, pass --origin "
                "(e.g. --origin 2026-11-30T00:00:00Z)"
            )
    else:
        if options.origin is not None:
            raise IngestError(
                f"{describe_row(row_offset, kind='csv')}, column {column!r}: "
                f"{raw.iloc[0]!r} is not a number, but --origin needs numeric offsets"
            )
        stamps = parse_timestamps(
            raw, column=column, timezone=options.timezone, kind="csv", row_offset=row_offset
        )
    check_range(stamps, column=column, kind="csv", row_offset=row_offset)
    return stamps


def _check_numeric_span(
    raw: pd.Series,
    numbers: pd.Series,
    *,
    unit: str,
    options: RequestLogOptions,
    column: str,
    row_offset: int,
) -> None:
    """Numbers that cannot be a time in range are rejected before they become timestamps
    (which would overflow 64-bit nanoseconds: inf, 1e300 s, 300 years past the origin)."""
    origin = options.origin or EPOCH
    base = (origin if origin.tzinfo else origin.replace(tzinfo=UTC)).timestamp()
    with np.errstate(invalid="ignore", over="ignore"):
        seconds = base + numbers.to_numpy(dtype="float64") * UNIT_SECONDS[unit]
    bad = ~np.isfinite(seconds) | (seconds < FIRST_S) | (seconds >= END_S)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        since = (
            f"seconds after --origin {options.origin:%Y-%m-%dT%H:%MZ}"
            if options.origin
            else ("Unix time")
        )
        raise IngestError(
            f"{describe_row(pos + row_offset, kind='csv')}, column {column!r}: "
            f"{str(raw.iloc[pos])[:40]!r} ({unit}, as {since}) is not a time from 1970 to 2099"
        )


def _looks_numeric(raw: pd.Series) -> bool:
    """Numeric offsets or ISO text? Decided by the first cell; the rest must agree."""
    first = raw.iloc[0] if len(raw) else None
    try:
        float(str(first))
    except ValueError:
        return False
    return True


def _unit_from_name(column: str) -> str:
    lowered = column.lower()
    for unit in ("ms", "us", "ns"):
        if lowered.endswith(f"_{unit}"):
            return unit
    return "s"


def _check_hourly_sums(hourly: pd.DataFrame) -> None:
    """Each request is below the bound, but an hour's sum may not be (two of 1e308 are inf)."""
    for column in ("prompt_tokens", "completion_tokens", "total_tokens"):
        values = hourly[column].to_numpy(dtype="float64")
        bad = ~np.isfinite(values) | too_large(values)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            hour = pd.Timestamp(int(hourly.index[pos]), unit="s", tz="UTC")
            raise IngestError(
                f"hour {hour:%Y-%m-%dT%H:%MZ}: the requests of the hour add up to "
                f"{values[pos]:g} {column.replace('_', ' ')}, which {LIMIT_TEXT}"
            )


def _chunk_tokens(raw: pd.Series, column: str, row_offset: int) -> np.ndarray:
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype="float64")
    bad = ~np.isfinite(values) | (values < 0) | too_large(values)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        cell = raw.iloc[pos]
        shown = f"{cell:g}" if isinstance(cell, float) and not np.isnan(cell) else repr(cell)
        value = values[pos]
        what = (
            f"{LIMIT_TEXT} (per request too)"
            if np.isfinite(value) and value >= 0
            else "is not a non-negative token count"
        )
        raise IngestError(
            f"{describe_row(pos + row_offset, kind='csv')}, column {column!r}: {shown} {what}"
        )
    return values


__all__ = ["RequestLogOptions", "aggregate_request_log", "resolve_columns", "UNIT_SECONDS"]
