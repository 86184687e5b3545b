"""The cheapest GPU type for a series: tomorrow's plan on each of several profiles, at one
latency SLO, priced as the plan is, and the cheapest that meets the SLO marked.

Each profile is planned exactly as the capacity endpoint plans it (same parameters, the
given SLO or the deployment's); a load-test profile is sized with the SLO capacity at each
hour's mix, a one-number profile with its tokens/s per GPU (it cannot say whether the SLO
holds: ``slo_met`` is null). A profile on which some hour's mix misses the SLO even at the
lowest load cannot serve the series: ``slo_met`` false, no plan.

``cheapest`` is chosen only among the priced profiles that serve the same model (the
deployed profile's, else the first compared profile's) and, at an SLO, are known to meet it:
a one-number profile cannot be the cheapest at an SLO, nor a profile of another model. Each
row says why it cannot be (``excluded``), and when none can, ``cheapest_note`` says why.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

import capacity
from app.common.cancel import checkpoint
from app.common.names import echo
from app.common.words import count
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
    whether the SLO is met, and ``cheapest`` on the cheapest priced profile of the same model
    that meets it (``cheapest_note``: why none, when none does)."""
    repository.get_series(session, name=series_name)
    for name in profiles:
        repository.get_gpu_profile(session, name=name)
    deployment = find_deployment(session, series_name=series_name)
    model = repository.get_gpu_profile(
        session, name=deployment.profile if deployment is not None else profiles[0]
    ).model
    binding_slo = slo or (deployment.slo if deployment is not None else None)
    rows = []
    for name in profiles:
        checkpoint()  # each profile is a plan of its own: stop between them when abandoned
        rows.append(_row(session, series_name, name, params, slo, cache))
    for row in rows:
        row["excluded"] = _excluded(row, model=model, at_slo=binding_slo is not None)
    eligible = [r for r in rows if r["excluded"] is None]
    cheapest = min(eligible, key=lambda r: r["cost_usd"]) if eligible else None
    for row in rows:
        row["cheapest"] = row is cheapest
    return {
        "series": series_name,
        "slo": binding_slo.as_dict() if binding_slo is not None else None,
        "model": model,
        "cheapest_profile": cheapest["profile"] if cheapest else None,
        "cheapest_note": None if cheapest else _none_note(rows, model, binding_slo),
        **params.as_dict(),
        "profiles": rows,
    }


def _excluded(row: dict[str, Any], *, model: str, at_slo: bool) -> str | None:
    """Why ``row`` cannot be the cheapest, None when it can."""
    if row["model"] != model:
        return f"serves model {row['model']}, not {model}"
    if row["slo_met"] is False:
        return "cannot meet the SLO at every hour's mix, even at the lowest load"
    if at_slo and row["slo_met"] is None:
        return "a one-number profile: it cannot tell whether the SLO is met (import a load test)"
    if row["cost_usd"] is None:
        return "has no on-demand price"
    return None


def _none_note(rows: list[dict[str, Any]], model: str, slo: Slo | None) -> str:
    """Why no compared profile is the cheapest: each profile and what rules it out."""
    what = (
        f"meets the SLO (p95 TTFT {slo.ttft_p95_s:g} s, TPOT {slo.tpot_p95_s:g} s)"
        if slo is not None
        else "is priced"
    )
    reasons = "; ".join(f"{row['profile']} {row['excluded']}" for row in rows)
    return f"no compared profile of model {model} {what}: {reasons}"


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
        if plan.production_hours:
            note += f", learned from up to {count(plan.production_hours, 'production hour')}"
    elif plan.slo is not None:
        note = (
            "one-number profile: sized on its tokens/s per GPU; whether it meets the SLO is unknown"
        )
    else:
        note = "no SLO: sized on the profile's tokens/s per GPU"
    if plan.cost is None:
        note += "; the profile has no on-demand price, so it is not priced"
    return note
