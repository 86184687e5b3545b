"""API schemas (pydantic), apart from the ORM models."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from app.api.loadtest_schemas import PhysicsFields
from app.api.source_fields import (
    ImportState,
    lookback_field,
    timeout_field,
    token_field,
    url_field,
)
from app.common import timebounds
from app.common.names import SERIES_NAME_PATTERN, NameText
from app.sources.spec import (
    MAX_QUERY_LENGTH,
    QUERY_PATTERN,
    SourceSpec,
)


def _not_a_number(value: object) -> object:
    # pydantic would read "95587" as Unix seconds; the API documents ISO 8601 date-times only.
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return value
        raise ValueError("use an ISO 8601 date-time such as 2026-11-30T00:00:00Z, not a number")
    return value


# Years 1970 .. 2099 only (app.common.timebounds), stated in the schema so clients and fuzzers know.
_BOUNDED_SCHEMA = WithJsonSchema(
    {"type": "string", "format": "date-time", "pattern": timebounds.DATETIME_PATTERN}
)
IsoDatetime = Annotated[
    datetime,
    BeforeValidator(_not_a_number),
    AfterValidator(timebounds.pydantic_check),
    _BOUNDED_SCHEMA,
]
BoundedAwareDatetime = Annotated[
    AwareDatetime, AfterValidator(timebounds.pydantic_utc), _BOUNDED_SCHEMA
]


# Labels are short names (team=ml): at most 100 of them, each key and value 200 characters.
LabelText = Annotated[NameText, Field(max_length=200)]


class SeriesCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=200,
        examples=["prod-us/llama-3.1-70b"],
        # Documented only: validate_series_name checks it with messages that name the rule.
        json_schema_extra={"pattern": SERIES_NAME_PATTERN},
    )
    labels: dict[LabelText, LabelText] = Field(default_factory=dict, max_length=100)


class SeriesOut(BaseModel):
    name: str
    labels: dict[str, Any]
    created_at: datetime
    observations: int | None = None
    first_hour: datetime | None = None
    last_hour: datetime | None = None


class ObservationOut(BaseModel):
    hour: datetime
    requests: float
    qps: float
    prompt_tokens: float | None
    completion_tokens: float | None
    total_tokens: float | None
    peak_rps: float | None


class GapOut(BaseModel):
    start: str
    end: str


class CoverageOut(BaseModel):
    series: str
    rows: int
    first_hour: str
    last_hour: str
    missing_hours: int
    gaps: list[GapOut]


class IngestOut(BaseModel):
    rows_written: int
    series: list[CoverageOut]
    notes: list[str]


class EventCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: NameText = Field(min_length=1, max_length=200)
    start: BoundedAwareDatetime
    end: BoundedAwareDatetime
    series: NameText | None = Field(default=None, max_length=200)
    # at most a thousandfold either way (a multiplier of 1e-320 is no calendar event)
    multiplier: float | None = Field(default=None, ge=0.001, le=1000, allow_inf_nan=False)
    description: str | None = Field(default=None, max_length=2000)

    @model_validator(mode="after")
    def _end_after_start(self) -> EventCreate:
        if self.end <= self.start:
            raise ValueError("end must be after start")
        if self.series is not None and not self.series.strip():
            # it would be stored as no series: an event on every series
            raise ValueError("series must name a series, or be left out for every series")
        return self


class EventOut(BaseModel):
    id: int
    name: str
    start: datetime
    end: datetime
    series: str | None
    multiplier: float | None
    description: str | None


class GpuProfileBase(PhysicsFields):
    model_config = ConfigDict(extra="forbid")
    # Rates and prices are strict: `true` or "7.5e8" is a client bug, not $1/h or a number.
    # (Counts stay lax: 2.0 is a valid JSON Schema integer.)

    gpu_type: NameText = Field(min_length=1, max_length=100, examples=["H100-80G"])
    model: NameText = Field(min_length=1, max_length=200, examples=["llama-3.1-70b"])
    # 0.01 tokens/s is far below any GPU serving any model: smaller is a unit slip, and every
    # plan on it would be refused
    tokens_per_s_per_gpu: float = Field(ge=0.01, le=1e9, allow_inf_nan=False, strict=True)
    gpus_per_replica: int = Field(default=1, ge=1, le=64)
    usd_per_hour_on_demand: float | None = Field(
        default=None, ge=0, le=1e6, allow_inf_nan=False, strict=True
    )
    usd_per_hour_reserved: float | None = Field(
        default=None, ge=0, le=1e6, allow_inf_nan=False, strict=True
    )
    usd_per_hour_spot: float | None = Field(
        default=None, ge=0, le=1e6, allow_inf_nan=False, strict=True
    )


class GpuProfileCreate(GpuProfileBase):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class PlanHourOut(BaseModel):
    hour: datetime
    load_tokens_per_s: float
    peak_factor: float
    sized_tokens_per_s: float
    raw_gpus: int
    gpus: int
    replicas: int
    short_gpus: int
    expected_utilization: float
    peak_utilization: float
    # the hour's mix (tokens per request; null unless sized at an SLO) and the capacity the
    # hour was sized with
    prompt_tokens_per_request: float | None = None
    completion_tokens_per_request: float | None = None
    requests_per_s_per_replica: float | None = None
    per_gpu_tokens_per_s: float | None = None
    # measured / interpolated / extrapolated (null unless sized at an SLO)
    basis: str | None = None
    # production hours near the hour's mix its capacity rests on (null unless at an SLO)
    production_hours: int | None = None
    # the fleet the deployment is expected to run this hour (null when not measured)
    expected_gpus_p50: int | None = None
    expected_gpus_p90: int | None = None


class ExpectedFleetOut(BaseModel):
    """What the deployment is expected to run: the sized load times its band's replayed ratios."""

    measured: bool
    what: str
    note: str
    gpu_hours: float | None = None
    gpu_hours_p90: float | None = None
    peak_gpus_p50: int | None = None
    peak_gpus_p90: int | None = None
    peak_gpus_p99: int | None = None
    ratios: dict[str, float] | None = None
    cost: dict[str, Any] | None = None


