"""Packing replicas onto nodes: which services' replicas share which node of a pool.

A replica is a block of ``gpus_per_replica`` GPUs (its tensor-parallel degree) that must sit
on one node of ``gpus_per_node`` GPUs. :func:`first_fit_decreasing` packs large pools in
milliseconds (a member's replicas fill nodes in runs, not one at a time) and
:func:`ffd_node_count` gives its node count alone from the replicas per size, without placing
anyone; :func:`naive_first_fit` is the arrival-order baseline.
:func:`capacity.pools.exact_packing.exact_pack` finds the fewest nodes for small pools and
:func:`capacity.pools.repacking.repack` goes from one hour's placement to the next.

**Spot-tolerant members.** Given ``spot_ok`` (members whose replicas may run on spot nodes),
a replica of any other member never joins a node that holds only spot-tolerant replicas:
such nodes stay spot-eligible, and the nodes that must be stable (hold a replica that may not
be interrupted) are only those that members without ``spot_ok`` open themselves. Placing from
scratch, each member then opens at most the nodes it would use alone, so neither the nodes
nor the stable nodes exceed those of the members on nodes of their own.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from capacity._checks import require_int
from capacity.errors import InvalidParameterError

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


class _Nodes:
    """A placement being built. Nodes whose free GPUs equal f sit in the heap ``_rooms[f]``
    (stale entries are dropped lazily), so finding a node that fits costs gpus_per_node heap
    peeks instead of a scan over every node. With ``spot_ok`` members, ``_stable_rooms`` indexes
    the nodes that are not spot-only (empty, or holding a replica of another member): the only
    nodes a replica of a member without ``spot_ok`` may join."""

    def __init__(
        self, gpus_per_node: int, sizes: Mapping[str, int], spot_ok: Collection[str] = ()
    ) -> None:
        self.gpus_per_node = gpus_per_node
        self.sizes = sizes
        self.spot_ok = frozenset(spot_ok)
        self.ids: list[int] = []
        self.counts: list[dict[str, int]] = []
        self.free: list[int] = []
        self.stable: list[int] = []  # replicas of members without spot_ok, per node
        self.next_id = 1
        self._rooms: list[list[int]] = [[] for _ in range(gpus_per_node + 1)]
        self._stable_rooms: list[list[int]] = [[] for _ in range(gpus_per_node + 1)]

    def open(self, node_id: int | None = None) -> int:
        node_id = self.next_id if node_id is None else node_id
        self.next_id = max(self.next_id, node_id + 1)
        self.ids.append(node_id)
        self.counts.append({})
        self.free.append(-1)
        self.stable.append(0)
        self.set_free(len(self.ids) - 1, self.gpus_per_node)
        return len(self.ids) - 1

    def spot_only(self, index: int) -> bool:
        return not self.stable[index] and bool(self.counts[index])

    def set_free(self, index: int, free: int) -> None:
        """Set a node's free GPUs; -1 takes it out of every search (emptied or on trial)."""
        self.free[index] = free
        if free > 0:
            heapq.heappush(self._rooms[free], index)
            if self.spot_ok and not self.spot_only(index):
                heapq.heappush(self._stable_rooms[free], index)

    def used(self, index: int) -> int:
        return sum(self.sizes[m] * k for m, k in self.counts[index].items())

    def put(self, index: int, member: str, replicas: int) -> None:
        self.counts[index][member] = self.counts[index].get(member, 0) + replicas
        if member not in self.spot_ok:
            self.stable[index] += replicas
        self.set_free(index, self.free[index] - replicas * self.sizes[member])

    def take(self, index: int, member: str, replicas: int) -> None:
        left = self.counts[index][member] - replicas
        if left:
            self.counts[index][member] = left
        else:
            del self.counts[index][member]
        if member not in self.spot_ok:
            self.stable[index] -= replicas
        self.set_free(index, self.free[index] + replicas * self.sizes[member])

    def find(self, size: int, *, best: bool, member: str | None = None) -> int | None:
        """The node with room for one replica of ``size`` GPUs: the lowest index (first fit)
        or the least free GPUs, then the lowest index (best fit); None when none has room.
        A ``member`` without spot_ok (when some member has it) skips spot-only nodes."""
        stable_only = bool(self.spot_ok) and member is not None and member not in self.spot_ok
        rooms = self._stable_rooms if stable_only else self._rooms
        found = None
        for free in range(size, self.gpus_per_node + 1):
            room = rooms[free]
            while room and (
                self.free[room[0]] != free or (stable_only and self.spot_only(room[0]))
            ):
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
            index = self.find(size, best=best, member=member)
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


