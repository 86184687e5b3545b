"""How the replay scores a policy: its KPIs over the measured steps (GPU-hours, cost, time
and requests over capacity, time over 85 %, scale events, peak GPUs, mean utilization, and
time over the SLO when one is given), and the instant bound's row and timeline.

Every policy is scored against one **capacity line**: the tokens/s one replica sustains at
each step — the SLO capacity at the step's mix when the replay is given one, else the
profile's tokens/s per GPU x GPUs per replica at 100 % (the utilization target is a planning
margin, not the line)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from capacity.simulation.fleet import Fleet
from capacity.sizing.cost import Prices, timeline_cost_usd

REPLAY_KPIS = (
    "gpu_hours",
    "cost_usd",
    "time_over_capacity_share",
    "requests_over_capacity_share",
    "time_over_85_share",
    "scale_events",
    "peak_gpus",
    "mean_utilization",
)
#: The KPI a replay adds when it is given the SLO capacity per replica (one column more): the
#: line is then the SLO capacity, so it equals time_over_capacity_share (named for readers).
SLO_KPI = "time_over_slo_share"


def instant_bound(
    name: str,
    replicas: np.ndarray,
    line: np.ndarray,
    fleet: Fleet,
    ticks: pd.DatetimeIndex,
    grid: np.ndarray,
    measured: np.ndarray,
    per_tick: int,
    res: int,
    prices: Prices | None,
) -> tuple[dict[str, object], pd.DataFrame]:
    """The bound's KPI row and per-tick timeline (each tick at its busiest step's fleet);
    ``line``: the tokens/s one replica sustains at each step."""
    gpus = replicas * fleet.gpus_per_replica
    capacity = replicas * line
    in_window = np.repeat(measured, per_tick)
    kpis = policy_kpis(grid[in_window], capacity[in_window], gpus[in_window], res, prices)
    by_tick = replicas.reshape(len(ticks), per_tick).max(axis=1)
    timeline = pd.DataFrame(
        {
            "desired_replicas": by_tick,
            "provisioned_gpus": by_tick * fleet.gpus_per_replica,
            "ready_gpus": by_tick * fleet.gpus_per_replica,
            "capacity_tokens_per_s": by_tick * line.reshape(len(ticks), per_tick)[:, 0],
            "load_tokens_per_s": grid.reshape(len(ticks), per_tick).mean(axis=1),
        },
        index=ticks,
    )
    return {"policy": name, "recommended": False, "bound": True} | kpis, timeline


def policy_kpis(
    load: np.ndarray,
    cap: np.ndarray,
    held: np.ndarray,
    step_s: int,
    prices: Prices | None,
) -> dict[str, float]:
    """KPIs of one policy over the measured steps (load, capacity and GPUs per step). Steps
    whose load was not observed (NaN) count in GPU-hours, cost, scale events and peak only."""
    seen = ~np.isnan(load)
    if not seen.all():
        load, cap = load[seen], cap[seen]
    total = load.sum()
    over = np.clip(load - cap, 0.0, None)
    served = load - over
    gpu_hours = float(held.sum(dtype=float) * step_s / 3600.0)  # float: no int64 overflow
    cost = timeline_cost_usd(held.astype(float), step_s, prices)[0] if prices else 0.0
    changes = np.count_nonzero(np.diff(held)) if len(held) > 1 else 0
    return {
        "gpu_hours": gpu_hours,
        "cost_usd": float(cost),
        "time_over_capacity_share": float((load > cap).mean()) if len(load) else 0.0,
        "requests_over_capacity_share": float(over.sum() / total) if total else 0.0,
        "time_over_85_share": float((load > 0.85 * cap).mean()) if len(load) else 0.0,
        "scale_events": int(changes),
        "peak_gpus": int(held.max()),
        "mean_utilization": float(served.sum() / cap.sum()) if cap.sum() else 0.0,
    }
