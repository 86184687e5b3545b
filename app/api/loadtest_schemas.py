"""API schemas of a GPU profile's measured load test and its SLO capacity."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.common.names import NameText

MAX_FILES = 200
MAX_FILE_CHARS = 5_000_000


class LoadTestFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: NameText = Field(
        min_length=1, max_length=200, description="file name, used in error messages"
    )
    content: str = Field(
        min_length=1,
        max_length=MAX_FILE_CHARS,
        description="the file's text: a load-test CSV, a `vllm bench serve --save-result` JSON, "
        "a genai-perf profile_export_genai_perf.json, a guidellm benchmarks report (JSON or "
        "YAML), an inference-perf stage_N_lifecycle_metrics.json, or a genai-bench run file or "
        "its experiment_metadata.json",
    )


def _price(what: str) -> object:
    return Field(
        default=None,
        ge=0,
        le=1e6,
        allow_inf_nan=False,
        strict=True,
        description=f"{what} USD per GPU-hour",
    )


class PhysicsFields(BaseModel):
    """A profile's figures for the physical ceilings of its SLO capacity (null: the catalog's
    figure for the profile's model or GPU name, where known)."""

    parameters: float | None = Field(
        default=None,
        gt=0,
        le=1e14,
        allow_inf_nan=False,
        strict=True,
        description="the model's parameter count (active parameters for a mixture of experts)",
    )
    context_length_tokens: int | None = Field(
        default=None, ge=1, le=100_000_000, description="the model's context length, tokens"
    )
    peak_tflops: float | None = Field(
        default=None,
        gt=0,
        le=1e6,
        allow_inf_nan=False,
        strict=True,
        description="one GPU's peak dense tensor TFLOPS at the serving precision",
    )
    memory_bandwidth_gb_per_s: float | None = Field(
        default=None,
        gt=0,
        le=1e6,
        allow_inf_nan=False,
        strict=True,
        description="one GPU's memory bandwidth, GB/s",
    )


class LoadTestImport(PhysicsFields):
    """A GPU profile from a measured load test: the profile's figures and the files (one
    format per import; several JSON files are one load level each)."""

    model_config = ConfigDict(extra="forbid")

    gpu_type: NameText = Field(min_length=1, max_length=100, examples=["H100-SXM-80GB"])
    model: NameText | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        examples=["llama-3-70b-instruct"],
        description="the model served; must be the size of the model the files name (null: "
        "theirs; required when they name none)",
    )
    gpus_per_replica: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="GPUs per replica; must equal the GPU count / tensor-parallel degree the "
        "files state (null: theirs; required when they state none)",
    )
    usd_per_hour_on_demand: float | None = _price("on-demand")  # type: ignore[assignment]
    usd_per_hour_reserved: float | None = _price("reserved")  # type: ignore[assignment]
    usd_per_hour_spot: float | None = _price("spot")  # type: ignore[assignment]
    tensor_parallel: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="select this tensor-parallel degree of a CSV that holds several setups "
        "(other formats: must be the one the files state)",
    )
    precision: NameText | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="select this precision of a CSV that holds several setups",
    )
    files: list[LoadTestFile] = Field(min_length=1, max_length=MAX_FILES)


class LoadTestMix(BaseModel):
    prompt_tokens: float
    completion_tokens: float


class LoadTestSummary(BaseModel):
    model: str | None
    gpu_type: str | None
    tensor_parallel: int | None
    precision: str | None
    engine: str | None
    source_format: str | None
    latency_statistic: str | None
    throughput_derived: bool | None
    notes: list[str]
    sources: list[str]
    rows: int
    mixes: list[LoadTestMix]
    imported_at: datetime


class LoadTestRow(BaseModel):
    prompt_tokens: float | None
    completion_tokens: float | None
    concurrency: float | None
    request_rate: float | None
    request_throughput_rps: float | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p95_s: float | None
    tpot_p99_s: float | None
    ttft_mean_s: float | None
    tpot_mean_s: float | None


class LoadTestOut(LoadTestSummary):
    profile: str
    records: list[LoadTestRow]


class ProfileWithLoadTest(BaseModel):
    name: str
    gpu_type: str
    model: str
    tokens_per_s_per_gpu: float
    gpus_per_replica: int
    usd_per_hour_on_demand: float | None
    usd_per_hour_reserved: float | None
    usd_per_hour_spot: float | None
    parameters: float | None = None
    context_length_tokens: int | None = None
    peak_tflops: float | None = None
    memory_bandwidth_gb_per_s: float | None = None
    loadtest: LoadTestSummary


class SloSensitivityOut(BaseModel):
    limit: Literal["ttft", "tpot"] = Field(description="the binding limit")
    tighter_requests_per_s: float = Field(description="capacity with that limit 5 % tighter")
    looser_requests_per_s: float = Field(description="capacity with that limit 5 % looser")
    flat: bool = Field(
        description="the two differ by more than 30 %: the knee lies where latency barely "
        "grows with load, and small latency errors move it far"
    )


class SloCapacityOut(BaseModel):
    profile: str
    gpus_per_replica: int
    prompt_tokens: float
    completion_tokens: float
    ttft_p95_s: float
    tpot_p95_s: float
    requests_per_s_per_replica: float = Field(
        description="the largest request rate one replica sustains within both p95 limits"
    )
    requests_per_s_per_replica_low: float = Field(
        description="the low edge of the range the capacity is expected in (from the model's "
        "leave-one-mix-out errors on its table); plans size unmeasured mixes here"
    )
    requests_per_s_per_replica_high: float = Field(description="the high edge of that range")
    basis: Literal["measured", "interpolated", "extrapolated"] = Field(
        description="measured: a measured mix's knee; interpolated: inside the measured prompt "
        "and completion ranges; extrapolated: outside them"
    )
    tokens_per_s_per_replica: float
    tokens_per_s_per_gpu: float
    concurrency: float | None = Field(description="requests in flight at the knee")
    binding: Literal["ttft", "tpot", "measured range", "physics"] = Field(
        description="the limit reached at the knee; 'measured range': the SLO holds at the "
        "highest load measured, so the capacity is at least this; 'physics': the model's figure "
        "was above what the replica's compute or memory bandwidth allows, and this is that "
        "ceiling"
    )
    method: Literal["measured", "interpolated", "extrapolated"]
    note: str
    sensitivity: SloSensitivityOut | None = Field(
        description="how far the capacity moves with the binding limit; null when none binds"
    )
    measured_mixes: int
    production_hours: int = Field(
        description="production hours of the last 14 days near this mix (prompt and completion "
        "tokens each within 1.5x) folded into the answer: a hour within the SLO shows the "
        "capacity is at least its load, one that broke it that it is below; hours below the "
        "knee never raise the answer above the highest load they observed"
    )


class ProfileObservationOut(BaseModel):
    """One production hour of a profile's fleet (totals across its replicas)."""

    hour: datetime
    replicas: int
    requests: float
    prompt_tokens: float
    completion_tokens: float
    ttft_p95_s: float
    tpot_p95_s: float
    expected_ttft_p95_s: float | None = Field(
        description="the p95 TTFT the profile's load-test model gave at this hour's load and mix "
        "when it was posted (null: no table, or a load near the model's saturation)"
    )
    expected_tpot_p95_s: float | None = Field(description="the same for p95 TPOT")


class ObservationsStoredOut(BaseModel):
    profile: str
    rows_written: int = Field(description="hours stored; an hour stored before was replaced")
    first_hour: datetime
    last_hour: datetime
