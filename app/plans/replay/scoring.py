"""How the replay scores the policies: each policy's KPI row, the reactive HPA's cost/risk
frontier and the cheapest target at gpucast's risk, gpucast versus the instant bound, that HPA
and the static peak, the trade-off of risk targets, and the backtest object returned."""

from __future__ import annotations

from typing import Any

import pandas as pd

import capacity
from app.plans.calibration import (
    RISK_CAPACITY,
    RISK_WORDS,
)
from app.plans.replay.decisions import Rolling
from app.plans.replay.inputs import EQUAL_RISK, HPA_TARGETS


def frontier_name(target: float) -> str:
    return f"reactive-hpa@{target:.2f}"


def tradeoff_name(target: float) -> str:
    return f"gpucast@{target:.1%}"


def tradeoff_rows(result: capacity.ReplayResult, rolling: Rolling) -> list[dict[str, Any]]:
    """What each risk target would have cost and risked over the replayed days."""
    rows = []
    for target, (_, nights) in rolling.tradeoff.items():
        kpis = result.table.loc[tradeoff_name(target)]
        rows.append(
            {
                "max_over_capacity": target,
                "gpu_hours": float(kpis["gpu_hours"]),
                "cost_usd": float(kpis["cost_usd"]),
                "time_over_capacity_share": float(kpis["time_over_capacity_share"]),
                "requests_over_capacity_share": float(kpis["requests_over_capacity_share"]),
                "bands": [night["label"] for night in nights],
            }
        )
    return rows


def _nightly_plans(nights: list[dict], models: list[str | None]) -> list[dict]:
    """Each night: the band chosen (and its calibration) and the plan of its first hour."""
    return [night | {"model": model} for night, model in zip(nights, models, strict=False)]


def _kpi_row(table: pd.DataFrame, name: str) -> dict[str, Any]:
    kpis = table.loc[name]
    keys = [*capacity.REPLAY_KPIS, *([capacity.SLO_KPI] if capacity.SLO_KPI in kpis else [])]
    return {
        key: int(kpis[key]) if key in ("scale_events", "peak_gpus") else float(kpis[key])
        for key in keys
    }


