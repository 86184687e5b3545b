"""A GPU profile's stored load-test table: written whole (import or replace, in the caller's
transaction), read back as rows, as a summary, and as a ``capacity.LoadTestTable``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.models import GpuProfile, GpuProfileLoadTest

LOADTEST_URL = "/v1/gpu-profiles/{name}/loadtest"


def stored_table(session: Session, *, profile_id: int) -> GpuProfileLoadTest | None:
    """The profile's load-test row, None for a one-number profile."""
    return session.scalar(
        select(GpuProfileLoadTest).where(GpuProfileLoadTest.gpu_profile_id == profile_id)
    )


def stored_tables(session: Session) -> dict[int, GpuProfileLoadTest]:
    """Every stored load-test row by profile id."""
    return {row.gpu_profile_id: row for row in session.scalars(select(GpuProfileLoadTest))}


def store_table(
    session: Session, *, profile: GpuProfile, table: Any, sources: list[str]
) -> GpuProfileLoadTest:
    """Store ``table`` (a ``capacity.LoadTestTable``) as the profile's, replacing any other
    (a new row, so readers keyed on its id see the change)."""
    session.execute(
        delete(GpuProfileLoadTest).where(GpuProfileLoadTest.gpu_profile_id == profile.id)
    )
    row = GpuProfileLoadTest(
        gpu_profile_id=profile.id,
        model=table.model,
        gpu_type=table.gpu_type,
        tensor_parallel=table.tensor_parallel,
        precision=table.precision,
        meta=table.meta(),
        sources=list(sources),
        records=table.to_records(),
        created_at=datetime.now(UTC),
    )
    session.add(row)
    session.flush()
    return row


def table_summary(row: GpuProfileLoadTest) -> dict[str, Any]:
    """What the table holds, without its rows: setup, mixes, row count, where it came from."""
    mixes = sorted(
        {(r["prompt_tokens"], r["completion_tokens"]) for r in row.records},
        key=lambda mix: (mix[0] or 0.0, mix[1] or 0.0),
    )
    return {
        "model": row.model,
        "gpu_type": row.gpu_type,
        "tensor_parallel": row.tensor_parallel,
        "precision": row.precision,
        "engine": row.meta.get("engine"),
        "source_format": row.meta.get("source_format"),
        "latency_statistic": row.meta.get("latency_statistic"),
        "throughput_derived": row.meta.get("throughput_derived"),
        "notes": list(row.meta.get("notes") or []),
        "sources": list(row.sources),
        "rows": len(row.records),
        "mixes": [{"prompt_tokens": p, "completion_tokens": c} for p, c in mixes],
        "imported_at": row.created_at,
    }


def profile_view(profile: GpuProfile, row: GpuProfileLoadTest | None) -> dict[str, Any]:
    """The profile as ``GET /v1/gpu-profiles/{name}`` shows it: its figures and, for a
    load-test profile, the table's summary with the link to its rows."""
    return {
        "name": profile.name,
        "gpu_type": profile.gpu_type,
        "model": profile.model,
        "tokens_per_s_per_gpu": profile.tokens_per_s_per_gpu,
        "gpus_per_replica": profile.gpus_per_replica,
        "usd_per_hour_on_demand": profile.usd_per_hour_on_demand,
        "usd_per_hour_reserved": profile.usd_per_hour_reserved,
        "usd_per_hour_spot": profile.usd_per_hour_spot,
        "parameters": profile.parameters,
        "context_length_tokens": profile.context_length_tokens,
        "peak_tflops": profile.peak_tflops,
        "memory_bandwidth_gb_per_s": profile.memory_bandwidth_gb_per_s,
        "loadtest": None
        if row is None
        else table_summary(row) | {"url": LOADTEST_URL.format(name=profile.name)},
    }
