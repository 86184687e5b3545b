"""API schemas of a series' deployment (the GPU profile and latency SLO that serve it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.common.names import NameText
from app.profiles.deployments import MAX_SLO_S

PROFILE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def slo_field(what: str) -> Any:
    """A p95 latency limit in seconds; strict (``true`` or ``"0.5"`` is a client bug)."""
    return Field(
        default=None,
        gt=0,
        le=MAX_SLO_S,
        allow_inf_nan=False,
        strict=True,
        description=f"p95 {what} limit, seconds (give both limits or neither)",
    )


class DeploymentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profile: NameText = Field(min_length=1, max_length=100, description="GPU profile name")
    ttft_p95_s: float | None = slo_field("time to first token")
    tpot_p95_s: float | None = slo_field("time per output token")


class DeploymentOut(BaseModel):
    series: str
    profile: str
    ttft_p95_s: float | None
    tpot_p95_s: float | None
    created_at: datetime
    updated_at: datetime