def _spot_set(spot_ok: Collection[str], sizes: Mapping[str, int]) -> frozenset[str]:
    if isinstance(spot_ok, str):
        raise InvalidParameterError("spot_ok must be a collection of member names, not a string")
    unknown = sorted(str(member) for member in spot_ok if member not in sizes)
    if unknown:
        raise InvalidParameterError(
            f"spot_ok names {unknown}, which have no entry in sizes; give their GPUs per replica"
        )
    return frozenset(spot_ok)


def _first_fit(
    order: Iterable[str],
    counts: dict[str, int],
    sizes: dict[str, int],
    per_node: int,
    method: str,
    spot_ok: frozenset[str] = frozenset(),
) -> Placement:
    nodes = _Nodes(per_node, sizes, spot_ok)
    for member in order:
        nodes.fill(member, counts[member], best=False)
    return nodes.placement(method)


def first_fit_decreasing(
    replicas: Mapping[str, int],
    sizes: Mapping[str, int],
    gpus_per_node: int = 8,
    *,
    spot_ok: Collection[str] = (),
) -> Placement:
    """Pack ``replicas`` (member -> replica count) of ``sizes`` (member -> GPUs per replica)
    onto nodes of ``gpus_per_node`` GPUs: members by GPUs per replica, largest first (ties by
    name), each replica on the first node with room. Node ids 1..nodes_used in opening order.
    ``spot_ok``: members whose replicas may run on spot nodes (module text); the others' never
    join a node holding only theirs."""
    counts, checked, per_node = _validated(replicas, sizes, gpus_per_node)
    order = sorted(counts, key=lambda member: (-checked[member], member))
    return _first_fit(order, counts, checked, per_node, "ffd", _spot_set(spot_ok, checked))


def ffd_node_count(replicas_by_size: Mapping[int, int], gpus_per_node: int = 8) -> int:
    """Nodes :func:`first_fit_decreasing` uses for ``replicas_by_size`` (GPUs per replica ->
    replicas of that size, summed over the members), without placing anyone.

    Exact, not an estimate: FFD places the members of one size one after the other, each in
    runs on the lowest-index node with room, which is one sweep of that size's replicas over
    the nodes in index order (every node with room filled, the last one perhaps in part),
    then new nodes. Only the free GPUs of each node matter, so the sweep runs on an array.
    Sizes must be whole numbers in 1..gpus_per_node and counts >= 0.
    """
    per_node = require_int("gpus_per_node", gpus_per_node, minimum=1)
    free = np.zeros(0, dtype=np.int64)
    for size in sorted(replicas_by_size, reverse=True):
        require_int("replica size", size, minimum=1)
        if size > per_node:
            raise InvalidParameterError(
                f"replicas of {size} GPUs do not fit on a node of gpus_per_node={per_node}"
            )
        count = require_int(f"replicas of size {size}", replicas_by_size[size], minimum=0)
        if count == 0:
            continue
        room = free // size
        filled = np.cumsum(room)
        if len(filled) and filled[-1] >= count:
            last = int(np.searchsorted(filled, count))  # the node the sweep ends on
            taken = room[: last + 1]
            taken[-1] -= int(filled[last]) - count
            free[: last + 1] -= taken * size
            continue
        free -= room * size
        left = count - (int(filled[-1]) if len(filled) else 0)
        per = per_node // size
        full, rest = divmod(left, per)
        opened = [per_node - per * size] * full + ([per_node - rest * size] if rest else [])
        free = np.concatenate([free, np.array(opened, dtype=np.int64)])
    return len(free)


def naive_first_fit(
    replicas: Mapping[str, int], sizes: Mapping[str, int], gpus_per_node: int = 8
) -> Placement:
    """First fit in arrival (mapping) order, the baseline FFD is compared with. It strands GPUs
    when small replicas arrive before sizes that do not divide the node (6-GPU replicas next to
    TP 2 on 8-GPU nodes). With sizes that divide each other and the node (TP 1/2/4/8 on 8
    GPUs) it reached the lower bound on every mix tried, as FFD does."""
    counts, checked, per_node = _validated(replicas, sizes, gpus_per_node)
    return _first_fit(counts, counts, checked, per_node, "naive")
