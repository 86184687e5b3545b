"""The fewest nodes for a pool's replicas, proven by scipy's ``milp``, and :func:`pack`, which
chooses between it and first-fit-decreasing.

:func:`exact_pack` solves small pools exactly (replicas aggregated by size); :func:`pack` runs
FFD and, for pools of at most ``EXACT_MAX_REPLICAS`` replicas that FFD leaves above the lower
bound, the exact solve. The heuristics and the hour-to-hour repacking live in
:mod:`capacity.pools.packing`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from capacity._checks import require_positive
from capacity.errors import InvalidParameterError
from capacity.pools.packing import (
    Placement,
    _Nodes,
    _validated,
    first_fit_decreasing,
    naive_first_fit,
)

PACK_METHODS = ("auto", "ffd", "exact", "naive")
# Above this many replicas pack(method="auto") keeps the FFD placement: the solve grows with
# nodes x sizes and FFD is already within a node of optimal on the pools measured.
EXACT_MAX_REPLICAS = 64


def exact_pack(
    replicas: Mapping[str, int],
    sizes: Mapping[str, int],
    gpus_per_node: int = 8,
    *,
    time_limit_s: float = 10.0,
) -> Placement:
    """The fewest nodes, proven by scipy's ``milp`` (HiGHS) within ``time_limit_s`` seconds.

    Replicas are aggregated by size for the solve: an integer count of size-s blocks per node,
    a binary node-used flag, the node capacity, used nodes first (symmetry breaking) and the
    FFD node count as the upper bound; members are then assigned to the solved per-node size
    counts. When FFD already meets the lower bound its placement is optimal and is returned as
    "exact" without a solve; when the solver proves no optimum in time, the FFD placement is
    returned with method "ffd (exact timed out)".
    """
    limit = require_positive("time_limit_s", time_limit_s)
    heuristic = first_fit_decreasing(replicas, sizes, gpus_per_node)
    if heuristic.nodes_used <= heuristic.lower_bound:
        return replace(heuristic, method="exact")
    counts, checked, per_node = _validated(replicas, sizes, gpus_per_node)
    by_size: dict[int, list[str]] = {}
    for member in sorted(m for m, k in counts.items() if k > 0):
        by_size.setdefault(checked[member], []).append(member)
    block_sizes = sorted(by_size, reverse=True)
    blocks = [sum(counts[m] for m in by_size[s]) for s in block_sizes]
    solved = _solve_blocks(
        block_sizes, blocks, per_node, (heuristic.lower_bound, heuristic.nodes_used), limit
    )
    if solved is None:
        return replace(heuristic, method="ffd (exact timed out)")
    nodes = _Nodes(per_node, checked)
    indexes = [nodes.open() for _ in solved]
    for column, size in enumerate(block_sizes):
        members, member, left = iter(by_size[size]), "", 0
        for index, row in zip(indexes, solved, strict=True):
            need = row[column]
            while need > 0:
                if left == 0:
                    member = next(members)
                    left = counts[member]
                run = min(need, left)
                nodes.put(index, member, run)
                need, left = need - run, left - run
    return nodes.placement("exact")


def _solve_blocks(
    block_sizes: list[int],
    blocks: list[int],
    per_node: int,
    node_range: tuple[int, int],
    time_limit_s: float,
) -> list[list[int]] | None:
    """Blocks of each size per node, for the used nodes only; None without a proven optimum."""
    # scipy.optimize takes about a second to import, so importing capacity does not pay for it.
    from scipy.optimize import Bounds, LinearConstraint, milp

    lower, n = node_range
    k = len(block_sizes)
    x = np.arange(n * k).reshape(n, k)  # column of "size-k blocks on node n"
    y = n * k + np.arange(n)  # column of "node n is used"
    demand = np.zeros((k, n * k + n))
    for j in range(k):
        demand[j, x[:, j]] = 1
    capacity = np.zeros((n, n * k + n))
    order = np.zeros((max(n - 1, 0), n * k + n))
    for node in range(n):
        capacity[node, x[node]] = block_sizes
        capacity[node, y[node]] = -per_node
        if node + 1 < n:
            order[node, y[node]], order[node, y[node + 1]] = 1, -1
    total = np.zeros((1, n * k + n))
    total[0, y] = 1
    cost = np.zeros(n * k + n)
    cost[y] = 1
    upper = np.concatenate(
        [np.tile([min(c, per_node // s) for s, c in zip(block_sizes, blocks, strict=True)], n)]
        + [np.ones(n)]
    )
    result = milp(
        cost,
        integrality=np.ones(n * k + n),
        bounds=Bounds(np.zeros(n * k + n), upper),
        constraints=[
            LinearConstraint(demand, blocks, blocks),
            LinearConstraint(capacity, -np.inf, 0),
            LinearConstraint(order, 0, np.inf),
            LinearConstraint(total, lower, n),
        ],
        options={"time_limit": time_limit_s},
    )
    if result.status != 0 or result.x is None:
        return None
    solution = np.rint(result.x[: n * k]).astype(int).reshape(n, k)
    # largest blocks first, so the node order does not depend on the solver's
    return sorted((row.tolist() for row in solution if row.sum() > 0), reverse=True)


def pack(
    replicas: Mapping[str, int],
    sizes: Mapping[str, int],
    gpus_per_node: int = 8,
    *,
    method: str = "auto",
    time_limit_s: float = 10.0,
) -> Placement:
    """Pack with ``method``: "ffd", "exact", "naive", or "auto" (FFD, then the exact solve
    when FFD is above the lower bound and the pool has at most EXACT_MAX_REPLICAS replicas)."""
    if method not in PACK_METHODS:
        raise InvalidParameterError(f"method must be one of {PACK_METHODS}, got {method!r}")
    if method == "naive":
        return naive_first_fit(replicas, sizes, gpus_per_node)
    if method == "exact":
        return exact_pack(replicas, sizes, gpus_per_node, time_limit_s=time_limit_s)
    placement = first_fit_decreasing(replicas, sizes, gpus_per_node)
    small = sum(replicas.values()) <= EXACT_MAX_REPLICAS
    if method == "auto" and small and placement.nodes_used > placement.lower_bound:
        return exact_pack(replicas, sizes, gpus_per_node, time_limit_s=time_limit_s)
    return placement
