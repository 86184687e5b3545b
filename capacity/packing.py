"""Packing replicas onto nodes: which services' replicas share which node of a pool.

A replica is a block of ``gpus_per_replica`` GPUs (its tensor-parallel degree) that must sit
on one node of ``gpus_per_node`` GPUs. :func:`first_fit_decreasing` packs large pools in
milliseconds (a member's replicas fill nodes in runs, not one at a time);
:func:`exact_pack` finds the fewest nodes with scipy's ``milp`` for small ones;
:func:`naive_first_fit` is the arrival-order baseline both are measured against. From one
hour's placement to the next, :func:`repack` keeps running replicas where they are and lists
the migrations that free a node.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from capacity._checks import require_int, require_positive
from capacity.errors import InvalidParameterError

PACK_METHODS = ("auto", "ffd", "exact", "naive")
# Above this many replicas pack(method="auto") keeps the FFD placement: the solve grows with
# nodes x sizes and FFD is already within a node of optimal on the pools measured.
EXACT_MAX_REPLICAS = 64

NodeContents = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Placement:
    """Replicas per node: ``nodes[i]`` holds ((member, replicas), ...) sorted by member and has
    the stable 1-based id ``node_ids[i]``; no node is empty. ``sizes``: GPUs per replica of
    each member. ``method``: how it was made ("ffd", "exact", "naive", "incremental", or
    "ffd (exact timed out)")."""

    gpus_per_node: int
    sizes: Mapping[str, int]
    nodes: tuple[NodeContents, ...]
    node_ids: tuple[int, ...]
    method: str

    def __post_init__(self) -> None:
        if len(self.node_ids) != len(self.nodes) or len(set(self.node_ids)) != len(self.nodes):
            raise InvalidParameterError("node_ids must be one distinct id per node")
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 1 for i in self.node_ids):
            raise InvalidParameterError(f"node_ids must be whole numbers >= 1, got {self.node_ids}")
        for index, contents in enumerate(self.nodes):
            if not contents or any(self.sizes.get(m) is None or k < 1 for m, k in contents):
                raise InvalidParameterError(
                    f"node {self.node_ids[index]} must hold >= 1 replica of members in sizes, "
                    f"got {contents!r}"
                )
            used = self.used_gpus(index)
            if used > self.gpus_per_node:
                raise InvalidParameterError(
                    f"node {self.node_ids[index]} holds {used} GPUs, more than "
                    f"gpus_per_node={self.gpus_per_node}"
                )

    @property
    def nodes_used(self) -> int:
        return len(self.nodes)

    @property
    def gpus_used(self) -> int:
        return sum(self.used_gpus(index) for index in range(len(self.nodes)))

    @property
    def lower_bound(self) -> int:
        """No packing of these replicas uses fewer nodes: ceil(gpus_used / gpus_per_node)."""
        return -(-self.gpus_used // self.gpus_per_node)

    @property
    def fragmentation_gpus(self) -> int:
        """GPUs idle on the nodes in use: nodes_used x gpus_per_node - gpus_used."""
        return self.nodes_used * self.gpus_per_node - self.gpus_used

    def used_gpus(self, node_index: int) -> int:
        """GPUs in use on ``nodes[node_index]`` (a position, not a node id)."""
        return sum(self.sizes[member] * k for member, k in self.nodes[node_index])

    def replicas_of(self, member: str) -> int:
        """Replicas of ``member`` placed on all nodes (0 for a member not placed)."""
        return sum(k for contents in self.nodes for m, k in contents if m == member)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary and per-node contents."""
        return {
            "method": self.method,
            "gpus_per_node": self.gpus_per_node,
            "nodes_used": self.nodes_used,
            "gpus_used": self.gpus_used,
            "lower_bound": self.lower_bound,
            "fragmentation_gpus": self.fragmentation_gpus,
            "nodes": [
                {"node": node_id, "gpus_used": self.used_gpus(i), "replicas": dict(contents)}
                for i, (node_id, contents) in enumerate(zip(self.node_ids, self.nodes, strict=True))
            ],
        }


