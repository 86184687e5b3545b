"""What a series' source and a deployment's serving source share in the API: the Prometheus
connection's fields and the import state shown back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from app.sources.spec import (
    DEFAULT_LOOKBACK_HOURS,
    DEFAULT_TIMEOUT_S,
    MAX_LOOKBACK_HOURS,
    MAX_TIMEOUT_S,
    MAX_TOKEN_LENGTH,
    MAX_URL_LENGTH,
    TOKEN_PATTERN,
    URL_PATTERN,
)


def url_field() -> Any:
    return Field(
        max_length=MAX_URL_LENGTH,
        examples=["http://prometheus:9090"],
        description="Prometheus base URL; user:password@ in it is sent as basic auth",
        # Documented only: the spec's validate checks it with messages that name the rule.
        json_schema_extra={"pattern": URL_PATTERN},
    )


def token_field() -> Any:
    return Field(
        default=None,
        min_length=1,
        max_length=MAX_TOKEN_LENGTH,
        description="sent as 'Authorization: Bearer …'; write-only",
        json_schema_extra={"pattern": TOKEN_PATTERN, "writeOnly": True},
    )


def timeout_field() -> Any:
    return Field(
        default=DEFAULT_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False, strict=True
    )


def lookback_field(description: str) -> Any:
    return Field(
        default=DEFAULT_LOOKBACK_HOURS, ge=1, le=MAX_LOOKBACK_HOURS, description=description
    )


class ImportState(BaseModel):
    """How a source's imports went, and when its settings were made."""

    last_attempt_at: datetime | None
    last_success_at: datetime | None
    last_error: str | None
    consecutive_failures: int
    failures_total: int
    created_at: datetime
    updated_at: datetime
