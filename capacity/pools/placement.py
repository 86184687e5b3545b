"""Hour by hour, which replicas of a pool's members run and on which nodes.

Each hour the members' replicas are granted (in full, or by priority under a quota the
packing cannot meet: :func:`capacity.pools.allocation.grant_by_priority`) and placed from last
hour's placement (:func:`capacity.pools.repacking.repack`), replicas kept where they are. When spot
is cheaper than on demand, a replica of a member without ``spot_ok`` never joins a node that
holds only spot-tolerant replicas, so those nodes stay spot-eligible (unless that breaks the
quota where the placement without the rule keeps it).

An hour is placed afresh (said in ``notes``) when, kept in place,

- it would break the quota: then it gets the placement the grant was verified with (or the
  spot-aware FFD when that fits too);
- ``guard`` is on and it would use more nodes, or more stable nodes, than the members on
  nodes of their own: kept from earlier hours, a member's replicas can end up spread over
  more nodes than it needs alone. From scratch, with the spot rule, each member opens at most
  its own nodes (:mod:`capacity.pools.packing`), so the fresh placement never does, and a pool
  whose every hour stays within those counts never costs more than the separate fleets
  (:mod:`capacity.pools.pricing`). :func:`capacity.pools.plan_pool` turns the guard on only
  for a plan that would otherwise cost more than the separate fleets.

A fresh placement is laid onto last hour's nodes (:func:`capacity.pools.repacking.onto_previous`):
each fresh node keeps the id of the old node it shares the most replicas with, and only the
replicas that cannot stay count as moved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from capacity.pools.allocation import grant_by_priority
from capacity.pools.exact_packing import EXACT_MAX_REPLICAS, pack
from capacity.pools.packing import Placement, ffd_node_count, first_fit_decreasing
from capacity.pools.pricing import own_nodes, spot_members, stable_nodes
from capacity.pools.repacking import Migration, Transition, onto_previous, repack

if TYPE_CHECKING:
    from capacity.pools.spec import PoolMember, PoolSpec


@dataclass(frozen=True)
class PlacedHours:
    """Per hour: the placement, its migrations, replicas moved, nodes the demand alone would
    use, stable nodes; ``granted``: replicas granted, hours × members; ``notes``."""

    placements: tuple[Placement, ...]
    migrations: tuple[tuple[Migration, ...], ...]
    moved: tuple[int, ...]
    demand_nodes: tuple[int, ...]
    stable_nodes: tuple[int, ...]
    granted: np.ndarray
    notes: tuple[str, ...]


def _fresh_nodes(wanted: dict[str, int], sizes: dict[str, int], gpus_per_node: int) -> int:
    """Nodes of pack(wanted), counted without placing: FFD's count, or the exact solve's
    where pack() would run it (FFD above the lower bound, at most EXACT_MAX_REPLICAS)."""
    by_size: dict[int, int] = {}
    for name, count in wanted.items():
        by_size[sizes[name]] = by_size.get(sizes[name], 0) + count
    nodes = ffd_node_count(by_size, gpus_per_node)
    lower = -(-sum(size * count for size, count in by_size.items()) // gpus_per_node)
    if nodes > lower and sum(wanted.values()) <= EXACT_MAX_REPLICAS:
        return pack({k: v for k, v in wanted.items() if v}, sizes, gpus_per_node).nodes_used
    return nodes


def _within_quota(
    live: dict[str, int],
    sizes: dict[str, int],
    gpus_per_node: int,
    spot: frozenset[str],
    quota: int,
    *,
    whole: bool,
) -> Placement:
    """A fresh placement within the quota: spot-aware FFD when it fits, else the packing the
    hour was checked with (pack() of the whole demand, or FFD of the grant), which fits."""
    if spot:
        aware = first_fit_decreasing(live, sizes, gpus_per_node, spot_ok=spot)
        if aware.nodes_used <= quota:
            return aware
    if whole:
        return pack(live, sizes, gpus_per_node)
    return first_fit_decreasing(live, sizes, gpus_per_node)


def _kept(
    previous: Placement | None,
    granted: dict[str, int],
    sizes: dict[str, int],
    pool: PoolSpec,
    spot: frozenset[str],
    consolidate: bool,
) -> Transition:
    """The hour reached from ``previous`` with the spot rule, or without it when only that
    keeps the quota."""
    per_node, quota = pool.gpus_per_node, pool.quota_nodes
    transition = repack(previous, granted, sizes, per_node, consolidate=consolidate, spot_ok=spot)
    if spot and quota is not None and transition.placement.nodes_used > quota:
        plain = repack(previous, granted, sizes, per_node, consolidate=consolidate)
        if plain.placement.nodes_used <= quota:
            return plain
    return transition


def _beyond_own_fleets(
    placement: Placement,
    members: Sequence[PoolMember],
    granted: dict[str, int],
    spot: frozenset[str],
) -> bool:
    """More nodes, or more stable nodes, than the members would use on nodes of their own."""
    names = [member.name for member in members]
    own = own_nodes(members, np.array([[granted[n] for n in names]]), placement.gpus_per_node)[0]
    if placement.nodes_used > own.sum():
        return True
    own_stable = sum(int(n) for n, name in zip(own, names, strict=True) if name not in spot)
    return bool(spot) and stable_nodes(placement, spot) > own_stable


@dataclass(frozen=True)
class _Hour:
    placement: Placement
    migrations: tuple[Migration, ...]
    moved: int
    demand_nodes: int
    granted: dict[str, int]
    note: str


def _place_hour(
    previous: Placement | None,
    wanted: dict[str, int],
    pool: PoolSpec,
    members: Sequence[PoolMember],
    spot: frozenset[str],
    *,
    consolidate: bool,
    guard: bool,
) -> _Hour:
    sizes = {member.name: member.gpus_per_replica for member in members}
    per_node, quota = pool.gpus_per_node, pool.quota_nodes
    demand_nodes = _fresh_nodes(wanted, sizes, per_node)
    granted = wanted
    if quota is not None and demand_nodes > quota:
        priority = {member.name: member.priority for member in members}
        granted = grant_by_priority(wanted, sizes, priority, per_node, quota)
    live = {k: v for k, v in granted.items() if v}
    transition = _kept(previous, granted, sizes, pool, spot, consolidate)
    placement, why = transition.placement, ""
    if guard and _beyond_own_fleets(placement, members, granted, spot):
        placement = first_fit_decreasing(live, sizes, per_node, spot_ok=spot)
        why = "as kept in place it needs more (stable) nodes than the members' own fleets"
    if quota is not None and placement.nodes_used > quota:
        placement = _within_quota(live, sizes, per_node, spot, quota, whole=granted is wanted)
        why = "to stay within the quota"
    if why:  # placed afresh, laid onto last hour's nodes: what cannot stay restarts
        fresh = onto_previous(previous, placement)
        return _Hour(fresh.placement, (), fresh.moved_replicas, demand_nodes, granted, why)
    return _Hour(
        placement, transition.migrations, transition.moved_replicas, demand_nodes, granted, ""
    )


def place_hours(
    pool: PoolSpec,
    members: Sequence[PoolMember],
    hours: pd.DatetimeIndex,
    demand_replicas: np.ndarray,
    *,
    consolidate: bool = True,
    guard: bool = False,
) -> PlacedHours:
    """Grant and place ``demand_replicas`` (hours × members) on the pool (module text)."""
    names = [member.name for member in members]
    spot = spot_members(pool, members)
    tolerant = {member.name for member in members if member.spot_ok}
    done: list[_Hour] = []
    for row in demand_replicas:
        wanted = dict(zip(names, (int(v) for v in row), strict=True))
        previous = done[-1].placement if done else None
        done.append(
            _place_hour(previous, wanted, pool, members, spot, consolidate=consolidate, guard=guard)
        )
    return PlacedHours(
        placements=tuple(item.placement for item in done),
        migrations=tuple(item.migrations for item in done),
        moved=tuple(item.moved for item in done),
        demand_nodes=tuple(item.demand_nodes for item in done),
        stable_nodes=tuple(stable_nodes(item.placement, tolerant) for item in done),
        granted=np.array([[item.granted[name] for name in names] for item in done], dtype=int),
        notes=tuple(
            f"{hour.isoformat()}: placed afresh {item.note}"
            for hour, item in zip(hours, done, strict=True)
            if item.note
        ),
    )