@dataclass(frozen=True)
class Move:
    """``replicas`` replicas of ``member`` restarted from node id ``from_node`` on ``to_node``."""

    member: str
    replicas: int
    from_node: int
    to_node: int

    def describe(self) -> str:
        noun = "replica" if self.replicas == 1 else "replicas"
        return (
            f"move {self.replicas} {noun} of {self.member} "
            f"from node {self.from_node} to node {self.to_node}"
        )


@dataclass(frozen=True)
class Migration:
    """The moves that empty node ``freed_node`` into the other nodes' free GPUs."""

    moves: tuple[Move, ...]
    freed_node: int
    frees_nodes: int = 1

    def describe(self) -> str:
        """E.g. "move 2 replicas of chat from node 3 to node 1, frees 1 node"."""
        noun = "node" if self.frees_nodes == 1 else "nodes"
        moves = "; ".join(move.describe() for move in self.moves)
        return f"{moves}, frees {self.frees_nodes} {noun}"


@dataclass(frozen=True)
class Transition:
    """One hour's placement reached from the previous one: the migrations done on the way and
    the replicas moved (restarted elsewhere), started (new) and stopped (no longer needed)."""

    placement: Placement
    migrations: tuple[Migration, ...]
    moved_replicas: int
    started_replicas: int
    stopped_replicas: int