class SloOut(BaseModel):
    ttft_p95_s: float
    tpot_p95_s: float


class ShortHourOut(BaseModel):
    hour: datetime
    raw_gpus: int
    gpus: int
    short_gpus: int


class PeakFactorOut(BaseModel):
    source: str
    note: str
    quantile: float
    days: int
    samples: int
    by_hour_utc: list[float]


class PlanOut(BaseModel):
    """Tomorrow's hourly GPU plan of a series for one GPU profile: the unconstrained counts,
    the executed schedule, its cost against a static fleet priced the same way, and every
    parameter it was made with."""

    series: str
    profile: str
    profile_source: str | None = None
    slo: SloOut | None = None
    capacity_basis: str | None = Field(
        default=None,
        description="what each hour's per-GPU tokens/s is: the SLO capacity at the hour's "
        "prompt/completion mix (a load-test profile with an SLO) or the profile's one figure",
    )
    mix_source: str | None = Field(
        default=None,
        description="at an SLO: where the hours' mix came from (forecast, recent measured)",
    )
    production_hours: int | None = Field(
        default=None,
        description="at an SLO: the most production hours (last 14 days, near the mix) any "
        "hour's capacity rests on",
    )
    source: str
    forecast_run_ids: list[int]
    model: str | None
    trained_until: datetime | None
    valid_until: datetime | None
    stale: bool = Field(
        description="the forecast is older than 36 h, or none of the plan's hours is ahead"
    )
    hours_ahead: int = Field(description="plan hours from the current hour on")
    notes: list[str] = Field(description="what the plan's hours leave out, and what to do")
    tokens_per_request: float | None
    band: str
    utilization_target: float
    safety_factor: float | None
    min_gpus: int
    max_gpus: int | None
    cold_start_s: int
    scale_down_hold_s: int
    per_gpu_tokens_per_s: float
    gpus_per_replica: int
    peak_gpus: int
    peak_replicas: int
    gpu_hours: float
    raw_peak_gpus: int
    raw_gpu_hours: float
    peak_factor: PeakFactorOut
    short_hours: list[ShortHourOut]
    cost: dict[str, Any] | None
    gpus_are: str | None = Field(
        default=None, description="what the hours' gpus and gpu_hours are: the floor KEDA polls"
    )
    expected_fleet: ExpectedFleetOut | None = None
    hours: list[PlanHourOut]


class CompareHourOut(BaseModel):
    hour: datetime
    gpus: int


class ProfileCompareOut(BaseModel):
    profile: str
    gpu_type: str
    model: str
    gpus_per_replica: int
    slo: SloOut | None
    slo_met: bool | None = Field(
        description="the SLO can be met at every hour's mix (null: no SLO, or a one-number "
        "profile that cannot tell)"
    )
    capacity_basis: str
    sized_band: str | None
    gpus_by_hour: list[CompareHourOut] | None
    peak_gpus: int | None
    gpu_hours: float | None
    cost_usd: float | None = Field(description="the plan's total cost, priced as the plan is")
    cheapest: bool
    excluded: str | None = Field(
        description="why this profile cannot be the cheapest (another model, the SLO not met "
        "or unknown, no price); null when it can"
    )
    note: str