def _frontier(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The reactive HPA's cost/risk at each of HPA_TARGETS."""
    return [
        {"target_utilization": target} | _kpi_row(table, frontier_name(target))
        for target in HPA_TARGETS
    ]


def _pareto(frontier: list[dict[str, Any]], kpi: str) -> list[dict[str, Any]]:
    """The frontier points no other beats on both ``kpi`` and GPU-hours: ``kpi`` rising,
    GPU-hours strictly falling."""
    out: list[dict[str, Any]] = []
    for point in sorted(frontier, key=lambda p: (p[kpi], p["gpu_hours"])):
        if not out or point["gpu_hours"] < out[-1]["gpu_hours"]:
            out.append(point)
    return out


def _equal_risk(
    frontier: list[dict[str, Any]], risk: float, kpi: str = RISK_CAPACITY
) -> dict[str, Any] | None:
    """The reactive HPA at exactly ``risk`` (``kpi``: the risk band auto holds, on the capacity
    line): linear between the two adjacent Pareto points of (risk, GPU-hours) around it, every
    KPI interpolated with the same weight (the target too); the cheapest point when every HPA
    target is below ``risk``; None when none reaches it."""
    pareto = _pareto(frontier, kpi)
    meeting = [p for p in pareto if p[kpi] <= risk + 1e-12]
    if not meeting:
        return None
    below = meeting[-1]
    above = next((p for p in pareto if p[kpi] > risk + 1e-12), None)
    weight = 0.0 if above is None else (risk - below[kpi]) / (above[kpi] - below[kpi])
    weight = min(max(weight, 0.0), 1.0)
    other = above if above is not None else below
    point = {
        key: below[key] + weight * (other[key] - below[key])
        for key in ("target_utilization", *capacity.REPLAY_KPIS, capacity.SLO_KPI)
        if key in below
    }
    for key in ("scale_events", "peak_gpus"):
        point[key] = round(point[key])
    targets = {below["target_utilization"], other["target_utilization"]}
    return point | {"between_targets": sorted(targets)}


def _grid() -> str:
    return f"{HPA_TARGETS[0]:g}–{HPA_TARGETS[-1]:g} in steps of 0.01"


def _versus(ours: dict[str, Any], other: dict[str, Any] | None, label: str) -> dict[str, Any]:
    if other is None:
        return {"gpu_hours_ratio": None, "compared_with": label}
    differences = {
        f"{kpi}_difference": ours[kpi] - other[kpi]
        for kpi in (RISK_CAPACITY, capacity.SLO_KPI)
        if kpi in ours and kpi in other
    }
    return {
        "gpu_hours_ratio": ours["gpu_hours"] / other["gpu_hours"] if other["gpu_hours"] else None,
        "gpu_hours_saved": other["gpu_hours"] - ours["gpu_hours"],
        **differences,
        "compared_with": label,
    }


def report(
    inputs: Any,
    params: Any,
    options: Any,
    result: Any,
    policies: Any,
    *,
    load_source: Any,
    notes: Any,
    models: Any,
    decisions: Any,
    nights: Any,
    tradeoff: Any,
) -> Any:
    table = result.table
    rows = []
    for policy in policies:
        kpis = table.loc[policy.name]
        rows.append(
            {
                "policy": policy.name,
                "recommended": bool(kpis["recommended"]),
                "bound": bool(kpis["bound"]),
                "description": policy.description,
                **_kpi_row(table, policy.name),
            }
        )
    by_name = {row["policy"]: row for row in rows}
    ours, static = by_name["gpucast"], by_name["static-peak"]
    frontier = _frontier(table)
    risk = capacity.SLO_KPI if capacity.SLO_KPI in table.columns else RISK_CAPACITY
    words = RISK_WORDS[risk]
    equal = _equal_risk(frontier, ours[risk], risk)
    if equal is not None:
        target = equal["target_utilization"]
        row = {
            "policy": EQUAL_RISK,
            "recommended": False,
            "bound": False,
            "description": f"the reactive HPA alone at gpucast's {words}: its frontier of "
            f"targets {_grid()} read at that risk (target ≈ {target:.3f}, between "
            f"{' and '.join(f'{t:g}' for t in equal['between_targets'])})",
            **equal,
        }
        rows.insert(next(i for i, r in enumerate(rows) if r["policy"] == "reactive-hpa") + 1, row)
    else:
        notes = [
            *notes,
            f"no HPA target reaches this risk: none of {_grid()} held gpucast's {words} "
            f"({ours[risk]:.2%})",
        ]
    bound = by_name["instant-bound"]
    return {
        "series": inputs.series,
        "profile": inputs.profile.name,
        "days": options.days,
        "resolution_s": int(result.resolution_s),
        "tick_s": int(result.tick_s),
        "start": result.start.to_pydatetime(),
        "end": result.end.to_pydatetime(),
        "load_source": load_source,
        "nightly_hour_utc": options.nightly_hour_utc,
        "decisions": decisions,
        "models": sorted({m for m in models if m}),
        "params": params.as_dict(),
        "priced": inputs.profile.prices() is not None,
        "slo": (
            None
            if inputs.slo is None
            else {
                "ttft_p95_s": inputs.slo.slo.ttft_p95_s,
                "tpot_p95_s": inputs.slo.slo.tpot_p95_s,
                "scored": capacity.SLO_KPI in result.table.columns,
            }
        ),
        "policies": rows,
        "versus_instant_bound": _versus(
            ours,
            bound,
            "instant-bound: each minute's load on the capacity line in whole replicas, "
            "no cold start",
        ),
        "versus_reactive_at_equal_risk": _versus(
            ours,
            equal,
            (
                f"reactive HPA alone at gpucast's {words} (target "
                f"{equal['target_utilization']:.3f}, interpolated on its frontier)"
                if equal is not None
                else f"no HPA target reaches this risk ({words})"
            ),
        )
        | {"target_utilization": equal["target_utilization"] if equal else None, "risk": risk},
        "versus_static_peak": _versus(
            ours, static, "static-peak: the previous 7 days' peak at utilization 0.75"
        ),
        "reactive_frontier": frontier,
        "gpucast_plans": _nightly_plans(nights, models),
        "tradeoff": tradeoff,
        "notes": [n for n in notes if n],
    }
