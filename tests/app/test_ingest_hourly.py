"""Parsing and validation of hourly aggregate files (no database needed)."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from app.errors import IngestError
from app.ingest import HourlyOptions, read_hourly_csv, read_hourly_json

OPTS = HourlyOptions(series="prod/chat")


def csv(text: str, options: HourlyOptions = OPTS) -> pd.DataFrame:
    return read_hourly_csv(io.BytesIO(text.encode()), options)


def test_reads_requests_and_token_columns() -> None:
    frame = csv(
        "timestamp,requests,prompt_tokens,completion_tokens,peak_rps\n"
        "2026-11-30T00:00:00Z,3600,1000,250,3.5\n"
        "2026-11-30T01:00:00Z,7200,2000,500,\n"
    )
    assert list(frame["series"]) == ["prod/chat", "prod/chat"]
    assert list(frame["hour"]) == [
        pd.Timestamp("2026-11-30T00:00Z"),
        pd.Timestamp("2026-11-30T01:00Z"),
    ]
    assert list(frame["requests"]) == [3600.0, 7200.0]
    assert list(frame["total_tokens"]) == [1250.0, 2500.0]
    assert frame["peak_rps"].iloc[0] == 3.5 and np.isnan(frame["peak_rps"].iloc[1])


def test_qps_is_converted_to_requests_per_hour() -> None:
    frame = csv("timestamp,qps,tokens\n2026-11-30T00:00:00Z,2.5,900\n")
    assert frame["requests"].iloc[0] == pytest.approx(9000.0)
    assert frame["total_tokens"].iloc[0] == 900.0
    assert np.isnan(frame["prompt_tokens"].iloc[0])


def test_offsets_are_converted_to_utc() -> None:
    frame = csv("timestamp,requests\n2026-11-30T02:00:00+02:00,1\n")
    assert frame["hour"].iloc[0] == pd.Timestamp("2026-11-30T00:00Z")


def test_naive_timestamps_use_the_given_timezone() -> None:
    frame = csv(
        "timestamp,requests\n2026-07-01 12:00:00,1\n",
        HourlyOptions(series="s", timezone="Europe/Berlin"),
    )
    assert frame["hour"].iloc[0] == pd.Timestamp("2026-07-01T10:00Z")


def test_naive_timestamps_default_to_utc() -> None:
    frame = csv("hour,requests\n2026-07-01 12:00:00,1\n")
    assert frame["hour"].iloc[0] == pd.Timestamp("2026-07-01T12:00Z")


def test_series_column_names_several_series() -> None:
    frame = csv(
        "series,timestamp,requests\na,2026-11-30T00:00Z,1\nb,2026-11-30T00:00Z,2\n", HourlyOptions()
    )
    assert sorted(frame["series"]) == ["a", "b"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "timestamp,requests\n2026-11-30T00:30:00Z,5\n",
            r"row 1 \(line 2\), column 'timestamp': 2026-11-30T00:30:00\+00:00 is not the start",
        ),
        (
            "timestamp,requests\n2026-11-30T00:00:00Z,5\n2026-11-30T00:00:00Z,6\n",
            r"duplicate hour 2026-11-30T00:00:00\+00:00 for series 'prod/chat': row 1 .* and row 2",
        ),
        (
            "timestamp,requests\n2026-11-30T00:00:00Z,5\n2026-11-30T01:00:00Z,-3\n",
            r"row 2 \(line 3\), column 'requests': -3 is negative",
        ),
        (
            "timestamp,requests\n2026-11-30T00:00:00Z,abc\n",
            r"row 1 \(line 2\), column 'requests': 'abc' is not a number",
        ),
        (
            "timestamp,requests\n2026-11-30T00:00:00Z,NaN\n",
            r"row 1 \(line 2\), column 'requests': 'NaN' is not a number",
        ),
        (
            "timestamp,requests\n2026-11-30T00:00:00Z,inf\n",
            r"column 'requests': inf is not a finite number",
        ),
        (
            "timestamp,requests\n2026-11-30T00:00:00Z,\n",
            r"row 1 \(line 2\), column 'requests': missing value",
        ),
        ("timestamp,requests,colour\n2026-11-30T00:00:00Z,5,red\n", r"unknown column 'colour'"),
        ("", r"empty file"),
        ("timestamp,requests\n", r"empty file: no data rows"),
        (
            "timestamp,requests\nyesterday,5\n",
            r"row 1 \(line 2\), column 'timestamp': 'yesterday' is not a valid timestamp",
        ),
        ("timestamp,requests\n1900-01-01T00:00:00Z,5\n", r"is before 1970-01-01"),
        ("timestamp,requests\n2100-01-01T00:00:00Z,5\n", r"more than a year in the future"),
        ("timestamp,requests\n2999-01-01T00:00:00Z,5\n", r"'2999-01-01T00:00:00Z' is not a valid"),
        (
            "timestamp,requests\n2026-11-30T00:00:00Z,5\n2026-11-30T01:00:00,5\n",
            r"row 2 \(line 3\), column 'timestamp': .* has no UTC offset while other rows do",
        ),
        (
            "timestamp,qps,requests\n2026-11-30T00:00:00Z,5,5\n",
            r"exactly one of .*'requests' or 'qps'",
        ),
        (
            "timestamp,prompt_tokens\n2026-11-30T00:00:00Z,5\n",
            r"exactly one of .*'requests' or 'qps'",
        ),
        ("requests\n5\n", r"exactly one timestamp column"),
        (
            "timestamp,requests,tokens,prompt_tokens\n2026-11-30T00:00:00Z,1,2,3\n",
            r"either 'tokens' or 'prompt_tokens'",
        ),
        (
            "timestamp,requests,prompt_tokens\n2026-11-30T00:00:00Z,1,-2\n",
            r"row 1 \(line 2\), column 'prompt_tokens': -2 is negative",
        ),
    ],
)
def test_rejections_name_row_and_column(body: str, message: str) -> None:
    with pytest.raises(IngestError, match=message):
        csv(body)


def test_series_column_and_option_together_is_rejected() -> None:
    with pytest.raises(IngestError, match="has a 'series' column and a series name"):
        csv("series,timestamp,requests\na,2026-11-30T00:00Z,1\n")


def test_missing_series_is_rejected() -> None:
    with pytest.raises(IngestError, match="no series given"):
        csv("timestamp,requests\n2026-11-30T00:00Z,1\n", HourlyOptions())


def test_bad_series_name_in_column_names_the_row() -> None:
    with pytest.raises(IngestError, match=r"row 2 \(line 3\), column 'series': invalid series"):
        csv(
            "series,timestamp,requests\na,2026-11-30T00:00Z,1\n../etc,2026-11-30T00:00Z,1\n",
            HourlyOptions(),
        )


def test_json_records_and_wrapper_object() -> None:
    records = [{"timestamp": "2026-11-30T00:00:00Z", "requests": 10, "tokens": 100}]
    assert read_hourly_json(json.dumps(records), OPTS)["requests"].tolist() == [10.0]
    wrapped = {"series": "prod/chat", "observations": records}
    assert read_hourly_json(json.dumps(wrapped).encode(), OPTS)["total_tokens"].tolist() == [100.0]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("[", r"malformed JSON"),
        ("[]", r"no observations"),
        ('{"rows": []}', r"must be a list of records or an object with 'observations'"),
        (
            '[{"timestamp": "2026-11-30T00:00:00Z", "requests": "5"}]',
            r"record 1, field 'requests': '5' is not a number",
        ),
        (
            '[{"timestamp": "2026-11-30T00:00:00Z", "requests": true}]',
            r"record 1, field 'requests': 'True' is not a number",
        ),
        (
            '[{"timestamp": "2026-11-30T00:00:00Z", "requests": NaN}]',
            r"record 1, column 'requests': missing value",
        ),
        (
            '[{"timestamp": "2026-11-30T00:00:00Z", "requests": 1}, 5]',
            r"record 2: expected an object",
        ),
        (
            '{"series": "other", "observations": '
            '[{"timestamp": "2026-11-30T00:00:00Z", "requests": 1}]}',
            r"body names series 'other' but the request is for 'prod/chat'",
        ),
    ],
)
def test_json_rejections(payload: str, message: str) -> None:
    with pytest.raises(IngestError, match=message):
        read_hourly_json(payload, OPTS)


def test_invalid_utf8_json_is_rejected() -> None:
    with pytest.raises(IngestError, match="not valid UTF-8"):
        read_hourly_json(b"\xff\xfe[]", OPTS)


def test_input_buffer_is_not_consumed_for_header_only() -> None:
    frame = csv(
        "timestamp,requests\n"
        + "".join(
            f"2026-11-{day:02d}T{hour:02d}:00:00Z,{hour}\n" for day in (1, 2) for hour in range(24)
        )
    )
    assert len(frame) == 48
    assert frame["requests"].sum() == 2 * sum(range(24))
