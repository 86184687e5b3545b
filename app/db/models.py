"""ORM models: the tables of DESIGN.md §3. API schemas live apart, in app.api.schemas."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    event,
    select,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Mapper, mapped_column

from app.db.types import UTCDateTime
from app.errors import ConflictError

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Series(Base):
    """One monitored inference service, e.g. ``prod-us/llama-3.1-70b``."""

    __tablename__ = "series"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    labels: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Observation(Base):
    """Load of one series in one UTC hour. Re-ingesting the hour replaces the row.

    ``series_id`` deliberately has no foreign key: PostgreSQL checks a foreign key row by row,
    which made a million-row bulk ingest about five times slower. Integrity is kept by the only
    two writers instead: ingest locks the series rows it writes to (``FOR KEY SHARE``) in the
    same transaction, and deleting a series deletes its observations in its transaction.
    """

    __tablename__ = "observations"

    series_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    hour: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    requests: Mapped[float] = mapped_column(Float)
    prompt_tokens: Mapped[float | None] = mapped_column(Float)
    completion_tokens: Mapped[float | None] = mapped_column(Float)
    total_tokens: Mapped[float | None] = mapped_column(Float)
    peak_rps: Mapped[float | None] = mapped_column(Float)


class Event(Base):
    """Business calendar entry: fed to Prophet as a holiday, shown as a Grafana annotation."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    start: Mapped[datetime] = mapped_column(UTCDateTime())
    end: Mapped[datetime] = mapped_column(UTCDateTime())
    series_id: Mapped[int | None] = mapped_column(
        ForeignKey("series.id", ondelete="CASCADE"), index=True
    )
    multiplier: Mapped[float | None] = mapped_column(Float)
    description: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class GpuProfile(Base):
    """What one GPU delivers for one model, and what it costs."""

    __tablename__ = "gpu_profiles"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    gpu_type: Mapped[str] = mapped_column(String(100))
    model: Mapped[str] = mapped_column(String(200))
    tokens_per_s_per_gpu: Mapped[float] = mapped_column(Float)
    gpus_per_replica: Mapped[int] = mapped_column(Integer, default=1)
    usd_per_hour_on_demand: Mapped[float | None] = mapped_column(Float)
    usd_per_hour_reserved: Mapped[float | None] = mapped_column(Float)
    usd_per_hour_spot: Mapped[float | None] = mapped_column(Float)
    # physical ceilings of its SLO capacity; null: the catalog's figure for the names, if known
    parameters: Mapped[float | None] = mapped_column(Float)
    context_length_tokens: Mapped[int | None] = mapped_column(Integer)
    peak_tflops: Mapped[float | None] = mapped_column(Float)
    memory_bandwidth_gb_per_s: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ForecastRun(Base):
    """One forecast of one series x metric. Written in one transaction together with its
    points, so readers only ever see complete runs (or failed ones, which have no points).

    ``kind`` is ``nightly`` (a fit: model selection, parameters, backtest scores, and the
    ``state`` a refresh needs) or ``refresh`` (the nightly ``parent``'s model conditioned on
    the hours that arrived since, without refitting; model and scores are the parent's).
    Readers and plans use the newest complete run of either kind."""

    __tablename__ = "forecast_runs"
    __table_args__ = (Index("ix_forecast_runs_latest", "series_id", "metric", "status", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id", ondelete="CASCADE"))
    metric: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(20))
    trained_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    horizon: Mapped[int] = mapped_column(Integer)
    model: Mapped[str | None] = mapped_column(String(50))
    backtest_metric: Mapped[str] = mapped_column(String(20), default="mase")
    backtest_error: Mapped[float | None] = mapped_column(Float)
    scores: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    notes: Mapped[list[str]] = mapped_column(JSON, default=list)
    anomalies: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    reason: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    duration_s: Mapped[float | None] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(20), default="nightly", server_default="nightly")
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("forecast_runs.id", ondelete="CASCADE"), index=True
    )
    state: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ForecastPoint(Base):
    """One forecast hour of a run: 80 % and 95 % interval bounds and the quantiles
    ``q50 … q99`` (the 0.5 … 0.99 quantiles; null on runs stored before they existed)."""

    __tablename__ = "forecast_points"

    run_id: Mapped[int] = mapped_column(
        ForeignKey("forecast_runs.id", ondelete="CASCADE"), primary_key=True
    )
    ds: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    yhat: Mapped[float] = mapped_column(Float)
    lo_80: Mapped[float] = mapped_column(Float)
    hi_80: Mapped[float] = mapped_column(Float)
    lo_95: Mapped[float] = mapped_column(Float)
    hi_95: Mapped[float] = mapped_column(Float)
    q50: Mapped[float | None] = mapped_column(Float)
    q60: Mapped[float | None] = mapped_column(Float)
    q70: Mapped[float | None] = mapped_column(Float)
    q80: Mapped[float | None] = mapped_column(Float)
    q90: Mapped[float | None] = mapped_column(Float)
    q95: Mapped[float | None] = mapped_column(Float)
    q99: Mapped[float | None] = mapped_column(Float)


