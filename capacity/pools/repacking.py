"""From one hour's placement to the next: running replicas stay on their nodes, and the
migrations that free a node are listed (:func:`repack`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

import numpy as np

from capacity.errors import InvalidParameterError
from capacity.pools.packing import Placement, _Nodes, _spot_set, _validated, first_fit_decreasing


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


def repack(
    previous: Placement | None,
    replicas: Mapping[str, int],
    sizes: Mapping[str, int],
    gpus_per_node: int = 8,
    *,
    consolidate: bool = True,
    spot_ok: Collection[str] = (),
) -> Transition:
    """The next hour's placement, moving as few running replicas as possible.

    Replicas already placed stay on their nodes; a shrinking member stops replicas on its
    least-used nodes first (a member whose GPUs per replica changed, or that left ``sizes``,
    stops all of them); new replicas go best fit into free GPUs (largest members first), then
    onto new nodes with ids after the largest id. With ``consolidate``, while some node can be
    emptied into the other nodes' free GPUs (least-used node tried first, its replicas moved
    best fit), its replicas move and a :class:`Migration` records it. Node ids never change.
    ``previous=None`` packs from scratch with FFD. ``spot_ok``: as for
    :func:`first_fit_decreasing`, for new replicas and moves alike (replicas that already share
    a node stay where they are).
    """
    counts, checked, per_node = _validated(replicas, sizes, gpus_per_node)
    spot = _spot_set(spot_ok, checked)
    if previous is None:
        placement = first_fit_decreasing(counts, checked, per_node, spot_ok=spot)
        return Transition(placement, (), 0, sum(counts.values()), 0)
    if previous.gpus_per_node != per_node:
        raise InvalidParameterError(
            f"previous placement has gpus_per_node={previous.gpus_per_node}, this one "
            f"{per_node}; a pool's nodes keep their size, so pack it anew with previous=None"
        )
    nodes, stopped = _resume(previous, checked, spot)
    stopped += _shrink(nodes, counts)
    started = _grow(nodes, counts)
    migrations = _consolidate(nodes) if consolidate else []
    moved = sum(move.replicas for migration in migrations for move in migration.moves)
    return Transition(nodes.placement("incremental"), tuple(migrations), moved, started, stopped)


def onto_previous(previous: Placement | None, fresh: Placement) -> Transition:
    """A placement made from scratch, laid onto last hour's nodes so that the most replicas stay
    where they run: each fresh node takes the id of the previous node it shares the most
    replicas with (an assignment that maximizes the replicas kept, scipy's
    ``linear_sum_assignment``), the rest new ids after the largest. Replicas of a member that
    runs on both sides with the same GPUs per replica and are not kept count as moved; the
    member's growth as started, its shrinkage as stopped (a changed size: all stopped and
    started anew)."""
    old = [dict(contents) for contents in previous.nodes] if previous is not None else []
    new = [dict(contents) for contents in fresh.nodes]
    same = {
        member
        for member, size in fresh.sizes.items()
        if previous is not None and previous.sizes.get(member) == size
    }
    ids = [0] * len(new)
    kept = 0
    if old and new:
        from scipy.optimize import linear_sum_assignment  # ~1 s to import: only when needed

        overlap = np.zeros((len(new), len(old)), dtype=np.int64)
        old_nodes_of: dict[str, list[tuple[int, int]]] = {}
        for col, node in enumerate(old):
            for member, count in node.items():
                old_nodes_of.setdefault(member, []).append((col, count))
        for row, ours in enumerate(new):  # a member sits on few nodes: sparse, not n × n × m
            for member, count in ours.items():
                if member in same:
                    for col, theirs in old_nodes_of.get(member, ()):
                        overlap[row, col] += min(count, theirs)
        rows, cols = linear_sum_assignment(overlap, maximize=True)
        for row, col in zip(rows, cols, strict=True):
            ids[row] = previous.node_ids[col]  # type: ignore[union-attr]
        kept = int(overlap[rows, cols].sum())
    following = max(previous.node_ids, default=0) + 1 if previous is not None else 1
    for index in range(len(ids)):
        if not ids[index]:
            ids[index], following = following, following + 1
    before, after = _totals(old), _totals(new)
    moved = sum(min(before.get(m, 0), after[m]) for m in after if m in same) - kept
    started = sum(after[m] - (min(before.get(m, 0), after[m]) if m in same else 0) for m in after)
    stopped = sum(before[m] - (min(before[m], after.get(m, 0)) if m in same else 0) for m in before)
    return Transition(
        placement=replace(fresh, node_ids=tuple(ids)),
        migrations=(),
        moved_replicas=moved,
        started_replicas=started,
        stopped_replicas=stopped,
    )


def _totals(nodes: list[dict[str, int]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for node in nodes:
        for member, count in node.items():
            totals[member] = totals.get(member, 0) + count
    return totals


def _resume(
    previous: Placement, sizes: dict[str, int], spot_ok: frozenset[str]
) -> tuple[_Nodes, int]:
    """The previous placement as a working copy, without (and counting) the replicas of
    members whose GPUs per replica changed or that are no longer in ``sizes``."""
    nodes = _Nodes(previous.gpus_per_node, sizes, spot_ok)
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
            target = nodes.find(size, best=True, member=member)
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
    nodes.stable[index] = 0
    source = nodes.ids[index]
    moves = tuple(Move(member, run, source, nodes.ids[target]) for member, target, run in done)
    return Migration(moves=moves, freed_node=source)
