"""What :func:`capacity.pools.plan_pool` returns: the pool plan, its per-hour and per-member
frames, and the reservation comparison of the pool against each member on nodes of its own."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from capacity.pools.repacking import Migration

if TYPE_CHECKING:
    from capacity.pools.packing import Placement
    from capacity.pools.spec import PoolMember, PoolSpec

HOURS_FRAME_COLUMNS = (
    "hour",
    "demand_nodes",
    "nodes",
    "gpus_used",
    "lower_bound",
    "fragmentation_gpus",
    "stable_nodes",
    "reserved_nodes",
    "on_demand_nodes",
    "spot_nodes",
    "cost_usd",
    "demand_gpus",
    "granted_gpus",
    "short_gpus",
    "throttled",
    "queued_classes",
    "migrations",
    "moved_replicas",
)
MEMBERS_FRAME_COLUMNS = (
    "hour",
    "member",
    "priority",
    "demand_gpus",
    "granted_gpus",
    "shortfall_gpus",
    "demand_tokens_per_s",
    "granted_tokens_per_s",
    "shortfall_tokens_per_s",
    "rate_limit_rps",
    "tokens_per_request",
    "rate_limit_tokens_per_s",
    "throttled",
)


@dataclass(frozen=True)
class MemberReservation:
    member: str
    peak_nodes: int
    reserved_nodes: int
    cost_usd: float


@dataclass(frozen=True)
class Reservations:
    """Pooled reservations against each member reserving nodes of its own."""

    pooled_reserved_nodes: int
    pooled_peak_nodes: int
    pooled_cost_usd: float
    per_service_reserved_nodes: int
    per_service_peak_nodes: int
    per_service_cost_usd: float
    per_service: tuple[MemberReservation, ...]

    @property
    def saving_usd(self) -> float:
        return self.per_service_cost_usd - self.pooled_cost_usd

    def as_dict(self) -> dict[str, Any]:
        return {
            "pooled_reserved_nodes": self.pooled_reserved_nodes,
            "pooled_peak_nodes": self.pooled_peak_nodes,
            "pooled_cost_usd": self.pooled_cost_usd,
            "per_service_reserved_nodes": self.per_service_reserved_nodes,
            "per_service_peak_nodes": self.per_service_peak_nodes,
            "per_service_cost_usd": self.per_service_cost_usd,
            "saving_usd": self.saving_usd,
            "per_service": [
                {
                    "member": item.member,
                    "peak_nodes": item.peak_nodes,
                    "reserved_nodes": item.reserved_nodes,
                    "cost_usd": item.cost_usd,
                }
                for item in self.per_service
            ],
        }


@dataclass(frozen=True)
class PoolPlan:
    """The pool plan: ``hours`` (one row per hour, ``HOURS_FRAME_COLUMNS``), ``members`` (one
    row per member and hour, ``MEMBERS_FRAME_COLUMNS``), the placement and migrations of every
    hour and the reservation comparison.

    ``stable_nodes``: nodes holding a replica of a member without ``spot_ok``; they cannot run
    on spot, so they are reserved or on demand. ``rate_limit_tokens_per_s``: the grant in
    tokens/s (granted GPUs × tokens/s per planned GPU), the limit to enforce at a gateway that
    counts tokens: it admits exactly the granted load whatever the requests' lengths.
    ``rate_limit_rps``: that ÷ ``tokens_per_request`` (the hour's figure given to
    :func:`capacity.pools.plan_pool`, else the member's one figure; NaN without either). A
    requests/s limit admits the granted tokens only when the hour's requests average that many
    tokens: with one figure for the whole day it admits more than the grant in every hour
    whose requests are heavier.
    """

    pool: PoolSpec
    members_spec: tuple[PoolMember, ...]
    hours: pd.DataFrame
    members: pd.DataFrame
    placements: tuple[Placement, ...]
    migrations: tuple[tuple[Migration, ...], ...]
    reservations: Reservations
    notes: tuple[str, ...] = field(default=())

    @property
    def total_cost_usd(self) -> float:
        return float(self.hours["cost_usd"].sum())

    @property
    def throttled_hours(self) -> int:
        return int(self.hours["throttled"].sum())

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the pool, per-hour figures with placement and migrations, per-member
        grants, the reservation comparison and totals."""
        by_hour: dict[pd.Timestamp, list[dict[str, Any]]] = {}
        for row in self.members.itertuples(index=False):
            by_hour.setdefault(row.hour, []).append(
                {
                    "member": row.member,
                    "priority": row.priority,
                    "demand_gpus": int(row.demand_gpus),
                    "granted_gpus": int(row.granted_gpus),
                    "shortfall_gpus": int(row.shortfall_gpus),
                    "demand_tokens_per_s": _number(row.demand_tokens_per_s),
                    "granted_tokens_per_s": float(row.granted_tokens_per_s),
                    "shortfall_tokens_per_s": _number(row.shortfall_tokens_per_s),
                    "rate_limit_rps": _number(row.rate_limit_rps),
                    "tokens_per_request": _number(row.tokens_per_request),
                    "rate_limit_tokens_per_s": float(row.rate_limit_tokens_per_s),
                    "throttled": bool(row.throttled),
                }
            )
        hours = []
        for index, row in enumerate(self.hours.itertuples(index=False)):
            hours.append(
                {
                    "hour": row.hour.to_pydatetime(),
                    "demand_nodes": int(row.demand_nodes),
                    "nodes": int(row.nodes),
                    "gpus_used": int(row.gpus_used),
                    "lower_bound": int(row.lower_bound),
                    "fragmentation_gpus": int(row.fragmentation_gpus),
                    "stable_nodes": int(row.stable_nodes),
                    "reserved_nodes": int(row.reserved_nodes),
                    "on_demand_nodes": int(row.on_demand_nodes),
                    "spot_nodes": int(row.spot_nodes),
                    "cost_usd": float(row.cost_usd),
                    "demand_gpus": int(row.demand_gpus),
                    "granted_gpus": int(row.granted_gpus),
                    "short_gpus": int(row.short_gpus),
                    "throttled": bool(row.throttled),
                    "queued_classes": list(row.queued_classes),
                    "placement": self.placements[index].as_dict()["nodes"],
                    "migrations": [item.describe() for item in self.migrations[index]],
                    "moved_replicas": int(row.moved_replicas),
                    "members": by_hour.get(row.hour, []),
                }
            )
        return {
            "pool": self.pool.name,
            "gpu_type": self.pool.gpu_type,
            "gpus_per_node": self.pool.gpus_per_node,
            "quota_nodes": self.pool.quota_nodes,
            "node_prices": {
                "on_demand_usd_per_hour": self.pool.node_prices.on_demand_usd_per_hour,
                "reserved_usd_per_hour": self.pool.node_prices.reserved_usd_per_hour,
                "spot_usd_per_hour": self.pool.node_prices.spot_usd_per_hour,
            },
            "spot_interruption": self.pool.spot_interruption,
            "members": [
                {
                    "member": item.name,
                    "priority": item.priority,
                    "gpus_per_replica": item.gpus_per_replica,
                    "tokens_per_s_per_gpu": item.tokens_per_s_per_gpu,
                    "tokens_per_request": item.tokens_per_request,
                    "spot_ok": item.spot_ok,
                }
                for item in self.members_spec
            ],
            "peak_nodes": int(self.hours["nodes"].max()),
            "node_hours": int(self.hours["nodes"].sum()),
            "total_cost_usd": self.total_cost_usd,
            "throttled_hours": self.throttled_hours,
            "migrations": int(sum(len(items) for items in self.migrations)),
            "reservations": self.reservations.as_dict(),
            "notes": list(self.notes),
            "hours": hours,
        }


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number
