"""Column vocabulary of the ingest formats."""

from __future__ import annotations

TIMESTAMP_ALIASES = ("timestamp", "hour", "ds", "time", "datetime", "date")
SERIES_COLUMN = "series"
NUMERIC_COLUMNS = (
    "requests",
    "qps",
    "prompt_tokens",
    "completion_tokens",
    "tokens",
    "total_tokens",
    "peak_rps",
)
HOURLY_KNOWN = frozenset((*TIMESTAMP_ALIASES, SERIES_COLUMN, *NUMERIC_COLUMNS))

# Canonical hourly frame written to the observations table.
CANONICAL = (
    "series",
    "hour",
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "peak_rps",
)

REQUEST_TIMESTAMP_ALIASES = (
    "timestamp",
    "timestamp_ms",
    "timestamp_s",
    "timestamp_us",
    "time",
    "arrival_time",
    "created_at",
    "ts",
)
REQUEST_INPUT_ALIASES = (
    "contexttokens",
    "input_length",
    "input_tokens",
    "prompt_tokens",
    "num_prompt_tokens",
    "prompt_len",
    "input_len",
)
REQUEST_OUTPUT_ALIASES = (
    "generatedtokens",
    "output_length",
    "output_tokens",
    "completion_tokens",
    "num_completion_tokens",
    "output_len",
    "completion_len",
)
