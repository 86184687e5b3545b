"""Shared GPU pools: several services' plans on one fleet of identical nodes.

A pool is a fleet of nodes with ``gpus_per_node`` GPUs each, priced per node-hour, with an
optional quota of nodes. Its members are services with their own hourly GPU plans. For every
hour :func:`plan_pool`:

1. turns each member's GPUs into replicas (blocks of ``gpus_per_replica`` GPUs that must sit on
   one node);
2. under a quota the packing cannot meet, grants capacity by priority class
   (:func:`capacity.pools.allocation.grant_by_priority`) and sets each member's gateway **rate
   limit**: the grant in tokens/s (granted GPUs × the tokens/s one planned GPU carries), and
   in requests/s (÷ the hour's tokens per request — see :class:`PoolPlan` for which to use);
3. places the granted replicas, keeping last hour's replicas where they are and listing the
   migrations that free a node (:func:`capacity.pools.repacking.repack`; the spot rule and the
   fallbacks are in :mod:`capacity.pools.placement`);
4. prices the node timeline (:mod:`capacity.pools.pricing`): nodes holding a replica that may
   not be interrupted are **stable** (reserved or on demand), the rest run on spot when its
   effective price — ``spot_interruption`` of the node-hours re-bought on demand — is below
   on demand; the **reserved** count is the one that makes the timeline cheapest.

The same pricing of each member on nodes of its own is the per-service comparison
(:attr:`PoolPlan.reservations`): services whose peaks do not coincide reserve fewer nodes
together than apart, and the pool never costs more than the separate fleets when there is no
quota (the fallbacks of :mod:`capacity.pools.placement` keep every hour within their nodes and
stable nodes). Under a quota the grant's packing may put spot-tolerant and other replicas on
one node; such a node is priced stable, which can make the pool dearer than separate fleets
that ignore the quota.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from capacity.errors import InvalidParameterError
from capacity.pools.allocation import PRIORITY_CLASSES
from capacity.pools.placement import PlacedHours, place_hours
from capacity.pools.pricing import own_nodes, per_service, price_nodes
from capacity.pools.results import (
    HOURS_FRAME_COLUMNS,
    MEMBERS_FRAME_COLUMNS,
    MemberReservation,
    PoolPlan,
    Reservations,
)
from capacity.pools.spec import PoolMember, PoolSpec

__all__ = [
    "HOURS_FRAME_COLUMNS",
    "MEMBERS_FRAME_COLUMNS",
    "MemberReservation",
    "PoolMember",
    "PoolPlan",
    "PoolSpec",
    "Reservations",
    "plan_pool",
]


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


def _check_members(pool: PoolSpec, members: Sequence[PoolMember]) -> tuple[PoolMember, ...]:
    checked = tuple(members)
    if not checked:
        raise InvalidParameterError("a pool plan needs at least one member")
    names = [member.name for member in checked]
    if len(set(names)) != len(names):
        raise InvalidParameterError("member names must be unique")
    for member in checked:
        if member.gpus_per_replica > pool.gpus_per_node:
            raise InvalidParameterError(
                f"{member.name}: a replica of {member.gpus_per_replica} GPUs does not fit on a "
                f"node of {pool.gpus_per_node} GPUs"
            )
    return checked


def _per_request(
    members: Sequence[PoolMember], hours: pd.DatetimeIndex, frame: pd.DataFrame | None
) -> np.ndarray:
    """Tokens per request per hour and member (hours × members; NaN where none is known)."""
    # float: integer figures must not truncate the per-hour ones written over them
    out = np.array(
        [[member.tokens_per_request or np.nan for member in members]] * len(hours), dtype=float
    )
    if frame is None:
        return out
    names = [member.name for member in members]
    if not isinstance(frame, pd.DataFrame) or not frame.index.equals(hours):
        raise InvalidParameterError(
            "tokens_per_request must be a DataFrame with the hours of demand_gpus"
        )
    unknown = [str(name) for name in frame.columns if name not in names]
    if unknown:
        raise InvalidParameterError(f"tokens_per_request names unknown members {unknown}")
    values = frame.to_numpy(dtype=float)
    if not np.isfinite(values).all() or (values <= 0).any():
        raise InvalidParameterError("tokens_per_request must hold finite values > 0")
    for position, name in enumerate(frame.columns):
        out[:, names.index(name)] = values[:, position]
    return out


Priced = tuple[int, np.ndarray, np.ndarray, np.ndarray]


def _placed_and_priced(
    pool: PoolSpec,
    members: Sequence[PoolMember],
    hours: pd.DatetimeIndex,
    demand_replicas: np.ndarray,
    *,
    consolidate: bool,
) -> tuple[PlacedHours, Priced, tuple[MemberReservation, ...]]:
    """The hours placed and priced, and each member on nodes of its own. Replicas are kept in
    place unless the pool would then cost more than the separate fleets: then the hours that
    need more (stable) nodes than those fleets are placed afresh (capacity.pools.placement),
    and that placement is kept when it is cheaper."""
    placed = place_hours(pool, members, hours, demand_replicas, consolidate=consolidate)
    separate = per_service(pool, members, own_nodes(members, placed.granted, pool.gpus_per_node))
    priced = _price(pool, placed)
    kept_usd = float(priced[3].sum())
    separate_usd = sum(item.cost_usd for item in separate)
    if kept_usd <= separate_usd + 1e-9 * max(1.0, separate_usd):
        return placed, priced, separate
    guarded = place_hours(
        pool, members, hours, demand_replicas, consolidate=consolidate, guard=True
    )
    guarded_priced = _price(pool, guarded)
    if float(guarded_priced[3].sum()) >= kept_usd:
        return placed, priced, separate
    note = (
        f"kept in place the pool would cost ${kept_usd:,.2f}, more than ${separate_usd:,.2f} "
        "on separate fleets: hours that needed more (stable) nodes than those fleets were "
        "placed afresh"
    )
    return replace(guarded, notes=(note, *guarded.notes)), guarded_priced, separate


def _price(pool: PoolSpec, placed: PlacedHours) -> Priced:
    nodes = np.array([item.nodes_used for item in placed.placements])
    return price_nodes(pool, nodes, np.array(placed.stable_nodes))


def _members_frame(
    members: Sequence[PoolMember],
    hours: pd.DatetimeIndex,
    demand_gpus: np.ndarray,
    granted_gpus: np.ndarray,
    tokens: pd.DataFrame | None,
    per_request: np.ndarray,
) -> pd.DataFrame:
    """One row per hour and member (hours × members arrays in, MEMBERS_FRAME_COLUMNS out)."""
    capacity_row = np.array([member.tokens_per_s_per_gpu for member in members])
    granted_tokens = granted_gpus * capacity_row
    shortfall_gpus = np.clip(demand_gpus - granted_gpus, 0, None)
    throttled = shortfall_gpus > 0
    if tokens is not None:
        demand_tok = tokens.to_numpy()
        served = np.where(throttled, np.minimum(granted_tokens, demand_tok), demand_tok)
        shortfall_tok = demand_tok - served
    else:
        demand_tok = np.full(granted_gpus.shape, np.nan)
        shortfall_tok = np.full(granted_gpus.shape, np.nan)
    count = len(members)
    return pd.DataFrame(
        {
            "hour": hours.repeat(count),
            "member": np.tile([member.name for member in members], len(hours)),
            "priority": np.tile([member.priority for member in members], len(hours)),
            "demand_gpus": demand_gpus.ravel(),
            "granted_gpus": granted_gpus.ravel(),
            "shortfall_gpus": shortfall_gpus.ravel(),
            "demand_tokens_per_s": demand_tok.ravel(),
            "granted_tokens_per_s": granted_tokens.ravel(),
            "shortfall_tokens_per_s": shortfall_tok.ravel(),
            "rate_limit_rps": (granted_tokens / per_request).ravel(),
            "tokens_per_request": per_request.ravel(),
            "rate_limit_tokens_per_s": granted_tokens.ravel(),
            "throttled": throttled.ravel(),
        },
        columns=list(MEMBERS_FRAME_COLUMNS),
    )


def _hours_frame(
    hours: pd.DatetimeIndex,
    placed: PlacedHours,
    priced: Priced,
    demand_gpus: np.ndarray,
    granted_gpus: np.ndarray,
    members_frame: pd.DataFrame,
    members: Sequence[PoolMember],
) -> pd.DataFrame:
    """One row per hour (HOURS_FRAME_COLUMNS)."""
    reserved, on_demand, spot, usd = priced
    throttled = members_frame["throttled"].to_numpy().reshape(granted_gpus.shape)
    classes = np.array([member.priority for member in members])
    queued = [
        tuple(cls for cls in PRIORITY_CLASSES if (row & (classes == cls)).any())
        for row in throttled
    ]
    placements = placed.placements
    return pd.DataFrame(
        {
            "hour": hours,
            "demand_nodes": placed.demand_nodes,
            "nodes": [item.nodes_used for item in placements],
            "gpus_used": [item.gpus_used for item in placements],
            "lower_bound": [item.lower_bound for item in placements],
            "fragmentation_gpus": [item.fragmentation_gpus for item in placements],
            "stable_nodes": placed.stable_nodes,
            "reserved_nodes": np.full(len(placements), reserved),
            "on_demand_nodes": on_demand,
            "spot_nodes": spot,
            "cost_usd": usd,
            "demand_gpus": demand_gpus.sum(axis=1),
            "granted_gpus": granted_gpus.sum(axis=1),
            "short_gpus": np.clip(demand_gpus - granted_gpus, 0, None).sum(axis=1),
            "throttled": throttled.any(axis=1),
            "queued_classes": queued,
            "migrations": [len(items) for items in placed.migrations],
            "moved_replicas": placed.moved,
        },
        columns=list(HOURS_FRAME_COLUMNS),
    )


def plan_pool(
    pool: PoolSpec,
    members: Sequence[PoolMember],
    demand_gpus: pd.DataFrame,
    demand_tokens_per_s: pd.DataFrame | None = None,
    *,
    tokens_per_request: pd.DataFrame | None = None,
    consolidate: bool = True,
) -> PoolPlan:
    """Pack, grant, place and price the members' hourly plans on the pool (module text).

    demand_gpus: one column per member (its plan's GPUs per hour; rounded up to whole
    replicas), index the plan hours. demand_tokens_per_s: the load behind those GPUs, same
    shape (optional; gives the shortfall in tokens/s). tokens_per_request: each hour's tokens
    per request for some or all members, same hours (optional; a member without a column uses
    its ``tokens_per_request`` every hour) — what the hour's requests/s limit divides by.
    consolidate: move replicas between hours when that frees a node.
    """
    members = _check_members(pool, members)
    names = [member.name for member in members]
    gpus = _check_frame(demand_gpus, names, "demand_gpus")
    tokens = None
    if demand_tokens_per_s is not None:
        tokens = _check_frame(demand_tokens_per_s, names, "demand_tokens_per_s")
        if not tokens.index.equals(gpus.index):
            raise InvalidParameterError("demand_tokens_per_s must have the hours of demand_gpus")
    hours_index = pd.DatetimeIndex(gpus.index)
    per_request = _per_request(members, hours_index, tokens_per_request)
    size_row = np.array([member.gpus_per_replica for member in members])
    demand_replicas = np.ceil(np.round(gpus.to_numpy() / size_row, 9)).astype(int)
    placed, priced, separate = _placed_and_priced(
        pool, members, hours_index, demand_replicas, consolidate=consolidate
    )
    demand_gpu_values = demand_replicas * size_row
    granted_gpus = placed.granted * size_row
    members_frame = _members_frame(
        members, hours_index, demand_gpu_values, granted_gpus, tokens, per_request
    )
    hours_frame = _hours_frame(
        hours_index, placed, priced, demand_gpu_values, granted_gpus, members_frame, members
    )
    reserved, _, _, usd = priced
    reservations = Reservations(
        pooled_reserved_nodes=int(reserved),
        pooled_peak_nodes=int(hours_frame["nodes"].max()),
        pooled_cost_usd=float(usd.sum()),
        per_service_reserved_nodes=sum(item.reserved_nodes for item in separate),
        per_service_peak_nodes=sum(item.peak_nodes for item in separate),
        per_service_cost_usd=float(sum(item.cost_usd for item in separate)),
        per_service=separate,
    )
    return PoolPlan(
        pool=pool,
        members_spec=members,
        hours=hours_frame,
        members=members_frame,
        placements=placed.placements,
        migrations=placed.migrations,
        reservations=reservations,
        notes=placed.notes,
    )
