"""Shared GPU pools: several services' plans on one fleet of identical nodes.

A pool is a fleet of nodes with ``gpus_per_node`` GPUs each, priced per node-hour, with an
optional quota of nodes. Its members are services with their own hourly GPU plans. For every
hour :func:`plan_pool`:

1. turns each member's GPUs into replicas (blocks of ``gpus_per_replica`` GPUs that must sit on
   one node);
2. under a quota the packing cannot meet, grants capacity by priority class
   (:func:`capacity.allocation.grant_by_priority`) and sets each member's gateway **rate limit**
   — granted GPUs × the tokens/s one planned GPU carries ÷ tokens per request;
3. places the granted replicas, keeping last hour's replicas where they are and listing the
   migrations that free a node (:func:`capacity.packing.repack`);
4. prices the node timeline: **reserved** nodes from the pool's own load-duration curve
   (break-even of reserved vs on-demand price), the elastic rest on demand, or on spot where
   only spot-tolerant members need it, spot node-hours paying ``spot_interruption`` of
   themselves again on demand (the share lost to interruptions and re-bought).

The same pricing of each member on nodes of its own is the per-service comparison
(:attr:`PoolPlan.reservations`): services whose peaks do not coincide reserve fewer nodes
together than apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from capacity._checks import require_fraction, require_int, require_positive
from capacity.allocation import PRIORITY_CLASSES, grant_by_priority
from capacity.cost import Prices, break_even_reserved_gpus
from capacity.errors import InvalidParameterError
from capacity.exact_packing import pack
from capacity.packing import Placement, first_fit_decreasing
from capacity.repacking import Migration, repack

HOURS_FRAME_COLUMNS = (
    "hour",
    "demand_nodes",
    "nodes",
    "gpus_used",
    "lower_bound",
    "fragmentation_gpus",
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
    "throttled",
)


@dataclass(frozen=True)
class PoolSpec:
    """A named fleet of identical nodes. ``node_prices`` are USD per node-hour."""

    name: str
    node_prices: Prices
    gpus_per_node: int = 8
    quota_nodes: int | None = None
    spot_interruption: float = 0.05
    gpu_type: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidParameterError("pool name must be a non-empty string")
        require_int("gpus_per_node", self.gpus_per_node, minimum=1)
        if self.quota_nodes is not None:
            require_int("quota_nodes", self.quota_nodes, minimum=1)
        require_positive(
            "node_prices.on_demand_usd_per_hour", self.node_prices.on_demand_usd_per_hour
        )
        for label, price in (
            ("reserved", self.node_prices.reserved_usd_per_hour),
            ("spot", self.node_prices.spot_usd_per_hour),
        ):
            if price is not None:
                require_positive(f"node_prices.{label}_usd_per_hour", price)
        interruption = require_fraction(
            "spot_interruption", self.spot_interruption, allow_zero=True
        )
        if interruption >= 1:
            raise InvalidParameterError(
                f"spot_interruption must be in [0, 1), got {self.spot_interruption!r}"
            )


@dataclass(frozen=True)
class PoolMember:
    """One service in a pool.

    tokens_per_s_per_gpu: the load one GPU of the member's plan is sized to carry (per-GPU
    tokens/s × utilization target ÷ safety factor) — what a granted GPU admits.
    tokens_per_request: turns admitted tokens/s into the gateway's requests/s limit.
    spot_ok: the service tolerates interruption, so its elastic capacity may run on spot.
    """

    name: str
    gpus_per_replica: int
    tokens_per_s_per_gpu: float
    priority: str = "standard"
    tokens_per_request: float | None = None
    spot_ok: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidParameterError("member name must be a non-empty string")
        require_int(f"{self.name}: gpus_per_replica", self.gpus_per_replica, minimum=1)
        require_positive(f"{self.name}: tokens_per_s_per_gpu", self.tokens_per_s_per_gpu)
        if self.priority not in PRIORITY_CLASSES:
            raise InvalidParameterError(
                f"{self.name}: priority must be one of {', '.join(PRIORITY_CLASSES)}, "
                f"got {self.priority!r}"
            )
        if self.tokens_per_request is not None:
            require_positive(f"{self.name}: tokens_per_request", self.tokens_per_request)


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
    """The pool plan: ``hours`` (one row per hour), ``members`` (one row per member and hour),
    the placement and migrations of every hour and the reservation comparison."""

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


def _check_frame(frame: pd.DataFrame, names: Sequence[str], label: str) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise InvalidParameterError(f"{label} must be a DataFrame with one column per member")
    if not isinstance(frame.index, pd.DatetimeIndex) or len(frame.index) == 0:
        raise InvalidParameterError(f"{label} needs a non-empty hourly DatetimeIndex")
    if not frame.index.is_monotonic_increasing or frame.index.has_duplicates:
        raise InvalidParameterError(f"{label}: hours must be increasing and unique")
    missing = [name for name in names if name not in frame.columns]
    extra = [str(name) for name in frame.columns if name not in names]
    if missing or extra:
        raise InvalidParameterError(
            f"{label} columns must be the members: missing {missing}, unknown {extra}"
        )
    values = frame[list(names)].to_numpy(dtype=float)
    if not np.isfinite(values).all() or (values < 0).any():
        raise InvalidParameterError(f"{label} must hold finite values >= 0")
    return frame[list(names)].astype(float)


def _node_prices_per_hour(pool: PoolSpec) -> tuple[float, float, float | None]:
    prices = pool.node_prices
    spot = prices.spot_usd_per_hour
    effective_spot = (
        None
        if spot is None
        else (1 - pool.spot_interruption) * spot
        + pool.spot_interruption * prices.on_demand_usd_per_hour
    )
    return prices.on_demand_usd_per_hour, prices.reserved_usd_per_hour or 0.0, effective_spot


def _price_nodes(
    pool: PoolSpec, nodes: np.ndarray, stable_nodes: np.ndarray
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """(reserved nodes, on-demand nodes, spot nodes, USD) per hour of a node timeline.

    stable_nodes: nodes the members that do not tolerate interruption need each hour; elastic
    nodes beyond them run on spot when the pool has a spot price."""
    on_demand_price, reserved_price, spot_price = _node_prices_per_hour(pool)
    reserved = break_even_reserved_gpus(nodes.astype(float), pool.node_prices)
    elastic = np.clip(nodes - reserved, 0, None)
    if spot_price is None:
        on_demand = elastic
    else:
        on_demand = np.clip(stable_nodes - reserved, 0, None)
        on_demand = np.minimum(on_demand, elastic)
    spot = elastic - on_demand
    usd = reserved * reserved_price + on_demand * on_demand_price + spot * (spot_price or 0.0)
    return reserved, on_demand, spot, usd.astype(float)


def _per_service(
    pool: PoolSpec, members: Sequence[PoolMember], replicas: np.ndarray
) -> tuple[MemberReservation, ...]:
    """Each member on nodes of its own, priced the same way as the pool."""
    out = []
    for column, member in enumerate(members):
        per_node = pool.gpus_per_node // member.gpus_per_replica
        nodes = np.ceil(replicas[:, column] / per_node).astype(int)
        stable = np.zeros_like(nodes) if member.spot_ok else nodes
        reserved, _, _, usd = _price_nodes(pool, nodes, stable)
        out.append(
            MemberReservation(
                member=member.name,
                peak_nodes=int(nodes.max()),
                reserved_nodes=int(reserved),
                cost_usd=float(usd.sum()),
            )
        )
    return tuple(out)


def plan_pool(
    pool: PoolSpec,
    members: Sequence[PoolMember],
    demand_gpus: pd.DataFrame,
    demand_tokens_per_s: pd.DataFrame | None = None,
    *,
    consolidate: bool = True,
) -> PoolPlan:
    """Pack, grant, place and price the members' hourly plans on the pool (module text).

    demand_gpus: one column per member (its plan's GPUs per hour; rounded up to whole
    replicas), index the plan hours. demand_tokens_per_s: the load behind those GPUs, same
    shape (optional; gives the shortfall in tokens/s). consolidate: move replicas between
    hours when that frees a node.
    """
    members = tuple(members)
    if not members:
        raise InvalidParameterError("a pool plan needs at least one member")
    names = [member.name for member in members]
    if len(set(names)) != len(names):
        raise InvalidParameterError("member names must be unique")
    for member in members:
        if member.gpus_per_replica > pool.gpus_per_node:
            raise InvalidParameterError(
                f"{member.name}: a replica of {member.gpus_per_replica} GPUs does not fit on a "
                f"node of {pool.gpus_per_node} GPUs"
            )
    gpus = _check_frame(demand_gpus, names, "demand_gpus")
    tokens = None
    if demand_tokens_per_s is not None:
        tokens = _check_frame(demand_tokens_per_s, names, "demand_tokens_per_s")
        if not tokens.index.equals(gpus.index):
            raise InvalidParameterError("demand_tokens_per_s must have the hours of demand_gpus")
    sizes = {member.name: member.gpus_per_replica for member in members}
    priority = {member.name: member.priority for member in members}
    size_row = np.array([member.gpus_per_replica for member in members])
    demand_replicas = np.ceil(np.round(gpus.to_numpy() / size_row, 9)).astype(int)
    spot_ok = np.array([member.spot_ok for member in members])

    placements: list[Placement] = []
    migrations: list[tuple[Migration, ...]] = []
    granted_rows = np.zeros_like(demand_replicas)
    demand_nodes, moved, notes = [], [], []
    previous: Placement | None = None
    for index, hour in enumerate(gpus.index):
        wanted = dict(zip(names, (int(v) for v in demand_replicas[index]), strict=True))
        fresh = pack({k: v for k, v in wanted.items() if v}, sizes, pool.gpus_per_node)
        demand_nodes.append(fresh.nodes_used)
        granted = wanted
        if pool.quota_nodes is not None and fresh.nodes_used > pool.quota_nodes:
            granted = grant_by_priority(
                wanted, sizes, priority, pool.gpus_per_node, pool.quota_nodes
            )
        transition = repack(previous, granted, sizes, pool.gpus_per_node, consolidate=consolidate)
        placement = transition.placement
        if pool.quota_nodes is not None and placement.nodes_used > pool.quota_nodes:
            # Keeping replicas in place would break the quota: place the hour afresh (the
            # packing the grant was checked with, so it fits).
            placement = (
                fresh
                if granted is wanted
                else first_fit_decreasing(
                    {k: v for k, v in granted.items() if v}, sizes, pool.gpus_per_node
                )
            )
            notes.append(f"{hour.isoformat()}: placed afresh to stay within the quota")
            moved.append(sum(granted.values()))
            migrations.append(())
        else:
            moved.append(transition.moved_replicas)
            migrations.append(transition.migrations)
        placements.append(placement)
        granted_rows[index] = [granted[name] for name in names]
        previous = placement

    granted_gpus = granted_rows * size_row
    demand_gpu_values = demand_replicas * size_row
    nodes = np.array([item.nodes_used for item in placements])
    stable = np.array(
        [
            pack(
                {n: int(c) for n, c, ok in zip(names, row, spot_ok, strict=True) if c and not ok},
                sizes,
                pool.gpus_per_node,
                method="ffd",
            ).nodes_used
            for row in granted_rows
        ]
    )
    reserved, on_demand, spot, usd = _price_nodes(pool, nodes, stable)

    capacity_row = np.array([member.tokens_per_s_per_gpu for member in members])
    granted_tokens = granted_gpus * capacity_row
    shortfall_gpus = np.clip(demand_gpu_values - granted_gpus, 0, None)
    throttled = shortfall_gpus > 0
    if tokens is not None:
        demand_tok = tokens.to_numpy()
        served = np.where(throttled, np.minimum(granted_tokens, demand_tok), demand_tok)
        shortfall_tok = demand_tok - served
    else:
        demand_tok = np.full(granted_gpus.shape, np.nan)
        shortfall_tok = np.full(granted_gpus.shape, np.nan)
    per_request = np.array([member.tokens_per_request or np.nan for member in members], dtype=float)
    rate_limit = granted_tokens / per_request

    hours_index = pd.DatetimeIndex(gpus.index)
    classes = np.array([priority[name] for name in names])
    queued = [
        tuple(cls for cls in PRIORITY_CLASSES if (row & (classes == cls)).any())
        for row in throttled
    ]
    hours_frame = pd.DataFrame(
        {
            "hour": hours_index,
            "demand_nodes": demand_nodes,
            "nodes": nodes,
            "gpus_used": [item.gpus_used for item in placements],
            "lower_bound": [item.lower_bound for item in placements],
            "fragmentation_gpus": [item.fragmentation_gpus for item in placements],
            "reserved_nodes": np.full(len(nodes), reserved),
            "on_demand_nodes": on_demand,
            "spot_nodes": spot,
            "cost_usd": usd,
            "demand_gpus": demand_gpu_values.sum(axis=1),
            "granted_gpus": granted_gpus.sum(axis=1),
            "short_gpus": shortfall_gpus.sum(axis=1),
            "throttled": throttled.any(axis=1),
            "queued_classes": queued,
            "migrations": [len(items) for items in migrations],
            "moved_replicas": moved,
        },
        columns=list(HOURS_FRAME_COLUMNS),
    )
    count = len(names)
    members_frame = pd.DataFrame(
        {
            "hour": hours_index.repeat(count),
            "member": np.tile(names, len(hours_index)),
            "priority": np.tile([priority[n] for n in names], len(hours_index)),
            "demand_gpus": demand_gpu_values.ravel(),
            "granted_gpus": granted_gpus.ravel(),
            "shortfall_gpus": shortfall_gpus.ravel(),
            "demand_tokens_per_s": demand_tok.ravel(),
            "granted_tokens_per_s": granted_tokens.ravel(),
            "shortfall_tokens_per_s": shortfall_tok.ravel(),
            "rate_limit_rps": rate_limit.ravel(),
            "throttled": throttled.ravel(),
        },
        columns=list(MEMBERS_FRAME_COLUMNS),
    )

    per_service = _per_service(pool, members, granted_rows)
    reservations = Reservations(
        pooled_reserved_nodes=int(reserved),
        pooled_peak_nodes=int(nodes.max()),
        pooled_cost_usd=float(usd.sum()),
        per_service_reserved_nodes=sum(item.reserved_nodes for item in per_service),
        per_service_peak_nodes=sum(item.peak_nodes for item in per_service),
        per_service_cost_usd=float(sum(item.cost_usd for item in per_service)),
        per_service=per_service,
    )
    return PoolPlan(
        pool=pool,
        members_spec=members,
        hours=hours_frame,
        members=members_frame,
        placements=tuple(placements),
        migrations=tuple(migrations),
        reservations=reservations,
        notes=tuple(notes),
    )
