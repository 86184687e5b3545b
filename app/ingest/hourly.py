"""Parse and validate hourly aggregate files (CSV or JSON) into the canonical hourly frame.

Rules (each violation raises :class:`IngestError` naming the row and column):
a timestamp column plus ``requests`` or ``qps``; optional ``prompt_tokens``/``completion_tokens``
or a single ``tokens``; optional ``peak_rps``; optional ``series``. Timestamps must fall on the
start of an hour; values must be finite and non-negative; an hour may appear once per series;
unknown columns and empty files are rejected.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import pandas as pd

from app.common.names import check_json_depth, echo, validate_series_name
from app.errors import IngestError, InputError
from app.ingest.columns import (
    CANONICAL,
    HOURLY_KNOWN,
    NUMERIC_COLUMNS,
    SERIES_COLUMN,
    TIMESTAMP_ALIASES,
)
from app.ingest.limits import LIMIT_TEXT, MAX_HOURLY_VALUE, too_large
from app.ingest.timestamps import check_range, describe_row, parse_timestamps


@dataclass(frozen=True)
class HourlyOptions:
    """How to read an hourly file. ``series`` names the series when the file has no column."""

    series: str | None = None
    timezone: str | None = None


def read_hourly_csv(source: IO[bytes] | IO[str] | str, options: HourlyOptions) -> pd.DataFrame:
    """Read a CSV of hourly aggregates into the canonical frame (see module doc)."""
    header = read_header(source)
    _check_control_characters(source)
    _check_columns(header, kind="csv")
    numeric = [c for c in header if c in NUMERIC_COLUMNS]
    typed = {**{c: "float64" for c in numeric}, **{c: object for c in header if c not in numeric}}
    try:
        frame = _read_csv_frame(source, typed, numeric)
    except pd.errors.ParserError as exc:
        raise _wide_row_error(source, len(header)) or IngestError(
            f"malformed CSV: {str(exc).strip()}"
        ) from exc
    if not isinstance(frame.index, pd.RangeIndex):
        # pandas takes a first data row with one field more than the header as an index
        # column; the file is as wrong as when a later row is too wide.
        raise _wide_row_error(source, len(header)) or IngestError(
            "malformed CSV: a row has more fields than the header"
        )
    return _canonicalize(frame, options, kind="csv")


_CSV_OPTIONS: dict[str, Any] = {
    "na_values": [""],
    "keep_default_na": False,
    "skip_blank_lines": False,
    "skipinitialspace": True,
}


_CSV_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _check_control_characters(source: IO[bytes] | IO[str] | str) -> None:
    """No control character but tab and line breaks: pandas cuts a field at a NUL without a
    word (``2026-11-30T01:00:00Z\\x00junk`` would be read as the hour)."""
    if isinstance(source, str):
        with open(source, "rb") as handle:
            data = handle.read()
    else:
        raw = source.read()
        _rewind(source)
        data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    match = _CSV_CONTROL.search(data)
    if match is not None:
        line = data.count(b"\n", 0, match.start()) + 1
        where = "the header" if line == 1 else describe_row(line - 2, kind="csv")
        raise IngestError(
            f"{where}: the control character U+{match.group()[0]:04X} is not allowed in a CSV "
            "file (only tab and line breaks are)"
        )


def _read_csv_frame(
    source: IO[bytes] | IO[str] | str, typed: dict[str, Any], numeric: list[str]
) -> pd.DataFrame:
    try:
        return pd.read_csv(source, dtype=typed, **_CSV_OPTIONS)
    except pd.errors.ParserError:  # a ValueError too, but the file is malformed, not a cell
        raise
    except (ValueError, TypeError):  # a value that is not a number: read text, name the cell
        _rewind(source)
        frame = pd.read_csv(source, dtype=object, **_CSV_OPTIONS)
        _coerce_numeric(frame, numeric, kind="csv")
        return frame


def _wide_row_error(source: IO[bytes] | IO[str] | str, width: int) -> IngestError | None:
    """The first data row with more fields than the header's ``width``, as the error to raise
    (None if there is none). Only read after pandas failed, so a good file is parsed once."""
    _rewind(source)
    if isinstance(source, str):
        with open(source, newline="", encoding="utf-8", errors="replace") as handle:
            return _first_wide_row(handle, width)
    text = source.read()
    _rewind(source)
    if isinstance(text, bytes):
        text = text.decode("utf-8-sig", errors="replace")
    return _first_wide_row(io.StringIO(text, newline=""), width)


def _first_wide_row(lines: IO[str], width: int) -> IngestError | None:
    try:
        reader = csv.reader(lines)
        next(reader, None)
        for position, fields in enumerate(reader):
            if len(fields) > width:
                return IngestError(
                    f"{describe_row(position, kind='csv')} has {len(fields)} fields but the "
                    f"header has {width}; remove the extra fields or add their columns"
                )
    except csv.Error:
        return None
    return None


def read_hourly_json(data: bytes | str | Any, options: HourlyOptions) -> pd.DataFrame:
    """Read JSON hourly aggregates: a list of records or ``{"series"?, "observations": [...]}``."""
    payload = _load_json(data) if isinstance(data, bytes | str) else data
    if isinstance(payload, dict):
        unknown = set(payload) - {"series", "observations"}
        if unknown or "observations" not in payload:
            raise IngestError(
                "JSON body must be a list of records or an object with 'observations' "
                f"(and optionally 'series'); got keys {sorted(payload)}"
            )
        if payload.get("series") is not None:
            if options.series is not None and payload["series"] != options.series:
                raise IngestError(
                    f"body names series {payload['series']!r} but the request is for "
                    f"{options.series!r}"
                )
            options = HourlyOptions(series=str(payload["series"]), timezone=options.timezone)
        payload = payload["observations"]
    if not isinstance(payload, list):
        raise IngestError("JSON observations must be a list of objects")
    if not payload:
        raise IngestError("no observations: the body has no records")
    for position, record in enumerate(payload):
        if not isinstance(record, dict):
            raise IngestError(f"{describe_row(position, kind='json')}: expected an object")
        _check_integers(record, position)
    header = list(dict.fromkeys(key for record in payload for key in record))
    _check_columns(header, kind="json")
    # Object columns keep a null or an absent field (None) apart from a literal NaN (a float):
    # a numeric frame would turn both into NaN and reject the null as a NaN.
    frame = pd.DataFrame(
        {key: pd.Series([record.get(key) for record in payload], dtype=object) for key in header}
    )
    numeric = [c for c in header if c in NUMERIC_COLUMNS]
    _coerce_numeric(frame, numeric, kind="json")
    for column in header:
        if column not in numeric:
            frame[column] = frame[column].map(_json_text, na_action="ignore").astype("string")
    return _canonicalize(frame, options, kind="json")


def _json_text(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | dict | list):
        return f"<{type(value).__name__}>"
    return str(value)


def _load_json(data: bytes | str) -> Any:
    check_json_depth(data, what="JSON")  # before parsing: deep nesting exhausts the parser
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text)
    except UnicodeDecodeError as exc:
        raise IngestError(f"body is not valid UTF-8: {exc.reason} at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise IngestError(
            f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except ValueError as exc:  # an integer longer than Python converts (4300 digits)
        raise IngestError(f"malformed JSON: {str(exc).split(';')[0]}") from exc


def read_header(source: IO[bytes] | IO[str] | str) -> list[str]:
    first: str | bytes
    if isinstance(source, str):
        try:
            with open(source, newline="", encoding="utf-8") as handle:
                first = handle.readline()
        except UnicodeDecodeError as exc:  # the first block is decoded, not only the header
            with open(source, "rb") as raw:
                compressed = raw.read(2) == b"\x1f\x8b"
            hint = " (a gzip file: give the plain CSV)" if compressed else ""
            raise IngestError(
                f"file is not valid UTF-8: {exc.reason} at byte {exc.start}{hint}"
            ) from exc
    else:
        first = source.readline()
        _rewind(source)
        if isinstance(first, bytes):
            try:
                first = first.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                raise IngestError("header is not valid UTF-8") from exc
    first = first.lstrip("\ufeff")
    if not first.strip():
        raise IngestError("empty file: expected a header row and at least one data row")
    try:
        return [name.strip() for name in next(csv.reader(io.StringIO(first)))]
    except csv.Error as exc:  # e.g. a bare carriage return inside the header
        reason = str(exc).split(" - ")[0]  # drop Python's "universal-newline mode" hint
        raise IngestError(f"malformed CSV header: {reason}") from exc


def _rewind(source: IO[bytes] | IO[str] | str) -> None:
    if not isinstance(source, str):
        source.seek(0)


def _check_columns(header: list[str], *, kind: str) -> None:
    field = "column" if kind == "csv" else "field"
    for name in header:
        if name not in HOURLY_KNOWN:
            raise IngestError(
                f"unknown {field} {echo(name)}; expected a timestamp "
                f"({', '.join(TIMESTAMP_ALIASES)}), "
                "requests or qps, prompt_tokens/completion_tokens or tokens, peak_rps, series"
            )
    if len(set(header)) != len(header):
        raise IngestError(f"duplicate {field} names in {echo(header)}")
    stamps = [c for c in header if c in TIMESTAMP_ALIASES]
    if len(stamps) != 1:
        raise IngestError(
            f"expected exactly one timestamp {field} ({', '.join(TIMESTAMP_ALIASES)}); "
            f"found {stamps or 'none'}"
        )
    if ("requests" in header) == ("qps" in header):
        raise IngestError(f"give exactly one of the {field}s 'requests' or 'qps'")
    if "tokens" in header and {"prompt_tokens", "completion_tokens"} & set(header):
        raise IngestError("give either 'tokens' or 'prompt_tokens'/'completion_tokens', not both")
    if "total_tokens" in header and "tokens" in header:
        raise IngestError("'tokens' and 'total_tokens' mean the same; give one")


def _coerce_numeric(frame: pd.DataFrame, columns: list[str], *, kind: str) -> None:
    for column in columns:
        raw = frame[column]
        if kind == "json":
            bad_type = raw.map(lambda v: isinstance(v, bool | str | dict | list))
            if bad_type.any():
                pos = int(np.flatnonzero(bad_type.to_numpy(dtype=bool))[0])
                raise IngestError(
                    f"{describe_row(pos, kind=kind)}, field {column!r}: "
                    f"{str(raw.iloc[pos])[:40]!r} is not a number"
                )
            # Python's json reads NaN, which JSON lacks; an optional field would store it as a
            # missing value unnoticed (a NaN count of requests is rejected as missing later).
            nan = raw.map(lambda v: isinstance(v, float) and v != v).to_numpy(dtype=bool)
            if nan.any() and column not in ("requests", "qps"):
                raise IngestError(
                    f"{describe_row(int(np.flatnonzero(nan)[0]), kind=kind)}, field {column!r}: "
                    "NaN is not a number; use null or leave the field out for a missing value"
                )
        values = pd.to_numeric(raw, errors="coerce")
        unparsed = values.isna() & raw.notna()
        if unparsed.any():
            pos = int(np.flatnonzero(unparsed.to_numpy(dtype=bool))[0])
            raise IngestError(
                f"{describe_row(pos, kind=kind)}, column {column!r}: "
                f"{str(raw.iloc[pos])[:40]!r} {_why_unparsed(raw.iloc[pos])}"
            )
        frame[column] = values.astype("float64")


def _check_integers(record: dict[str, Any], position: int) -> None:
    """JSON integers have no size limit, and one past 64 bits breaks pandas: reject any at or
    beyond the bound before a frame is built (a count as too large, anything else as invalid)."""
    for key, value in record.items():
        if type(value) is int and not -MAX_HOURLY_VALUE < value < MAX_HOURLY_VALUE:
            if key in NUMERIC_COLUMNS:
                what = "is negative; counts must be >= 0" if value < 0 else LIMIT_TEXT
            else:
                what = "is not a valid value"
            digits = len(str(abs(value))) if abs(value) < 10**4300 else "over 4300"
            raise IngestError(
                f"{describe_row(position, kind='json')}, field {key!r}: an integer of "
                f"{digits} digits {what}"
            )


def _why_unparsed(text: Any) -> str:
    """A numeral pandas could not read is out of float range (400 digits, 1e400)."""
    try:
        number = float(str(text))
    except ValueError:
        return "is not a number"
    return LIMIT_TEXT if abs(number) >= MAX_HOURLY_VALUE else "is not a number"


def _canonicalize(frame: pd.DataFrame, options: HourlyOptions, *, kind: str) -> pd.DataFrame:
    if frame.empty:
        raise IngestError("empty file: no data rows after the header")
    ts_column = next(c for c in frame.columns if c in TIMESTAMP_ALIASES)
    hours = parse_timestamps(
        frame[ts_column], column=ts_column, timezone=options.timezone, kind=kind
    )
    check_range(hours, column=ts_column, kind=kind)
    misaligned = hours != hours.dt.floor("h")
    if misaligned.any():
        pos = int(np.flatnonzero(misaligned.to_numpy(dtype=bool))[0])
        raise IngestError(
            f"{describe_row(pos, kind=kind)}, column {ts_column!r}: {hours.iloc[pos].isoformat()} "
            "is not the start of an hour; hourly files need HH:00:00 timestamps "
            "(use 'gpucast ingest requests' for per-request logs)"
        )
    out = pd.DataFrame({"series": _series_column(frame, options, kind), "hour": hours})
    out["requests"] = frame["qps"] * 3600.0 if "qps" in frame else frame["requests"]
    out["prompt_tokens"] = frame.get("prompt_tokens", np.nan)
    out["completion_tokens"] = frame.get("completion_tokens", np.nan)
    out["total_tokens"] = _total_tokens(frame)
    out["peak_rps"] = frame.get("peak_rps", np.nan)
    _check_values(out, frame, kind)
    _check_duplicates(out, kind)
    return out.loc[:, list(CANONICAL)]


def _series_column(frame: pd.DataFrame, options: HourlyOptions, kind: str) -> pd.Series:
    if SERIES_COLUMN in frame:
        if options.series is not None:
            raise IngestError(
                "the file has a 'series' column and a series name was also given; use one"
            )
        names = frame[SERIES_COLUMN].astype(object)
        missing = names.isna() | (names == "")
        if missing.any():
            pos = int(np.flatnonzero(missing.to_numpy(dtype=bool))[0])
            raise IngestError(f"{describe_row(pos, kind=kind)}, column 'series': missing name")
        for position, name in names.drop_duplicates().items():
            try:
                validate_series_name(str(name))
            except InputError as exc:
                row = describe_row(int(position), kind=kind)
                raise IngestError(f"{row}, column 'series': {exc}") from exc
        return names.astype(object)
    if options.series is None:
        raise IngestError("no series given: add a 'series' column or pass the series name")
    validate_series_name(options.series)
    return pd.Series(options.series, index=frame.index, dtype=object)


def _total_tokens(frame: pd.DataFrame) -> pd.Series | float:
    for single in ("tokens", "total_tokens"):
        if single in frame:
            return frame[single]
    parts = [frame[c] for c in ("prompt_tokens", "completion_tokens") if c in frame]
    if not parts:
        return np.nan
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


def _check_values(out: pd.DataFrame, frame: pd.DataFrame, kind: str) -> None:
    source_name = {
        "requests": "qps" if "qps" in frame else "requests",
        "total_tokens": "tokens" if "tokens" in frame else "total_tokens",
    }
    for column in ("requests", "prompt_tokens", "completion_tokens", "total_tokens", "peak_rps"):
        values = out[column].to_numpy(dtype="float64")
        name = source_name.get(column, column)
        if column == "requests":
            _reject(np.isnan(values), kind, name, "missing value (requests are required)")
        _reject(np.isinf(values), kind, name, "is not a finite number", values)
        _reject(values < 0, kind, name, "is negative; counts must be >= 0", values)
        if column == "requests" and "qps" in frame:
            what = f"x 3600 requests {LIMIT_TEXT}"
            _reject(too_large(values), kind, name, what, values / 3600.0)
        elif column == "total_tokens" and not {"tokens", "total_tokens"} & set(frame):
            mask = too_large(values)
            if mask.any():
                pos = int(np.flatnonzero(mask)[0])
                raise IngestError(
                    f"{describe_row(pos, kind=kind)}: prompt_tokens + completion_tokens = "
                    f"{values[pos]:g} {LIMIT_TEXT}"
                )
        _reject(too_large(values), kind, name, LIMIT_TEXT, values)


def _reject(
    mask: np.ndarray, kind: str, column: str, what: str, values: np.ndarray | None = None
) -> None:
    if mask.any():
        pos = int(np.flatnonzero(mask)[0])
        shown = "" if values is None else f"{values[pos]:g} "
        raise IngestError(f"{describe_row(pos, kind=kind)}, column {column!r}: {shown}{what}")


def _check_duplicates(out: pd.DataFrame, kind: str) -> None:
    dup = out.duplicated(subset=["series", "hour"], keep=False).to_numpy()
    if dup.any():
        first = int(np.flatnonzero(dup)[0])
        key = out.iloc[first]
        same = np.flatnonzero(
            dup
            & (out["hour"] == key["hour"]).to_numpy()
            & (out["series"] == key["series"]).to_numpy()
        )
        raise IngestError(
            f"duplicate hour {key['hour'].isoformat()} for series {key['series']!r}: "
            f"{describe_row(int(same[0]), kind=kind)} and {describe_row(int(same[1]), kind=kind)}"
        )
