"""What a pool's nodes cost, and what its members would cost on nodes of their own.

Per hour a node is **stable** when it holds a replica of a member that may not be interrupted
(no ``spot_ok``): it is reserved or on demand. The other nodes hold only spot-tolerant replicas
and run on spot when the effective spot price (``spot_interruption`` of the node-hours re-bought
on demand) is below the on-demand one. The reserved node count is the one that makes the whole
timeline cheapest (:func:`capacity.sizing.cost.lowest_cost_reserved`): reserving a node that
would otherwise run on spot is weighed against the spot price.

The per-service comparison prices each member's own fleet — ceil(replicas ÷ replicas per
node) nodes, all stable unless the member is spot-tolerant — the same way. The pool never
costs more than that when, every hour, it uses no more nodes and no more stable nodes than
the members' own fleets together: the cost is monotone in both counts and the sum of the
members' reserved counts is one of the pool's candidates.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import numpy as np

from capacity.pools.packing import Placement
from capacity.pools.results import MemberReservation
from capacity.sizing.cost import Prices, lowest_cost_reserved, purchase_mix

if TYPE_CHECKING:
    from capacity.pools.spec import PoolMember, PoolSpec


def effective_prices(pool: PoolSpec) -> Prices:
    """The pool's node prices with spot replaced by its effective price: (1 − interruption) ×
    spot + interruption × on demand."""
    prices = pool.node_prices
    spot = prices.spot_usd_per_hour
    if spot is not None:
        share = pool.spot_interruption
        spot = (1 - share) * spot + share * prices.on_demand_usd_per_hour
    return Prices(prices.on_demand_usd_per_hour, prices.reserved_usd_per_hour, spot)


def spot_members(pool: PoolSpec, members: Sequence[PoolMember]) -> frozenset[str]:
    """The members whose replicas may sit on spot nodes — none when spot is not cheaper than
    on demand (then no node runs on spot and keeping the two apart would only cost nodes)."""
    spot = effective_prices(pool).spot_usd_per_hour
    if spot is None or spot >= pool.node_prices.on_demand_usd_per_hour:
        return frozenset()
    return frozenset(member.name for member in members if member.spot_ok)


def stable_nodes(placement: Placement, spot_ok: Collection[str]) -> int:
    """Nodes of ``placement`` holding a replica of a member not in ``spot_ok``."""
    return sum(any(m not in spot_ok for m, _ in node) for node in placement.nodes)


def own_nodes(
    members: Sequence[PoolMember], replicas: np.ndarray, gpus_per_node: int
) -> np.ndarray:
    """Nodes each member would use on nodes of its own: hours × members."""
    per_node = np.array([gpus_per_node // member.gpus_per_replica for member in members])
    return -(-np.asarray(replicas, dtype=int) // per_node)


def price_nodes(
    pool: PoolSpec, nodes: np.ndarray, stable: np.ndarray
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """(reserved nodes, on-demand nodes, spot nodes, USD) per hour of a node timeline whose
    ``stable`` nodes may not run on spot."""
    prices = effective_prices(pool)
    reserved = lowest_cost_reserved(nodes, prices, stable=stable)
    on_demand, spot, usd = purchase_mix(nodes, stable, reserved, prices)
    return reserved, on_demand.astype(int), spot.astype(int), usd.astype(float)


def per_service(
    pool: PoolSpec, members: Sequence[PoolMember], own: np.ndarray
) -> tuple[MemberReservation, ...]:
    """Each member on nodes of its own (``own``: hours × members), priced as the pool is."""
    out = []
    for column, member in enumerate(members):
        nodes = own[:, column]
        stable = np.zeros_like(nodes) if member.spot_ok else nodes
        reserved, _, _, usd = price_nodes(pool, nodes, stable)
        out.append(
            MemberReservation(
                member=member.name,
                peak_nodes=int(nodes.max()),
                reserved_nodes=int(reserved),
                cost_usd=float(usd.sum()),
            )
        )
    return tuple(out)
