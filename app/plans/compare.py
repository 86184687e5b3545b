"""The cheapest GPU type for a series: tomorrow's plan on each of several profiles, at one
latency SLO, priced as the plan is, and the cheapest that meets the SLO marked.

Each profile is planned exactly as the capacity endpoint plans it (same parameters, the
given SLO or the deployment's); a load-test profile is sized with the SLO capacity at each
hour's mix, a one-number profile with its tokens/s per GPU (it cannot say whether the SLO
holds: ``slo_met`` is null). A profile on which some hour's mix misses the SLO even at the
lowest load cannot serve the series: ``slo_met`` false, no plan.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

import capacity
from app.common.names import echo
from app.db import repository
from app.db.models import GpuProfile
from app.errors import InputError
from app.plans.params import PlanParams
from app.plans.service import PlanCache, series_plan
from app.profiles.deployments import Slo, find_deployment

MAX_COMPARED = 20


def profile_names(text: str) -> list[str]:
    """The ``profiles`` list (comma-separated, 1 to MAX_COMPARED distinct names)."""
    names = [name.strip() for name in text.split(",")]
    if not text.strip() or any(not name for name in names):
        raise InputError(f"profiles must be comma-separated profile names, got {echo(text)}")
    if len(set(names)) != len(names):
        raise InputError(f"profiles names a profile twice: {echo(text)}")
    if len(names) > MAX_COMPARED:
        raise InputError(f"compare at most {MAX_COMPARED} profiles at once, got {len(names)}")
    return names


def same_model_profiles(session: Session, *, series_name: str) -> list[str]:
    """The profiles of the deployed profile's model (the deployed one first); none without a
    deployment (profiles of other models do not serve the series)."""
    deployment = find_deployment(session, series_name=series_name)
    if deployment is None:
        return []
    deployed = repository.get_gpu_profile(session, name=deployment.profile)
    others = session.scalars(
        select(GpuProfile.name)
        .where(GpuProfile.model == deployed.model, GpuProfile.name != deployed.name)
        .order_by(GpuProfile.name)
        .limit(MAX_COMPARED - 1)
    )
    return [deployed.name, *others]


def compare_profiles(
    session: Session,
    *,
    series_name: str,
    profiles: list[str],
    params: PlanParams,
    slo: Slo | None = None,
    cache: PlanCache | None = None,
) -> dict[str, Any]:
    """Per profile: GPUs per hour, GPU-hours, cost_usd (the plan's total, None unpriced),
    whether the SLO is met, and ``cheapest`` on the cheapest priced profile that meets it."""
    repository.get_series(session, name=series_name)
    for name in profiles:
        repository.get_gpu_profile(session, name=name)
    rows = [_row(session, series_name, name, params, slo, cache) for name in profiles]
    eligible = [r for r in rows if r["slo_met"] is not False and r["cost_usd"] is not None]
    cheapest = min(eligible, key=lambda r: r["cost_usd"]) if eligible else None
    for row in rows:
        row["cheapest"] = row is cheapest
    used = next((r["slo"] for r in rows if r["slo"] is not None), None)
    return {
        "series": series_name,
        "slo": used,
        "cheapest_profile": cheapest["profile"] if cheapest else None,
        **params.as_dict(),
        "profiles": rows,
    }


def _row(
    session: Session,
    series_name: str,
    name: str,
    params: PlanParams,
    slo: Slo | None,
    cache: PlanCache | None,
) -> dict[str, Any]:
    profile = repository.get_gpu_profile(session, name=name)
    row: dict[str, Any] = {
        "profile": name,
        "gpu_type": profile.gpu_type,
        "model": profile.model,
        "gpus_per_replica": profile.gpus_per_replica,
    }
    try:
        plan = series_plan(
            session, series_name=series_name, profile_name=name, params=params, slo=slo, cache=cache
        )
    except InputError as exc:
        if not isinstance(exc.__cause__, capacity.SloUnreachableError):
            raise
        binding_slo = slo or _deployment_slo(session, series_name)
        return row | {
            "slo": binding_slo.as_dict() if binding_slo else None,
            "slo_met": False,
            "capacity_basis": "slo capacity at each hour's mix",
            "sized_band": None,
            "gpus_by_hour": None,
            "peak_gpus": None,
            "gpu_hours": None,
            "cost_usd": None,
            "note": str(exc),
        }
    frame = plan.plan.frame
    return row | {
        "slo": plan.slo.as_dict() if plan.slo else None,
        "slo_met": True if plan.sized_at_slo else None,
        "capacity_basis": plan.capacity_basis,
        "sized_band": plan.plan.band,
        "gpus_by_hour": [
            {"hour": hour.to_pydatetime(), "gpus": int(gpus)}
            for hour, gpus in zip(frame["hour"], frame["gpus"], strict=True)
        ],
        "peak_gpus": int(plan.plan.peak_gpus),
        "gpu_hours": float(plan.plan.gpu_hours),
        "cost_usd": float(plan.cost.total_usd) if plan.cost is not None else None,
        "note": _note(plan),
    }


def _deployment_slo(session: Session, series_name: str) -> Slo | None:
    deployment = find_deployment(session, series_name=series_name)
    return deployment.slo if deployment else None


def _note(plan: Any) -> str:
    if plan.sized_at_slo:
        note = f"sized at the SLO capacity of each hour's mix ({plan.mix_source})"
    elif plan.slo is not None:
        note = (
            "one-number profile: sized on its tokens/s per GPU; whether it meets the SLO is unknown"
        )
    else:
        note = "no SLO: sized on the profile's tokens/s per GPU"
    if plan.cost is None:
        note += "; the profile has no on-demand price, so it is not priced"
    return note