class JobLock(Base):
    """A named lock row for databases without advisory locks (SQLite)."""

    __tablename__ = "job_locks"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    hostname: Mapped[str] = mapped_column(String(200))
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class JobRun(Base):
    """One execution of the nightly forecast job, for /metrics and audit."""

    __tablename__ = "job_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), default="nightly")
    status: Mapped[str] = mapped_column(String(20))  # running | complete | failed
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    duration_s: Mapped[float | None] = mapped_column(Float)
    items: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    failed_series: Mapped[list[str]] = mapped_column(JSON, default=list)


class PlanReplay(Base):
    """The latest plan replay of one series x GPU profile x parameters (the backtest object),
    kept so the overview and Grafana can show it without replaying on every read."""

    __tablename__ = "plan_replays"
    __table_args__ = (Index("ix_plan_replays_key", "series_id", "profile", "params_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id", ondelete="CASCADE"))
    profile: Mapped[str] = mapped_column(String(100))
    params_key: Mapped[str] = mapped_column(String(500))
    window_end: Mapped[datetime] = mapped_column(UTCDateTime())
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class PlanCalibration(Base):
    """The ``band=auto`` choice of one series x GPU profile x plan parameters, made once per
    nightly run (``run_id``): the lowest stored quantile whose replayed time over capacity met
    the risk target, with the replayed figures of every quantile."""

    __tablename__ = "plan_calibrations"
    __table_args__ = (
        Index("ix_plan_calibrations_key", "series_id", "profile", "params_key", "run_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id", ondelete="CASCADE"))
    profile: Mapped[str] = mapped_column(String(100))
    params_key: Mapped[str] = mapped_column(String(500))
    run_id: Mapped[int] = mapped_column(Integer)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class SeriesSource(Base):
    """Where the hourly loop imports a series' load from: a Prometheus server and the PromQL of
    each metric, as ``gpucast ingest prometheus`` takes them. ``bearer_token`` is write-only
    (never shown); ``updated_at`` is when the settings last changed; the ``last_*`` and failure
    columns are written by the hourly import and read by ``/metrics``."""

    __tablename__ = "series_sources"

    series_id: Mapped[int] = mapped_column(
        ForeignKey("series.id", ondelete="CASCADE"), primary_key=True
    )
    url: Mapped[str] = mapped_column(String(2000))
    requests_query: Mapped[str] = mapped_column(Text)
    prompt_tokens_query: Mapped[str | None] = mapped_column(Text)
    completion_tokens_query: Mapped[str | None] = mapped_column(Text)
    bearer_token: Mapped[str | None] = mapped_column(Text)
    shift: Mapped[bool] = mapped_column(default=True)
    timeout_s: Mapped[float] = mapped_column(Float, default=30.0)
    lookback_hours: Mapped[int] = mapped_column(Integer, default=48)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_error: Mapped[str | None] = mapped_column(Text)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    failures_total: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Pool(Base):
    """A shared fleet of identical nodes (``gpus_per_node`` GPUs each, priced per node-hour)
    that several series' replicas are packed onto; ``quota_nodes`` caps it. Its members are
    :class:`PoolMember` rows."""

    __tablename__ = "pools"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    gpu_type: Mapped[str | None] = mapped_column(String(100))
    gpus_per_node: Mapped[int] = mapped_column(Integer, default=8)
    node_usd_per_hour_on_demand: Mapped[float] = mapped_column(Float)
    node_usd_per_hour_reserved: Mapped[float | None] = mapped_column(Float)
    node_usd_per_hour_spot: Mapped[float | None] = mapped_column(Float)
    quota_nodes: Mapped[int | None] = mapped_column(Integer)
    spot_interruption: Mapped[float] = mapped_column(Float, default=0.05)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class PoolMember(Base):
    """One series in a pool, served with one GPU profile at one priority class. Deleting the
    pool or the series removes the row; a GPU profile that a pool uses cannot be deleted."""

    __tablename__ = "pool_members"
    __table_args__ = (UniqueConstraint("pool_id", "series_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"))
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id", ondelete="CASCADE"), index=True)
    gpu_profile_id: Mapped[int] = mapped_column(
        ForeignKey("gpu_profiles.id", ondelete="RESTRICT"), index=True
    )
    priority: Mapped[str] = mapped_column(String(20))
    spot_ok: Mapped[bool] = mapped_column(default=False)


