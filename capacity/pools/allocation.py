"""Who gets the pool when it is short: capacity granted by priority class under a node quota.

Classes are served in order (``critical``, then ``standard``, then ``batch``). A class whose
whole demand still fits beside the classes above it gets all of it; the first class that does
not fit shares what is left in proportion to its members' demand (the largest common share
of every member's replicas that packs, then one replica at a time to the member furthest below
its share while anything still fits); the classes below it get nothing and are queued.
"Fits" means the first-fit-decreasing packing of the granted replicas uses at most the quota's
nodes, so every grant is a placement that exists — the quota is never exceeded. The check
counts FFD's nodes from the replicas per size (:func:`capacity.pools.packing.ffd_node_count`, the
same count as the placement, without building it) and remembers each grant it has checked:
the bisection's late steps land on grants it has already packed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from capacity.pools.packing import ffd_node_count

PRIORITY_CLASSES = ("critical", "standard", "batch")
_SHARE_STEPS = 24  # bisection steps on the common share (2^-24 of the demand)


def divisible_sizes(sizes: Iterable[int], gpus_per_node: int) -> bool:
    """True when the block sizes form a divisibility chain that divides the node (e.g. TP
    1/2/4/8 on 8-GPU nodes). First-fit-decreasing then fills every node but the last, so a set
    of blocks fits on k nodes exactly when its GPUs do."""
    chain = sorted(set(sizes)) + [gpus_per_node]
    return all(larger % smaller == 0 for smaller, larger in zip(chain, chain[1:], strict=False))


def _fits_check(
    names: Sequence[str], sizes: Mapping[str, int], gpus_per_node: int, quota: int
) -> Callable[[Mapping[str, int]], bool]:
    """fits(replicas) for grants over ``names``: within the quota's GPUs and, unless the sizes
    divide each other and the node, FFD within the quota's nodes; each grant checked once."""
    divisible = divisible_sizes((sizes[name] for name in names), gpus_per_node)
    seen: dict[tuple[int, ...], bool] = {}

    def fits(replicas: Mapping[str, int]) -> bool:
        key = tuple(replicas[name] for name in names)
        if key in seen:
            return seen[key]
        gpus = sum(count * sizes[name] for name, count in replicas.items())
        if gpus > quota * gpus_per_node:
            answer = False
        elif gpus == 0 or divisible:
            answer = True
        else:
            by_size: dict[int, int] = {}
            for name, count in replicas.items():
                by_size[sizes[name]] = by_size.get(sizes[name], 0) + count
            answer = ffd_node_count(by_size, gpus_per_node) <= quota
        seen[key] = answer
        return answer

    return fits


def grant_by_priority(
    demand: Mapping[str, int],
    sizes: Mapping[str, int],
    priority: Mapping[str, str],
    gpus_per_node: int,
    quota_nodes: int,
) -> dict[str, int]:
    """Replicas granted to each member under ``quota_nodes`` nodes (see the module text).

    demand: replicas each member asks for; sizes: GPUs per replica; priority: its class.
    """
    granted = {name: 0 for name in demand}
    fits = _fits_check(list(demand), sizes, gpus_per_node, quota_nodes)
    for cls in PRIORITY_CLASSES:
        members = [name for name in demand if priority[name] == cls and demand[name] > 0]
        if not members:
            continue
        trial = dict(granted)
        trial.update({name: demand[name] for name in members})
        if fits(trial):
            granted = trial
            continue
        granted = _share_class(granted, members, demand, fits)
        break
    return granted


def _share_class(
    granted: dict[str, int],
    members: Sequence[str],
    demand: Mapping[str, int],
    fits: Callable[[Mapping[str, int]], bool],
) -> dict[str, int]:
    def at(share: float) -> dict[str, int]:
        trial = dict(granted)
        trial.update({name: math.floor(share * demand[name] + 1e-9) for name in members})
        return trial

    low, high = 0.0, 1.0
    for _ in range(_SHARE_STEPS):
        middle = (low + high) / 2
        if fits(at(middle)):
            low = middle
        else:
            high = middle
    result = at(low)
    # One replica at a time to the member furthest below its demand, while anything fits.
    open_members = [name for name in members if result[name] < demand[name]]
    while open_members:
        open_members.sort(key=lambda name: (result[name] / demand[name], -demand[name], name))
        for name in open_members:
            result[name] += 1
            if fits(result):
                break
            result[name] -= 1
        else:
            break
        open_members = [name for name in members if result[name] < demand[name]]
    return result
