"""Stateless calculators: first-principles sizing, scaling-policy simulation, catalogs."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

import numpy as np
import pandas as pd
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy.orm import Session

import capacity
from app.api.deps import DatabaseDep, ReadAuth
from app.api.heavy import run_heavy
from app.db import Database, repository
from app.errors import InputError

router = APIRouter(prefix="/v1/capacity", tags=["capacity"])


class EstimateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(examples=["llama-3.1-70b"], max_length=100)
    gpu: str = Field(examples=["h100-80g"], max_length=100)
    qps: float = Field(gt=0, le=1e7, allow_inf_nan=False, description="peak requests/s")
    slo_latency_s: float = Field(gt=0, le=3600, allow_inf_nan=False)
    concurrency: int = Field(default=32, ge=1, le=100_000)
    precision: Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"] = "bf16"
    context_tokens: int = Field(default=4096, ge=1, le=10_000_000)
    prompt_tokens: int = Field(default=2000, ge=0, le=10_000_000)
    output_tokens: int = Field(default=512, ge=1, le=10_000_000)
    compute_utilization: float = Field(default=0.35, gt=0, le=1, allow_inf_nan=False)
    measured_replica_qps: float | None = Field(default=None, gt=0, le=1e7, allow_inf_nan=False)
    redundancy: float = Field(default=0.3, ge=0, le=10, allow_inf_nan=False)
    growth: float = Field(default=1.0, ge=1, le=100, allow_inf_nan=False)
    usd_per_gpu_hour: float | None = Field(default=None, ge=0, le=1e5, allow_inf_nan=False)


@router.post("/estimate", dependencies=[ReadAuth], responses={422: {}})
def estimate(body: EstimateRequest) -> dict[str, Any]:
    """Size a deployment from first principles: TP degree, tokens/s, replicas, GPUs, cost."""
    try:
        result = capacity.estimate(
            body.model, body.gpu, **body.model_dump(exclude={"model", "gpu"})
        )
    except capacity.CapacityError as exc:
        raise InputError(str(exc)) from exc
    return asdict(result)


#: The work one simulate request may ask for: replayed hours x policies (each hour is replayed
#: minute by minute per policy). One policy over a leap year, or the five default policies over
#: ~73 days; a year of all five takes half a minute of a core, which no read should hold.
MAX_POLICY_HOURS = 24 * 366


class PolicySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["static_peak", "reactive_hpa", "tiered", "predictive", "hybrid"]
    target_utilization: float = Field(default=0.75, gt=0, le=1, allow_inf_nan=False)


class SimulateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    series: str | None = Field(
        default=None, max_length=200, description="replay this series' stored hourly requests"
    )
    load_qps: list[float] | None = Field(
        default=None, max_length=24 * 366, description="or an hourly load in requests/s"
    )
    replica_qps: float = Field(
        gt=0, le=1e7, allow_inf_nan=False, description="requests/s one replica serves at 100 %"
    )
    gpus_per_replica: int = Field(default=1, ge=1, le=64)
    usd_per_gpu_hour: float = Field(default=0.0, ge=0, le=1e5, allow_inf_nan=False)
    cold_start_s: float = Field(default=600, ge=0, le=7200, allow_inf_nan=False)
    last_hours: int = Field(default=24 * 7, ge=24, le=24 * 366)
    policies: list[PolicySpec] = Field(
        default_factory=lambda: [
            PolicySpec(kind=k)
            for k in ("static_peak", "reactive_hpa", "tiered", "predictive", "hybrid")
        ],
        min_length=1,
        max_length=10,
    )

    @model_validator(mode="after")
    def _one_source(self) -> SimulateRequest:
        if (self.series is None) == (self.load_qps is None):
            raise ValueError("give exactly one of 'series' or 'load_qps'")
        if self.load_qps is not None:
            if len(self.load_qps) < 48:
                raise ValueError("load_qps needs at least 48 hourly values")
            if any(not np.isfinite(v) or v < 0 for v in self.load_qps):
                raise ValueError("load_qps values must be finite and >= 0")
        replayed = len(self.load_qps) - 24 if self.load_qps is not None else self.last_hours
        if replayed * len(self.policies) > MAX_POLICY_HOURS:
            raise ValueError(
                f"{replayed:,} replayed hours x {len(self.policies)} policies is more than the "
                f"{MAX_POLICY_HOURS:,} policy-hours one request may simulate; replay fewer hours "
                "or fewer policies per request"
            )
        return self


@router.post("/simulate", dependencies=[ReadAuth], responses={404: {}, 422: {}})
async def simulate(
    request: Request, body: SimulateRequest, database: DatabaseDep
) -> dict[str, Any]:
    """Replay a load under several scaling policies; one KPI row per policy.

    The predictive policy follows a same-hour mean of the previous days (a plan it could have
    had in advance); the first day of the load only warms the policies up and is not scored:
    static peak holds the first day's peak, and every fleet starts sized for the last hour
    before the replay. Runs on the expensive reads' pool (:mod:`app.api.heavy`).
    """
    return await run_heavy(request, _simulate, database, body)


def _simulate(database: Database, body: SimulateRequest) -> dict[str, Any]:
    with database.read_transaction() as session:
        qps = _load(session, body)
    if len(qps) < 48:
        raise InputError(f"need at least 48 hours of load to simulate, got {len(qps)}")
    policies = _policies(body, qps)
    replay = qps.iloc[24:]
    try:
        comparison = capacity.simulate_policies(
            replay,
            policies,
            capacity_per_replica=body.replica_qps,
            gpus_per_replica=body.gpus_per_replica,
            usd_per_gpu_hour=body.usd_per_gpu_hour,
            cold_start_s=body.cold_start_s,
            initial_load=float(qps.iloc[23]),
        )
    except capacity.CapacityError as exc:
        raise InputError(str(exc)) from exc
    table = comparison.table.reset_index()
    return {
        "hours": len(replay),
        "start": replay.index[0].isoformat(),
        "end": replay.index[-1].isoformat(),
        "policies": [
            {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}
            for row in table.to_dict(orient="records")
        ],
    }


def _load(session: Session, body: SimulateRequest) -> pd.Series:
    if body.load_qps is not None:
        index = pd.date_range("2000-01-01T00:00Z", periods=len(body.load_qps), freq="h")
        return pd.Series(body.load_qps, index=index, dtype="float64")
    assert body.series is not None
    series = repository.get_series(session, name=body.series)
    history = repository.observations_frame(session, series_id=series.id)
    if history.empty:
        raise InputError(f"series {body.series!r} has no observations to replay")
    hourly = history.set_index("hour")["requests"].asfreq("h")
    if hourly.isna().any():
        hourly = hourly.interpolate(limit_direction="both")
    return (hourly / 3600.0).iloc[-(body.last_hours + 24) :]


def _policies(body: SimulateRequest, qps: pd.Series) -> dict[str, capacity.Policy]:
    predictive = capacity.Predictive(_same_hour_plan(qps, body.replica_qps))
    named: dict[str, capacity.Policy] = {}
    for spec in body.policies:
        name = spec.kind if spec.kind not in named else f"{spec.kind}@{spec.target_utilization:g}"
        named[name] = _policy(spec, predictive, past_peak=float(qps.iloc[:24].max()))
    return named


def _policy(
    spec: PolicySpec, predictive: capacity.Predictive, *, past_peak: float
) -> capacity.Policy:
    reactive = capacity.ReactiveHPA(target_utilization=spec.target_utilization)
    if spec.kind == "static_peak":
        return capacity.StaticPeak(utilization_target=spec.target_utilization, peak_load=past_peak)
    if spec.kind == "reactive_hpa":
        return reactive
    if spec.kind == "tiered":
        return capacity.Tiered()
    if spec.kind == "predictive":
        return predictive
    return capacity.Hybrid(predictive, reactive)


def _same_hour_plan(qps: pd.Series, replica_qps: float) -> pd.Series:
    """Replicas per hour from the mean of the same hour over the previous (up to 7) days."""
    values = qps.to_numpy()
    planned = np.empty(len(values))
    for i in range(len(values)):
        previous = values[max(0, i - 7 * 24) : i][::-1][23::24] if i >= 24 else values[:1]
        planned[i] = previous.mean() if len(previous) else values[0]
    gpus = capacity.gpus_for_load(
        planned * 1.0, replica_qps, utilization_target=0.75, safety_factor=1.2
    )
    return pd.Series(gpus, index=qps.index).iloc[24:]


@router.get("/catalog", dependencies=[ReadAuth])
def catalog() -> dict[str, Any]:
    """Built-in GPU and model catalogs usable by name in /v1/capacity/estimate."""
    return {
        "gpus": {name: asdict(spec) for name, spec in capacity.GPUS.items()},
        "models": {name: asdict(spec) for name, spec in capacity.MODELS.items()},
    }
