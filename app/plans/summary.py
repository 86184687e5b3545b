"""The plan replay in one line, for every surface that shows it (CLI, demo, overview)."""

from __future__ import annotations

from typing import Any

from app.common.words import count


def _share(value: float) -> str:
    return f"{value:.2%}"


def replay_summary(result: dict[str, Any]) -> str:
    """One line: gpucast's GPU-hours and time over capacity against the instant bound, the
    reactive HPA at equal risk and static peak (a replay stored before the first two existed
    shows static peak only)."""
    by_name = {row["policy"]: row for row in result["policies"]}
    ours, static = by_name["gpucast"], by_name["static-peak"]
    line = (
        f"last {count(result['days'], 'day')} replayed: gpucast {ours['gpu_hours']:,.0f} "
        "GPU-hours, "
        f"{_share(ours['time_over_capacity_share'])} of time over capacity"
    )
    if "time_over_slo_share" in ours:
        line += f", {_share(ours['time_over_slo_share'])} over the SLO"
    bound = (result.get("versus_instant_bound") or {}).get("gpu_hours_ratio")
    if bound is not None:
        line += f"; {bound:.2f}x the instant bound"
    if "versus_reactive_at_equal_risk" in result:
        equal = result["versus_reactive_at_equal_risk"]
        if equal.get("gpu_hours_ratio") is not None:
            line += (
                f", {equal['gpu_hours_ratio']:.2f}x the reactive HPA at equal risk (target "
                f"{equal['target_utilization']:g})"
            )
        else:
            line += ", no reactive HPA target reached its risk"
    ratio = result["versus_static_peak"]["gpu_hours_ratio"]
    versus = f"{ratio:.2f}x" if ratio is not None else "n/a"
    return (
        f"{line}; static peak {static['gpu_hours']:,.0f} GPU-hours, "
        f"{_share(static['time_over_capacity_share'])} over — gpucast uses {versus} the "
        "GPU-hours of static peak"
    )