class _Nodes:
    """A placement being built. Nodes whose free GPUs equal f sit in the heap ``_rooms[f]``
    (stale entries are dropped lazily), so finding a node that fits costs gpus_per_node heap
    peeks instead of a scan over every node."""

    def __init__(self, gpus_per_node: int, sizes: Mapping[str, int]) -> None:
        self.gpus_per_node = gpus_per_node
        self.sizes = sizes
        self.ids: list[int] = []
        self.counts: list[dict[str, int]] = []
        self.free: list[int] = []
        self.next_id = 1
        self._rooms: list[list[int]] = [[] for _ in range(gpus_per_node + 1)]

    def open(self, node_id: int | None = None) -> int:
        node_id = self.next_id if node_id is None else node_id
        self.next_id = max(self.next_id, node_id + 1)
        self.ids.append(node_id)
        self.counts.append({})
        self.free.append(-1)
        self.set_free(len(self.ids) - 1, self.gpus_per_node)
        return len(self.ids) - 1

    def set_free(self, index: int, free: int) -> None:
        """Set a node's free GPUs; -1 takes it out of every search (emptied or on trial)."""
        self.free[index] = free
        if free > 0:
            heapq.heappush(self._rooms[free], index)

    def used(self, index: int) -> int:
        return sum(self.sizes[m] * k for m, k in self.counts[index].items())

    def put(self, index: int, member: str, replicas: int) -> None:
        self.counts[index][member] = self.counts[index].get(member, 0) + replicas
        self.set_free(index, self.free[index] - replicas * self.sizes[member])

    def take(self, index: int, member: str, replicas: int) -> None:
        left = self.counts[index][member] - replicas
        if left:
            self.counts[index][member] = left
        else:
            del self.counts[index][member]
        self.set_free(index, self.free[index] + replicas * self.sizes[member])

    def find(self, size: int, *, best: bool) -> int | None:
        """The node with room for one replica of ``size`` GPUs: the lowest index (first fit)
        or the least free GPUs, then the lowest index (best fit); None when none has room."""
        found = None
        for free in range(size, self.gpus_per_node + 1):
            room = self._rooms[free]
            while room and self.free[room[0]] != free:
                heapq.heappop(room)
            if room and (found is None or room[0] < found):
                found = room[0]
                if best:
                    break
        return found

    def fill(self, member: str, replicas: int, *, best: bool) -> list[tuple[int, int]]:
        """Place replicas in runs (as many as fit on each node found), opening nodes when none
        has room; returns (node index, replicas) per run."""
        size, runs = self.sizes[member], []
        while replicas > 0:
            index = self.find(size, best=best)
            if index is None:
                index = self.open()
            run = min(replicas, self.free[index] // size)
            self.put(index, member, run)
            runs.append((index, run))
            replicas -= run
        return runs

    def placement(self, method: str) -> Placement:
        kept = [i for i, counts in enumerate(self.counts) if counts]
        return Placement(
            gpus_per_node=self.gpus_per_node,
            sizes=dict(self.sizes),
            nodes=tuple(tuple(sorted(self.counts[i].items())) for i in kept),
            node_ids=tuple(self.ids[i] for i in kept),
            method=method,
        )


def _validated(
    replicas: Mapping[str, int], sizes: Mapping[str, int], gpus_per_node: int
) -> tuple[dict[str, int], dict[str, int], int]:
    per_node = require_int("gpus_per_node", gpus_per_node, minimum=1)
    checked_sizes = {}
    for member, size in sizes.items():
        checked_sizes[member] = require_int(f"sizes[{member!r}]", size, minimum=1)
        if checked_sizes[member] > per_node:
            raise InvalidParameterError(
                f"sizes[{member!r}]={size} GPUs per replica do not fit on a node of "
                f"gpus_per_node={per_node}; use larger nodes or a lower tensor-parallel degree"
            )
    counts = {}
    for member, count in replicas.items():
        if member not in checked_sizes:
            raise InvalidParameterError(
                f"replicas names member {member!r}, which has no entry in sizes; "
                "give its GPUs per replica"
            )
        counts[member] = require_int(f"replicas[{member!r}]", count, minimum=0)
    return counts, checked_sizes, per_node


def _first_fit(
    order: Iterable[str], counts: dict[str, int], sizes: dict[str, int], per_node: int, method: str
) -> Placement:
    nodes = _Nodes(per_node, sizes)
    for member in order:
        nodes.fill(member, counts[member], best=False)
    return nodes.placement(method)


def first_fit_decreasing(
    replicas: Mapping[str, int], sizes: Mapping[str, int], gpus_per_node: int = 8
) -> Placement:
    """Pack ``replicas`` (member -> replica count) of ``sizes`` (member -> GPUs per replica)
    onto nodes of ``gpus_per_node`` GPUs: members by GPUs per replica, largest first (ties by
    name), each replica on the first node with room. Node ids 1..nodes_used in opening order."""
    counts, checked, per_node = _validated(replicas, sizes, gpus_per_node)
    order = sorted(counts, key=lambda member: (-checked[member], member))
    return _first_fit(order, counts, checked, per_node, "ffd")


def naive_first_fit(
    replicas: Mapping[str, int], sizes: Mapping[str, int], gpus_per_node: int = 8
) -> Placement:
    """First fit in arrival (mapping) order, the baseline FFD is compared with. It strands GPUs
    when small replicas arrive before sizes that do not divide the node (6-GPU replicas next to
    TP 2 on 8-GPU nodes). With sizes that divide each other and the node (TP 1/2/4/8 on 8
    GPUs) it reached the lower bound on every mix tried, as FFD does."""
    counts, checked, per_node = _validated(replicas, sizes, gpus_per_node)
    return _first_fit(counts, counts, checked, per_node, "naive")


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


def repack(
    previous: Placement | None,
    replicas: Mapping[str, int],
    sizes: Mapping[str, int],
    gpus_per_node: int = 8,
    *,
    consolidate: bool = True,
) -> Transition:
    """The next hour's placement, moving as few running replicas as possible.

    Replicas already placed stay on their nodes; a shrinking member stops replicas on its
    least-used nodes first (a member whose GPUs per replica changed, or that left ``sizes``,
    stops all of them); new replicas go best fit into free GPUs (largest members first), then
    onto new nodes with ids after the largest id. With ``consolidate``, while some node can be
    emptied into the other nodes' free GPUs (least-used node tried first, its replicas moved
    best fit), its replicas move and a :class:`Migration` records it. Node ids never change.
    ``previous=None`` packs from scratch with FFD.
    """
    counts, checked, per_node = _validated(replicas, sizes, gpus_per_node)
    if previous is None:
        placement = first_fit_decreasing(counts, checked, per_node)
        return Transition(placement, (), 0, sum(counts.values()), 0)
    if previous.gpus_per_node != per_node:
        raise InvalidParameterError(
            f"previous placement has gpus_per_node={previous.gpus_per_node}, this one "
            f"{per_node}; a pool's nodes keep their size, so pack it anew with previous=None"
        )
    nodes, stopped = _resume(previous, checked)
    stopped += _shrink(nodes, counts)
    started = _grow(nodes, counts)
    migrations = _consolidate(nodes) if consolidate else []
    moved = sum(move.replicas for migration in migrations for move in migration.moves)
    return Transition(nodes.placement("incremental"), tuple(migrations), moved, started, stopped)


def _resume(previous: Placement, sizes: dict[str, int]) -> tuple[_Nodes, int]:
    """The previous placement as a working copy, without (and counting) the replicas of
    members whose GPUs per replica changed or that are no longer in ``sizes``."""
    nodes = _Nodes(previous.gpus_per_node, sizes)
    dropped = 0
    for node_id, contents in sorted(zip(previous.node_ids, previous.nodes, strict=True)):
        index = nodes.open(node_id)
        for member, k in contents:
            if sizes.get(member) == previous.sizes[member]:
                nodes.put(index, member, k)
            else:
                dropped += k
    return nodes, dropped


def _grow(nodes: _Nodes, counts: dict[str, int]) -> int:
    """Start the missing replicas best fit (largest members first); empty nodes left over are
    released (no longer a target for moves)."""
    placed: dict[str, int] = {}
    for held in nodes.counts:
        for member, k in held.items():
            placed[member] = placed.get(member, 0) + k
    started = 0
    for member in sorted(counts, key=lambda m: (-nodes.sizes[m], m)):
        missing = counts[member] - placed.get(member, 0)
        if missing > 0:
            nodes.fill(member, missing, best=True)
            started += missing
    for index, held in enumerate(nodes.counts):
        if not held:
            nodes.set_free(index, -1)
    return started


def _shrink(nodes: _Nodes, counts: dict[str, int]) -> int:
    """Stop the replicas above each member's count, least-used nodes (then highest ids) first."""
    stopped = 0
    held: dict[str, list[int]] = {}
    for index, contents in enumerate(nodes.counts):
        for member in contents:
            held.setdefault(member, []).append(index)
    for member, indexes in held.items():
        extra = sum(nodes.counts[i][member] for i in indexes) - counts.get(member, 0)
        for index in sorted(indexes, key=lambda i: (nodes.used(i), -nodes.ids[i])):
            if extra <= 0:
                break
            run = min(extra, nodes.counts[index][member])
            nodes.take(index, member, run)
            extra -= run
            stopped += run
    return stopped


def _consolidate(nodes: _Nodes) -> list[Migration]:
    """Free nodes one at a time while some node's replicas fit in the others' free GPUs."""
    migrations: list[Migration] = []
    while True:
        live = [i for i, contents in enumerate(nodes.counts) if contents]
        total_free = sum(nodes.free[i] for i in live)
        used = {i: nodes.used(i) for i in live}
        if -(-sum(used.values()) // nodes.gpus_per_node) >= len(live):
            return migrations  # already at the lower bound: no node can be freed
        candidates = sorted(
            (i for i in live if used[i] <= total_free - nodes.free[i]),
            key=lambda i: (used[i], sum(nodes.counts[i].values()), -nodes.ids[i]),
        )
        migration = next(filter(None, (_empty_into_others(nodes, i) for i in candidates)), None)
        if migration is None:
            return migrations
        migrations.append(migration)


def _empty_into_others(nodes: _Nodes, index: int) -> Migration | None:
    """Move every replica of node ``index`` best fit onto the other nodes, or change nothing."""
    free = nodes.free[index]
    nodes.set_free(index, -1)
    contents = sorted(nodes.counts[index].items(), key=lambda mk: (-nodes.sizes[mk[0]], mk[0]))
    done: list[tuple[str, int, int]] = []
    for member, k in contents:
        size = nodes.sizes[member]
        while k > 0:
            target = nodes.find(size, best=True)
            if target is None:
                for moved_member, target, run in done:  # undo the trial
                    nodes.take(target, moved_member, run)
                nodes.set_free(index, free)
                return None
            run = min(k, nodes.free[target] // size)
            nodes.put(target, member, run)
            done.append((member, target, run))
            k -= run
    nodes.counts[index].clear()
    source = nodes.ids[index]
    moves = tuple(Move(member, run, source, nodes.ids[target]) for member, target, run in done)
    return Migration(moves=moves, freed_node=source)