class GpuProfileLoadTest(Base):
    """The measured load-test table of one GPU profile: one model on one GPU type at one
    tensor-parallel degree and precision. ``records`` are the table's rows and ``meta`` the
    rest of it, as ``capacity.LoadTestTable.to_records()`` and ``.meta()`` give them (what
    ``from_records`` rebuilds it from); ``sources`` the imported file names.
    Deleting the profile deletes its table; replacing the table writes a new row (new id)."""

    __tablename__ = "gpu_profile_loadtests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    gpu_profile_id: Mapped[int] = mapped_column(
        ForeignKey("gpu_profiles.id", ondelete="CASCADE"), unique=True
    )
    model: Mapped[str | None] = mapped_column(String(200))
    gpu_type: Mapped[str | None] = mapped_column(String(100))
    tensor_parallel: Mapped[int | None] = mapped_column(Integer)
    precision: Mapped[str | None] = mapped_column(String(100))
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    sources: Mapped[list[str]] = mapped_column(JSON, default=list)
    records: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class SeriesDeployment(Base):
    """The GPU profile (and optional p95 latency SLO) that serves a series, so every surface
    can plan it without being told the profile. Deleting the series deletes it; a profile
    that a deployment uses cannot be deleted (409 naming the series)."""

    __tablename__ = "series_deployments"

    series_id: Mapped[int] = mapped_column(
        ForeignKey("series.id", ondelete="CASCADE"), primary_key=True
    )
    gpu_profile_id: Mapped[int] = mapped_column(
        ForeignKey("gpu_profiles.id", ondelete="RESTRICT"), index=True
    )
    ttft_p95_s: Mapped[float | None] = mapped_column(Float)
    tpot_p95_s: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ProfileObservation(Base):
    """A production hour of a profile's fleet (totals, p95s served, the lab's when posted)."""

    __tablename__ = "gpu_profile_observations"

    gpu_profile_id: Mapped[int] = mapped_column(
        ForeignKey("gpu_profiles.id", ondelete="CASCADE"), primary_key=True
    )
    hour: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    replicas: Mapped[int] = mapped_column(Integer)
    requests: Mapped[float] = mapped_column(Float)
    prompt_tokens: Mapped[float] = mapped_column(Float)
    completion_tokens: Mapped[float] = mapped_column(Float)
    ttft_p95_s: Mapped[float] = mapped_column(Float)
    tpot_p95_s: Mapped[float] = mapped_column(Float)
    expected_ttft_p95_s: Mapped[float | None] = mapped_column(Float)
    expected_tpot_p95_s: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


@event.listens_for(GpuProfile, "before_delete")
def _refuse_deleting_a_pooled_profile(
    _mapper: Mapper[GpuProfile], connection: Connection, profile: GpuProfile
) -> None:
    # The foreign key would refuse it too, but as an IntegrityError (a 500); say which pools.
    pools = connection.scalars(
        select(Pool.name)
        .join(PoolMember, PoolMember.pool_id == Pool.id)
        .where(PoolMember.gpu_profile_id == profile.id)
        .distinct()
        .order_by(Pool.name)
    ).all()
    if pools:
        shown = ", ".join(map(repr, pools[:5])) + (f" and {len(pools) - 5} more" * (len(pools) > 5))
        raise ConflictError(
            f"GPU profile {profile.name!r} is used by pool(s) {shown}; "
            "remove it from their members first"
        )


@event.listens_for(GpuProfile, "before_delete")
def _refuse_deleting_a_deployed_profile(
    _mapper: Mapper[GpuProfile], connection: Connection, profile: GpuProfile
) -> None:
    # As for pools: the foreign key refuses it as an IntegrityError; say which series instead.
    deployed = connection.scalars(
        select(Series.name)
        .join(SeriesDeployment, SeriesDeployment.series_id == Series.id)
        .where(SeriesDeployment.gpu_profile_id == profile.id)
        .order_by(Series.name)
    ).all()
    if deployed:
        shown = ", ".join(map(repr, deployed[:5]))
        shown += f" and {len(deployed) - 5} more" * (len(deployed) > 5)
        raise ConflictError(
            f"GPU profile {profile.name!r} serves series {shown} (their deployment); deploy "
            "them on another profile or clear their deployment first"
        )