class CompareOut(BaseModel):
    """Tomorrow's plan of one series on each of several GPU profiles, at one SLO."""

    series: str
    slo: SloOut | None
    model: str = Field(description="the model compared: the deployed profile's, else the first")
    cheapest_profile: str | None
    cheapest_note: str | None = Field(description="why no profile is the cheapest, when none is")
    band: str
    utilization_target: float
    safety_factor: float | None
    profiles: list[ProfileCompareOut]


class DesiredReplicasOut(BaseModel):
    """What the autoscaler should hold now (polled by the KEDA metrics-api trigger)."""

    series: str
    profile: str
    at: datetime
    hour: datetime | None
    desired_replicas: int
    desired_gpus: int
    scheduled_replicas: int
    fallback_replicas: int
    stale: bool
    source: str
    plan_start: datetime
    plan_end: datetime
    trained_until: datetime | None
    valid_until: datetime | None
    cold_start_s: int
    scale_down_hold_s: int
    gpus_per_replica: int
    # what the deployment is expected to run this hour beside the floor (null: not measured)
    expected_replicas_p50: int | None = None
    expected_replicas_p90: int | None = None


class BacktestPolicyOut(BaseModel):
    policy: str
    recommended: bool
    bound: bool
    description: str
    target_utilization: float | None = None  # reactive-at-equal-risk: the HPA target it is
    #: reactive-at-equal-risk: the two frontier targets it is interpolated between
    between_targets: list[float] | None = None
    gpu_hours: float
    cost_usd: float
    time_over_capacity_share: float
    requests_over_capacity_share: float
    time_over_85_share: float
    scale_events: int
    peak_gpus: int
    mean_utilization: float
    #: With a load-test profile and an SLO: share of minutes the load exceeded what the ready
    #: replicas sustain within the SLO at that hour's measured mix.
    time_over_slo_share: float | None = None


class BacktestOut(BaseModel):
    """The plan replay of a series: one KPI row per policy on the same real load."""

    series: str
    profile: str
    days: int
    resolution_s: int
    tick_s: int
    start: datetime
    end: datetime
    load_source: str
    nightly_hour_utc: int
    decisions: int
    models: list[str]
    params: dict[str, Any]
    priced: bool
    slo: dict[str, Any] | None = None  # the SLO scored (ttft_p95_s, tpot_p95_s, scored)
    policies: list[BacktestPolicyOut]
    versus_static_peak: dict[str, Any]
    versus_instant_bound: dict[str, Any] | None = None
    versus_reactive_at_equal_risk: dict[str, Any] | None = None
    reactive_frontier: list[dict[str, Any]] | None = None
    gpucast_plans: list[dict[str, Any]]
    tradeoff: list[dict[str, Any]] | None = None
    # each night's published expected fleet beside what the replayed deployment ran
    daily: list[dict[str, Any]] | None = None
    expected_fleet_accuracy: dict[str, Any] | None = None
    # the share of the replayed window whose load was not observed (empty load-file cells)
    unobserved_share: float = 0.0
    # the ScaledObject's fallback.behavior the replayed deployment ran
    fallback_behavior: str = "static"
    notes: list[str]


def _query_field(metric: str, example: str | None = None) -> Any:
    return Field(
        default=None if example is None else ...,
        min_length=1,
        max_length=MAX_QUERY_LENGTH,
        description=f"PromQL giving the {metric} of each hour as one series",
        examples=[example] if example else None,
        json_schema_extra={"pattern": QUERY_PATTERN},
    )


class SourceIn(BaseModel):
    """A series' Prometheus source, as ``gpucast ingest prometheus`` takes it. PUT replaces the
    whole source: send the bearer token again, it is never returned."""

    model_config = ConfigDict(extra="forbid")

    url: str = url_field()
    requests_query: str = _query_field(
        "requests", 'sum(increase(vllm:request_success_total{model_name="llama-3.1-70b"}[1h]))'
    )
    prompt_tokens_query: str | None = _query_field("prompt tokens")
    completion_tokens_query: str | None = _query_field("completion tokens")
    bearer_token: str | None = token_field()
    shift: bool = Field(
        default=True,
        strict=True,
        description="store the sample at t as the hour starting at t - 1 h (increase(x[1h]))",
    )
    timeout_s: float = timeout_field()
    lookback_hours: int = lookback_field("how far back an import looks for missing hours")

    @model_validator(mode="after")
    def _valid_source(self) -> SourceIn:
        self.spec().validate()
        return self

    def spec(self) -> SourceSpec:
        return SourceSpec(**self.model_dump())


class SourceOut(ImportState):
    """A series' source with its import state; credentials redacted, the token only "set"."""

    series: str
    url: str
    requests_query: str
    prompt_tokens_query: str | None
    completion_tokens_query: str | None
    bearer_token: Literal["set"] | None
    shift: bool
    timeout_s: float
    lookback_hours: int
