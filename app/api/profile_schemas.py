"""The API schema of a stored GPU profile as read back."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class GpuProfileOut(BaseModel):
    """A stored profile as read back: a figure stored outside today's bounds (before gpucast
    checked it) reads as null, and ``problem`` says what is wrong with the profile."""

    model_config = ConfigDict(from_attributes=True)

    name: str
    gpu_type: str
    model: str
    tokens_per_s_per_gpu: float | None = Field(
        description="null when the stored figure is unusable"
    )
    gpus_per_replica: int | None
    usd_per_hour_on_demand: float | None = None
    usd_per_hour_reserved: float | None = None
    usd_per_hour_spot: float | None = None
    parameters: float | None = None
    context_length_tokens: int | None = None
    peak_tflops: float | None = None
    memory_bandwidth_gb_per_s: float | None = None
    problem: str | None = Field(
        default=None,
        description="what makes the stored profile unusable (a figure or a load-test row "
        "stored before gpucast checked it); plans and capacity on it answer 409 until it is "
        "replaced. null for a usable profile",
    )
