"""Per-request logs aggregate to the right hourly totals (checked by independent pandas code)."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from app.errors import IngestError
from app.ingest import RequestLogOptions, aggregate_request_log


def test_azure_trace_hourly_totals(shared_data: Path) -> None:
    path = shared_data / "azure_llm_2023_conv_1h.csv"
    hourly = aggregate_request_log(str(path), RequestLogOptions(chunk_rows=4_000))
    raw = pd.read_csv(path)
    stamps = pd.to_datetime(raw["TIMESTAMP"]).dt.tz_localize("UTC")
    expected = raw.groupby(stamps.dt.floor("h")).agg(
        requests=("ContextTokens", "size"),
        prompt=("ContextTokens", "sum"),
        completion=("GeneratedTokens", "sum"),
    )
    peak = stamps.dt.floor("s").value_counts()
    expected_peak = peak.groupby(peak.index.floor("h")).max()
    assert hourly["hour"].tolist() == expected.index.tolist()
    assert hourly["requests"].tolist() == expected["requests"].astype(float).tolist()
    assert hourly["prompt_tokens"].tolist() == expected["prompt"].astype(float).tolist()
    assert hourly["completion_tokens"].tolist() == expected["completion"].astype(float).tolist()
    assert (
        hourly["peak_rps"].tolist() == expected_peak.reindex(expected.index).astype(float).tolist()
    )
    assert hourly["requests"].sum() == len(raw) == 19_366


def test_mooncake_relative_trace_with_origin(shared_data: Path) -> None:
    path = shared_data / "mooncake_fast25_conversation_1h.csv"
    origin = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
    hourly = aggregate_request_log(str(path), RequestLogOptions(origin=origin, chunk_rows=5_000))
    raw = pd.read_csv(path)
    stamps = pd.Timestamp(origin) + pd.to_timedelta(raw["timestamp_ms"], unit="ms")
    by_hour = raw.groupby(stamps.dt.floor("h"))
    assert hourly["hour"].tolist() == list(by_hour.groups)
    assert hourly["requests"].tolist() == by_hour.size().astype(float).tolist()
    assert hourly["prompt_tokens"].tolist() == by_hour["input_length"].sum().astype(float).tolist()
    assert hourly["completion_tokens"].tolist() == (
        by_hour["output_length"].sum().astype(float).tolist()
    )
    per_second = stamps.dt.floor("s").value_counts()
    assert hourly["peak_rps"].max() == per_second.max()


def test_relative_timestamps_without_origin_are_rejected(shared_data: Path) -> None:
    path = shared_data / "mooncake_fast25_conversation_1h.csv"
    with pytest.raises(IngestError, match=r"pass --origin"):
        aggregate_request_log(str(path), RequestLogOptions())


def test_peak_second_spans_chunk_boundary() -> None:
    lines = ["timestamp,input_tokens,output_tokens"]
    lines += ["2026-11-30T10:00:05Z,10,1"] * 5 + ["2026-11-30T10:00:06Z,10,1"] * 3
    lines += ["2026-11-30T11:59:59.5Z,7,2"]
    body = io.StringIO("\n".join(lines) + "\n")
    hourly = aggregate_request_log(body, RequestLogOptions(chunk_rows=2))
    assert hourly["requests"].tolist() == [8.0, 1.0]
    assert hourly["peak_rps"].tolist() == [5.0, 1.0]
    assert hourly["total_tokens"].tolist() == [88.0, 9.0]


@pytest.mark.parametrize(
    ("body", "options", "message"),
    [
        (
            "timestamp,input_tokens,output_tokens\n2026-11-30T10:00:00Z,-1,3\n",
            RequestLogOptions(),
            r"row 1 \(line 2\), column 'input_tokens': -1 is not a non-negative token count",
        ),
        (
            "timestamp,input_tokens,output_tokens\n2026-11-30T10:00:00Z,x,3\n",
            RequestLogOptions(),
            r"column 'input_tokens': 'x' is not a non-negative",
        ),
        (
            "when,input_tokens,output_tokens\n2026-11-30T10:00:00Z,1,3\n",
            RequestLogOptions(),
            r"cannot find the timestamp column .* --timestamp-column",
        ),
        (
            "timestamp,a,b\n2026-11-30T10:00:00Z,1,3\n",
            RequestLogOptions(),
            r"cannot find the input-token column",
        ),
        (
            "timestamp,in,out\n2026-11-30T10:00:00Z,1,3\n",
            RequestLogOptions(input_column="in", output_column="nope"),
            r"output-token column 'nope' not found",
        ),
        ("timestamp,input_tokens,output_tokens\n", RequestLogOptions(), r"empty log"),
        ("", RequestLogOptions(), r"empty file"),
    ],
)
def test_request_log_rejections(body: str, options: RequestLogOptions, message: str) -> None:
    with pytest.raises(IngestError, match=message):
        aggregate_request_log(io.StringIO(body), options)


def test_explicit_column_names() -> None:
    body = io.StringIO("t,in,out,extra\n1764496800,5,6,x\n1764496801,5,6,y\n")
    hourly = aggregate_request_log(
        body, RequestLogOptions(timestamp_column="t", input_column="in", output_column="out")
    )
    assert hourly["hour"].tolist() == [pd.Timestamp("2025-11-30T10:00Z")]
    assert hourly["requests"].tolist() == [2.0]
