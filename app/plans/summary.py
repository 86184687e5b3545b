"""The plan replay in one line, for every surface that shows it (CLI, demo, overview)."""

from __future__ import annotations

from typing import Any


def _share(value: float) -> str:
    return f"{value:.2%}"


def replay_summary(result: dict[str, Any]) -> str:
    """One line: gpucast's GPU-hours and time over capacity against static peak."""
    by_name = {row["policy"]: row for row in result["policies"]}
    ours, static = by_name["gpucast"], by_name["static-peak"]
    ratio = result["versus_static_peak"]["gpu_hours_ratio"]
    versus = f"{ratio:.2f}x" if ratio is not None else "n/a"
    return (
        f"last {result['days']} days replayed: gpucast {ours['gpu_hours']:,.0f} GPU-hours, "
        f"{_share(ours['time_over_capacity_share'])} of time over capacity; static peak "
        f"{static['gpu_hours']:,.0f} GPU-hours, {_share(static['time_over_capacity_share'])} "
        f"over — gpucast uses {versus} the GPU-hours of static peak"
    )
