"""Shared GPU pools: several services' replicas (blocks of TP GPUs) packed onto one fleet of
identical nodes — what a pool is (``spec``), how replicas are packed (``packing``: first-fit
decreasing; ``exact_packing``: the proven fewest nodes; ``repacking``: hour to hour with the
fewest moves), who is granted capacity under a quota (``allocation``), hour-by-hour
placement (``placement``), node pricing and pooled reservations (``pricing``), and the
pool plan built on them (``plan``: :func:`plan_pool`, returning ``results``).

Imports only the sizing family (prices and reservations).
"""

from capacity.pools.allocation import PRIORITY_CLASSES, grant_by_priority
from capacity.pools.exact_packing import EXACT_MAX_REPLICAS, PACK_METHODS, exact_pack, pack
from capacity.pools.packing import Placement, ffd_node_count, first_fit_decreasing, naive_first_fit
from capacity.pools.plan import plan_pool
from capacity.pools.repacking import Migration, Move, Transition, repack
from capacity.pools.results import MemberReservation, PoolPlan, Reservations
from capacity.pools.spec import PoolMember, PoolSpec

__all__ = [
    "EXACT_MAX_REPLICAS",
    "PACK_METHODS",
    "PRIORITY_CLASSES",
    "MemberReservation",
    "Migration",
    "Move",
    "Placement",
    "PoolMember",
    "PoolPlan",
    "PoolSpec",
    "Reservations",
    "Transition",
    "exact_pack",
    "ffd_node_count",
    "first_fit_decreasing",
    "grant_by_priority",
    "naive_first_fit",
    "pack",
    "plan_pool",
    "repack",
]
