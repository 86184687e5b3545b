"""Packing replicas onto nodes: known optima, FFD against the exact solve, and repacking."""

from __future__ import annotations

import random
import time

import pytest

import capacity as cap

EXACT_LIMIT_S = 5.0  # each solve here takes milliseconds; the cap keeps a stuck one bounded


def _assert_valid(placement: cap.Placement, replicas: dict[str, int]) -> None:
    """Every node within its GPUs, every replica of every member placed, nothing else."""
    for index in range(placement.nodes_used):
        assert 0 < placement.used_gpus(index) <= placement.gpus_per_node
    for member, count in replicas.items():
        assert placement.replicas_of(member) == count
    placed = {member for contents in placement.nodes for member, _ in contents}
    assert placed <= {member for member, count in replicas.items() if count}
    assert len(set(placement.node_ids)) == placement.nodes_used


# --- known optima -------------------------------------------------------------------------


def test_ffd_fills_nodes_largest_first() -> None:
    sizes = {"chat": 2, "code": 4}
    placement = cap.first_fit_decreasing({"chat": 3, "code": 1}, sizes)
    assert placement.method == "ffd"
    assert placement.nodes == ((("chat", 2), ("code", 1)), (("chat", 1),))
    assert placement.node_ids == (1, 2)
    assert placement.gpus_used == 10
    assert placement.lower_bound == 2
    assert placement.fragmentation_gpus == 6  # 2 nodes x 8 - 10
    assert placement.as_dict() == {
        "method": "ffd",
        "gpus_per_node": 8,
        "nodes_used": 2,
        "gpus_used": 10,
        "lower_bound": 2,
        "fragmentation_gpus": 6,
        "nodes": [
            {"node": 1, "gpus_used": 8, "replicas": {"chat": 2, "code": 1}},
            {"node": 2, "gpus_used": 2, "replicas": {"chat": 1}},
        ],
    }


# A mix that arrives small first: embed and chat share node 1 and leave 2 GPUs there, code
# opens node 2, and each 6-GPU replica (TP 2 x 3 pipeline stages) needs a node of its own.
ARRIVAL_SIZES = {"embed": 1, "chat": 2, "code": 4, "vision": 6}
ARRIVAL_REPLICAS = {"embed": 2, "chat": 2, "code": 1, "vision": 2}


def test_arrival_order_strands_gpus_that_ffd_and_the_exact_solve_use() -> None:
    naive = cap.naive_first_fit(ARRIVAL_REPLICAS, ARRIVAL_SIZES)
    assert naive.nodes == (
        (("chat", 2), ("embed", 2)),
        (("code", 1),),
        (("vision", 1),),
        (("vision", 1),),
    )
    assert (naive.nodes_used, naive.gpus_used, naive.fragmentation_gpus) == (4, 22, 10)
    assert cap.pack(ARRIVAL_REPLICAS, ARRIVAL_SIZES, method="naive") == naive
    ffd = cap.first_fit_decreasing(ARRIVAL_REPLICAS, ARRIVAL_SIZES)
    assert ffd.nodes == (
        (("chat", 1), ("vision", 1)),
        (("chat", 1), ("vision", 1)),
        (("code", 1), ("embed", 2)),
    )
    assert (ffd.nodes_used, ffd.lower_bound, ffd.fragmentation_gpus) == (3, 3, 2)
    exact = cap.exact_pack(ARRIVAL_REPLICAS, ARRIVAL_SIZES, time_limit_s=EXACT_LIMIT_S)
    assert exact.nodes_used == 3
    assert exact.method == "exact"


@pytest.mark.parametrize(
    ("replicas", "optimum"),
    [
        ({"tp1": 8, "tp2": 4, "tp4": 2, "tp8": 1}, 4),  # 8 + 8 + 8 + 8 GPUs
        ({"tp1": 3, "tp2": 3, "tp4": 3, "tp8": 2}, 5),  # 37 GPUs
        ({"tp1": 1, "tp2": 1, "tp4": 1, "tp8": 0}, 1),  # 7 GPUs
        ({"tp1": 6, "tp2": 7, "tp4": 5, "tp8": 3}, 8),  # 64 GPUs: no GPU idle
    ],
)
def test_tp_1_2_4_8_mixes_pack_to_the_lower_bound(replicas: dict[str, int], optimum: int) -> None:
    sizes = {"tp1": 1, "tp2": 2, "tp4": 4, "tp8": 8}
    for method in ("ffd", "exact", "auto"):
        placement = cap.pack(replicas, sizes, method=method, time_limit_s=EXACT_LIMIT_S)
        assert placement.nodes_used == placement.lower_bound == optimum
        _assert_valid(placement, replicas)


def test_tp_1_2_4_8_in_any_arrival_order_also_reaches_the_lower_bound_on_8_gpu_nodes() -> None:
    # With sizes that divide each other and the node, first fit in any order has reached the
    # lower bound on every mix tried; a non-dividing size (6, 3, 5 ...) is what makes arrival
    # order cost nodes (test_arrival_order_strands_gpus_that_ffd_and_the_exact_solve_use).
    rng = random.Random(7)
    for _ in range(100):
        order = rng.sample(["tp1", "tp2", "tp4", "tp8"], 4)
        sizes = {name: int(name[2:]) for name in order}
        replicas = {name: rng.randint(0, 6) for name in order}
        naive = cap.naive_first_fit(replicas, sizes)
        assert naive.nodes_used == naive.lower_bound


# Seven-GPU replicas take a node each; the 4, 3 and 2 GPU ones fill four more exactly
# ({4, 4} {4, 4} {4, 2, 2} {3, 3, 2}), but FFD splits the two 3s and needs an eighth node.
FFD_MISS_SIZES = {"four": 4, "seven": 7, "three": 3, "two": 2}
FFD_MISS_REPLICAS = {"four": 5, "seven": 3, "three": 2, "two": 3}


def test_exact_solve_beats_ffd_where_ffd_is_not_optimal() -> None:
    ffd = cap.first_fit_decreasing(FFD_MISS_REPLICAS, FFD_MISS_SIZES)
    assert (ffd.nodes_used, ffd.lower_bound) == (8, 7)
    exact = cap.exact_pack(FFD_MISS_REPLICAS, FFD_MISS_SIZES, time_limit_s=EXACT_LIMIT_S)
    assert exact.method == "exact"
    assert exact.nodes_used == 7
    assert exact.fragmentation_gpus == 7 * 8 - 53
    _assert_valid(exact, FFD_MISS_REPLICAS)
    auto = cap.pack(FFD_MISS_REPLICAS, FFD_MISS_SIZES, time_limit_s=EXACT_LIMIT_S)
    assert (auto.method, auto.nodes_used) == ("exact", 7)


def test_exact_solve_that_runs_out_of_time_falls_back_to_ffd_and_says_so() -> None:
    placement = cap.exact_pack(FFD_MISS_REPLICAS, FFD_MISS_SIZES, time_limit_s=1e-9)
    assert placement.method == "ffd (exact timed out)"
    assert placement.nodes == cap.first_fit_decreasing(FFD_MISS_REPLICAS, FFD_MISS_SIZES).nodes


def test_auto_keeps_ffd_above_exact_max_replicas() -> None:
    replicas = {name: count * 10 for name, count in FFD_MISS_REPLICAS.items()}
    assert sum(replicas.values()) > cap.EXACT_MAX_REPLICAS
    placement = cap.pack(replicas, FFD_MISS_SIZES)
    assert placement.method == "ffd"
    assert placement.nodes_used > placement.lower_bound


def _random_pool(rng: random.Random) -> tuple[dict[str, int], dict[str, int], int]:
    gpus_per_node = rng.choice([4, 8])
    members = [f"m{i}" for i in range(rng.randint(1, 6))]
    sizes = {member: rng.randint(1, gpus_per_node) for member in members}
    replicas = {member: rng.randint(0, 5) for member in members}
    return replicas, sizes, gpus_per_node


def test_ffd_is_within_one_node_of_the_exact_optimum_on_200_random_small_pools() -> None:
    rng = random.Random(20261202)
    solved = ffd_above_optimum = 0
    for _ in range(200):
        replicas, sizes, gpus_per_node = _random_pool(rng)
        ffd = cap.pack(replicas, sizes, gpus_per_node, method="ffd")
        exact = cap.exact_pack(replicas, sizes, gpus_per_node, time_limit_s=EXACT_LIMIT_S)
        assert exact.method == "exact"  # proven optimal, not a fallback
        assert exact.lower_bound <= exact.nodes_used <= ffd.nodes_used <= exact.nodes_used + 1
        assert exact.gpus_used == ffd.gpus_used
        _assert_valid(ffd, replicas)
        _assert_valid(exact, replicas)
        solved += ffd.nodes_used > ffd.lower_bound
        ffd_above_optimum += ffd.nodes_used > exact.nodes_used
    assert solved >= 30  # the solver really ran on many of them (non-dividing sizes)
    assert ffd_above_optimum <= 5


def test_200_members_with_about_2000_replicas_pack_in_milliseconds() -> None:
    rng = random.Random(3)
    sizes = {f"svc{i:03d}": rng.choice([1, 2, 3, 4, 6, 8]) for i in range(200)}
    replicas = {member: rng.randint(5, 15) for member in sizes}
    assert 1800 <= sum(replicas.values()) <= 2200
    started = time.perf_counter()
    placement = cap.first_fit_decreasing(replicas, sizes)
    elapsed = time.perf_counter() - started
    _assert_valid(placement, replicas)
    assert elapsed < 0.25  # about 10 ms on one core
    assert placement.nodes_used <= cap.naive_first_fit(replicas, sizes).nodes_used
    next_hour = {member: count + rng.randint(-3, 3) for member, count in replicas.items()}
    started = time.perf_counter()
    transition = cap.repack(placement, next_hour, sizes)
    assert time.perf_counter() - started < 0.5
    _assert_valid(transition.placement, next_hour)


def _by_size(replicas: dict[str, int], sizes: dict[str, int]) -> dict[int, int]:
    totals: dict[int, int] = {}
    for member, count in replicas.items():
        totals[sizes[member]] = totals.get(sizes[member], 0) + count
    return totals


def test_ffd_node_count_is_the_ffd_placements_node_count() -> None:
    # the FFD miss above: 8 nodes where 7 would do
    assert cap.ffd_node_count({4: 5, 7: 3, 3: 2, 2: 3}) == 8
    # 2 x 6 GPUs open two nodes with 2 free each; 3 x 2 GPUs fill both and open a third
    assert cap.ffd_node_count({6: 2, 2: 3}) == 3
    assert cap.ffd_node_count({6: 2, 2: 2}) == 2
    assert cap.ffd_node_count({}) == 0
    assert cap.ffd_node_count({3: 0, 8: 0}) == 0
    assert cap.ffd_node_count({3: 5}, gpus_per_node=12) == 2  # 4 per node
    rng = random.Random(5)
    for _ in range(500):
        gpus_per_node = rng.choice([4, 8, 12])
        sizes = {f"m{i}": rng.randint(1, gpus_per_node) for i in range(rng.randint(1, 12))}
        replicas = {member: rng.randint(0, 30) for member in sizes}
        placement = cap.first_fit_decreasing(replicas, sizes, gpus_per_node)
        assert cap.ffd_node_count(_by_size(replicas, sizes), gpus_per_node) == (
            placement.nodes_used
        )


def test_ffd_node_count_of_200_members_with_about_2000_replicas() -> None:
    rng = random.Random(3)
    sizes = {f"svc{i:03d}": rng.choice([1, 2, 3, 4, 6, 8]) for i in range(200)}
    replicas = {member: rng.randint(5, 15) for member in sizes}
    placement = cap.first_fit_decreasing(replicas, sizes)
    assert placement.nodes_used > placement.lower_bound - 1 > 500  # a pool of hundreds of nodes
    assert cap.ffd_node_count(_by_size(replicas, sizes)) == placement.nodes_used


@pytest.mark.parametrize(
    ("by_size", "message"),
    [
        ({16: 1}, "replicas of 16 GPUs do not fit on a node of gpus_per_node=8"),
        ({2: -1}, "replicas of size 2 must be >= 0"),
        ({0: 1}, "replica size must be >= 1"),
        ({2: 1.5}, "replicas of size 2 must be a whole"),
    ],
)
def test_ffd_node_count_refuses_bad_counts(by_size: dict, message: str) -> None:
    with pytest.raises(cap.InvalidParameterError, match=message):
        cap.ffd_node_count(by_size)


# --- repacking from one hour to the next ------------------------------------------------------

SIZES = {"chat": 2, "code": 4}


def _first_hour() -> cap.Placement:
    # code fills node 1 and half of node 2; chat the rest of node 2 and half of node 3
    placement = cap.repack(None, {"chat": 4, "code": 3}, SIZES).placement
    assert placement.nodes == ((("code", 2),), (("chat", 2), ("code", 1)), (("chat", 2),))
    assert placement.node_ids == (1, 2, 3)
    return placement


def test_repack_from_nothing_is_ffd_and_starts_every_replica() -> None:
    transition = cap.repack(None, {"chat": 4, "code": 3}, SIZES)
    assert transition.placement.method == "ffd"
    assert transition.migrations == ()
    assert (transition.moved_replicas, transition.started_replicas) == (0, 7)
    assert transition.stopped_replicas == 0


def test_unchanged_demand_moves_nothing() -> None:
    previous = _first_hour()
    transition = cap.repack(previous, {"chat": 4, "code": 3}, SIZES)
    assert transition.placement.nodes == previous.nodes
    assert transition.placement.node_ids == previous.node_ids
    assert transition.placement.method == "incremental"
    assert transition.migrations == ()
    assert (transition.moved_replicas, transition.started_replicas) == (0, 0)
    assert transition.stopped_replicas == 0


def test_growth_fills_free_gpus_then_opens_the_next_node_id_without_moving_anything() -> None:
    previous = _first_hour()
    transition = cap.repack(previous, {"chat": 7, "code": 3}, SIZES)
    assert transition.placement.nodes == (
        (("code", 2),),
        (("chat", 2), ("code", 1)),
        (("chat", 4),),
        (("chat", 1),),
    )
    assert transition.placement.node_ids == (1, 2, 3, 4)
    assert transition.migrations == ()
    assert (transition.moved_replicas, transition.started_replicas) == (0, 3)


def test_a_shrink_that_leaves_two_half_empty_nodes_migrates_one_into_the_other() -> None:
    previous = _first_hour()
    # code drops a replica from node 2 (of its nodes, the one with the higher id at equal use)
    transition = cap.repack(previous, {"chat": 4, "code": 2}, SIZES)
    assert transition.placement.nodes == ((("code", 2),), (("chat", 4),))
    assert transition.placement.node_ids == (1, 2)
    assert transition.placement.fragmentation_gpus == 0
    (migration,) = transition.migrations
    assert migration.moves == (cap.Move("chat", 2, from_node=3, to_node=2),)
    assert migration.freed_node == 3
    assert migration.describe() == "move 2 replicas of chat from node 3 to node 2, frees 1 node"
    assert (transition.moved_replicas, transition.started_replicas) == (2, 0)
    assert transition.stopped_replicas == 1
    # without consolidation the two half-empty nodes stay
    kept = cap.repack(previous, {"chat": 4, "code": 2}, SIZES, consolidate=False)
    assert kept.placement.node_ids == (1, 2, 3)
    assert kept.migrations == ()
    # the next hour's new node takes the id after the largest id in use
    after = cap.repack(transition.placement, {"chat": 4, "code": 3}, SIZES)
    assert after.placement.node_ids == (1, 2, 3)
    assert after.placement.nodes[2] == (("code", 1),)


def test_a_node_emptied_onto_two_others_lists_each_move() -> None:
    previous = cap.Placement(
        gpus_per_node=8,
        sizes={"chat": 2, "code": 4, "embed": 1},
        nodes=((("code", 1), ("embed", 2)), (("chat", 3),), (("chat", 1), ("embed", 2))),
        node_ids=(1, 4, 7),
        method="ffd",
    )
    transition = cap.repack(previous, {"chat": 4, "code": 1, "embed": 4}, previous.sizes)
    (migration,) = transition.migrations
    assert migration.describe() == (
        "move 1 replica of chat from node 7 to node 1; "
        "move 2 replicas of embed from node 7 to node 4, frees 1 node"
    )
    assert transition.placement.node_ids == (1, 4)
    assert transition.placement.nodes == (
        (("chat", 1), ("code", 1), ("embed", 2)),
        (("chat", 3), ("embed", 2)),
    )
    assert transition.moved_replicas == 3


def test_a_member_whose_gpus_per_replica_changed_restarts_every_replica() -> None:
    previous = _first_hour()
    transition = cap.repack(previous, {"chat": 4, "code": 3}, {"chat": 4, "code": 4})
    _assert_valid(transition.placement, {"chat": 4, "code": 3})
    assert (transition.stopped_replicas, transition.started_replicas) == (4, 4)
    assert transition.placement.nodes[0] == (("code", 2),)  # code did not move


def test_repack_over_random_hours_keeps_the_books_and_settles() -> None:
    rng = random.Random(11)
    sizes = {"chat": 2, "code": 4, "embed": 1, "vision": 6, "reason": 8, "tiny": 3}
    placement = None
    for _ in range(40):
        replicas = {member: rng.randint(0, 8) for member in sizes}
        transition = cap.repack(placement, replicas, sizes)
        new = transition.placement
        _assert_valid(new, replicas)
        before = 0 if placement is None else sum(placement.replicas_of(m) for m in sizes)
        after = sum(new.replicas_of(m) for m in sizes)
        assert after == before + transition.started_replicas - transition.stopped_replicas
        assert transition.moved_replicas == sum(
            move.replicas for migration in transition.migrations for move in migration.moves
        )
        for migration in transition.migrations:
            assert migration.freed_node not in new.node_ids
        if placement is not None:  # a node keeps its id; new ids come after the old ones
            kept = set(placement.node_ids) & set(new.node_ids)
            assert all(i > max(placement.node_ids) for i in set(new.node_ids) - kept)
        again = cap.repack(new, replicas, sizes)
        assert again.migrations == () and again.placement.nodes == new.nodes
        placement = new


# --- a fresh placement laid onto the previous hour's nodes ---------------------------------


def test_a_fresh_placement_equal_to_the_last_moves_nothing_and_keeps_the_node_ids() -> None:
    from capacity.pools.repacking import onto_previous

    previous = _first_hour()
    shuffled = cap.Placement(8, SIZES, previous.nodes[::-1], (1, 2, 3), "ffd")
    transition = onto_previous(previous, shuffled)
    assert transition.placement.nodes == previous.nodes[::-1]
    assert transition.placement.node_ids == (3, 2, 1)
    assert (transition.moved_replicas, transition.started_replicas) == (0, 0)
    assert transition.stopped_replicas == 0


def test_a_fresh_placement_from_nothing_starts_every_replica() -> None:
    from capacity.pools.repacking import onto_previous

    fresh = cap.first_fit_decreasing({"chat": 4, "code": 3}, SIZES, 8)
    transition = onto_previous(None, fresh)
    assert transition.placement.node_ids == (1, 2, 3)
    assert (transition.moved_replicas, transition.started_replicas) == (0, 7)


def test_a_fresh_placement_restarts_a_member_whose_gpus_per_replica_changed() -> None:
    from capacity.pools.repacking import onto_previous

    previous = _first_hour()  # chat 4 × 2 GPUs, code 3 × 4 GPUs
    sizes = {"chat": 4, "code": 4}
    fresh = cap.first_fit_decreasing({"chat": 4, "code": 3}, sizes, 8)
    transition = onto_previous(previous, fresh)
    assert (transition.stopped_replicas, transition.started_replicas) == (4, 4)
    # code's 3 replicas stay or move; none of them is counted as started
    kept_code = sum(
        min(dict(contents).get("code", 0), dict(old).get("code", 0))
        for contents, node_id in zip(
            transition.placement.nodes, transition.placement.node_ids, strict=True
        )
        for old, old_id in zip(previous.nodes, previous.node_ids, strict=True)
        if node_id == old_id
    )
    assert transition.moved_replicas == 3 - kept_code


def test_a_fresh_placement_keeps_the_most_replicas_a_node_matching_can_keep() -> None:
    """On 150 random hour pairs the replicas kept (not moved) are the most any one-to-one
    matching of fresh nodes to old nodes keeps (brute force over all matchings), the books
    balance, node contents are unchanged and new ids come after the old ones."""
    import itertools

    from capacity.pools.repacking import onto_previous

    rng = random.Random(5)
    sizes = {"a": 2, "b": 4, "c": 1, "d": 3}
    checked = 0
    for _ in range(150):
        before = {m: rng.randint(0, 4) for m in sizes}
        after = {m: rng.randint(0, 4) for m in sizes}
        if not any(before.values()) or not any(after.values()):
            continue
        previous = cap.repack(None, before, sizes).placement
        fresh = cap.first_fit_decreasing({m: k for m, k in after.items() if k}, sizes, 8)
        if fresh.nodes_used > 6 or previous.nodes_used > 6:
            continue
        transition = onto_previous(previous, fresh)
        checked += 1
        placed = transition.placement
        assert placed.nodes == fresh.nodes
        assert len(set(placed.node_ids)) == placed.nodes_used
        assert all(
            i > max(previous.node_ids) for i in set(placed.node_ids) - set(previous.node_ids)
        )
        old = [dict(node) for node in previous.nodes]
        new = [dict(node) for node in fresh.nodes]

        def kept(pairs, new=new, old=old) -> int:
            return sum(min(new[i].get(m, 0), old[j].get(m, 0)) for i, j in pairs for m in sizes)

        if len(new) <= len(old):
            matchings = [
                list(zip(range(len(new)), cols, strict=True))
                for cols in itertools.permutations(range(len(old)), len(new))
            ]
        else:
            matchings = [
                list(zip(rows, range(len(old)), strict=True))
                for rows in itertools.permutations(range(len(new)), len(old))
            ]
        best = max(kept(pairs) for pairs in matchings)
        index = {node_id: j for j, node_id in enumerate(previous.node_ids)}
        ours = [
            (i, index[node_id]) for i, node_id in enumerate(placed.node_ids) if node_id in index
        ]
        assert kept(ours) == best
        continuing = sum(min(before[m], after[m]) for m in sizes)
        assert transition.moved_replicas == continuing - best >= 0
        assert sum(after.values()) == (
            sum(before.values()) + transition.started_replicas - transition.stopped_replicas
        )
    assert checked >= 120


# --- spot-tolerant members -----------------------------------------------------------------


def _stable_nodes(placement: cap.Placement, spot_ok: set[str]) -> int:
    return sum(any(m not in spot_ok for m, _ in node) for node in placement.nodes)


def _own_nodes(replicas: dict[str, int], sizes: dict[str, int], per_node: int) -> dict[str, int]:
    return {m: -(-replicas[m] // (per_node // sizes[m])) for m in replicas}


def test_a_replica_that_may_not_be_interrupted_never_joins_a_spot_only_node() -> None:
    sizes = {"chat": 2, "batch": 6}
    replicas = {"chat": 2, "batch": 2}
    # plain FFD puts a chat replica beside each batch replica: both nodes must be stable
    plain = cap.first_fit_decreasing(replicas, sizes)
    assert plain.nodes == ((("batch", 1), ("chat", 1)), (("batch", 1), ("chat", 1)))
    assert _stable_nodes(plain, {"batch"}) == 2
    # spot-aware: the batch nodes stay spot-only, chat opens one node of its own
    aware = cap.first_fit_decreasing(replicas, sizes, spot_ok={"batch"})
    assert aware.nodes == ((("batch", 1),), (("batch", 1),), (("chat", 2),))
    assert _stable_nodes(aware, {"batch"}) == 1
    # a spot-tolerant replica fills the holes of a stable node (free GPUs it pays anyway)
    mixed = cap.first_fit_decreasing({"chat": 1, "batch": 1}, sizes, spot_ok={"batch"})
    assert mixed.nodes == ((("batch", 1),), (("chat", 1),))
    fills = cap.first_fit_decreasing(
        {"chat": 3, "code": 1}, {"chat": 2, "code": 4}, spot_ok={"chat"}
    )
    assert fills.nodes == ((("chat", 2), ("code", 1)), (("chat", 1),))


def test_spot_aware_packing_stays_within_the_members_own_nodes() -> None:
    rng = random.Random(17)
    for _ in range(300):
        per_node = rng.choice([4, 8])
        sizes = {f"m{i}": rng.randint(1, per_node) for i in range(rng.randint(2, 7))}
        replicas = {member: rng.randint(0, 9) for member in sizes}
        spot = {member for member in sizes if rng.random() < 0.4}
        placement = cap.first_fit_decreasing(replicas, sizes, per_node, spot_ok=spot)
        _assert_valid(placement, replicas)
        own = _own_nodes(replicas, sizes, per_node)
        assert placement.nodes_used <= sum(own.values())
        assert _stable_nodes(placement, spot) <= sum(own[m] for m in own if m not in spot)
        # with nobody spot-tolerant the rule changes nothing
        assert cap.first_fit_decreasing(replicas, sizes, per_node, spot_ok=()).nodes == (
            cap.first_fit_decreasing(replicas, sizes, per_node).nodes
        )


def test_repack_grows_and_migrates_without_making_a_spot_only_node_stable() -> None:
    sizes = {"chat": 2, "batch": 2}
    spot = {"batch"}
    start = cap.repack(None, {"chat": 2, "batch": 4}, sizes, spot_ok=spot).placement
    assert start.nodes == ((("batch", 4),), (("chat", 2),))
    nxt = {"chat": 5, "batch": 3}
    # chat grows by 3: 2 into its own node's free GPUs, then a new node, not batch's node
    grown = cap.repack(start, nxt, sizes, spot_ok=spot, consolidate=False)
    assert grown.placement.nodes == ((("batch", 3),), (("chat", 4),), (("chat", 1),))
    # without the rule, the fifth chat replica takes batch's free GPUs
    plain = cap.repack(start, nxt, sizes, consolidate=False)
    assert plain.placement.nodes == ((("batch", 3), ("chat", 1)), (("chat", 4),))
    # consolidating: chat's lone replica (least-used node 3, tried first) may not move onto
    # the spot-only node 1, but batch may move onto node 3 and free node 1
    moved = cap.repack(start, nxt, sizes, spot_ok=spot)
    (migration,) = moved.migrations
    assert migration.describe() == "move 3 replicas of batch from node 1 to node 3, frees 1 node"
    assert moved.placement.nodes == ((("chat", 4),), (("batch", 3), ("chat", 1)))
    assert moved.placement.node_ids == (2, 3)


def test_spot_ok_must_name_members() -> None:
    with pytest.raises(cap.InvalidParameterError, match=r"spot_ok names \['x'\]"):
        cap.first_fit_decreasing({"chat": 1}, SIZES, spot_ok={"x"})
    with pytest.raises(cap.InvalidParameterError, match="not a string"):
        cap.repack(None, {"chat": 1}, SIZES, spot_ok="chat")


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: cap.first_fit_decreasing({"big": 1}, {"big": 16}), r"sizes\['big'\]=16"),
        (lambda: cap.first_fit_decreasing({"chat": -1}, SIZES), r"replicas\['chat'\] must be >= 0"),
        (lambda: cap.naive_first_fit({"chat": 1.5}, SIZES), r"replicas\['chat'\] must be a whole"),
        (
            lambda: cap.first_fit_decreasing({"x": 1}, SIZES),
            "member 'x', which has no entry in sizes",
        ),
        (
            lambda: cap.first_fit_decreasing({"chat": 1}, {"chat": 0}),
            r"sizes\['chat'\] must be >= 1",
        ),
        (lambda: cap.pack({"chat": 1}, SIZES, gpus_per_node=0), "gpus_per_node must be >= 1"),
        (lambda: cap.pack({"chat": 1}, SIZES, method="best"), "method must be one of"),
        (lambda: cap.exact_pack({"chat": 1}, SIZES, time_limit_s=0), "time_limit_s must be > 0"),
        (
            lambda: cap.repack(_first_hour(), {"chat": 1}, SIZES, gpus_per_node=4),
            "previous placement has gpus_per_node=8",
        ),
        (
            lambda: cap.Placement(8, SIZES, ((("code", 3),),), (1,), "ffd"),
            "node 1 holds 12 GPUs, more than gpus_per_node=8",
        ),
        (
            lambda: cap.Placement(8, SIZES, ((("chat", 1),), (("chat", 1),)), (1, 1), "ffd"),
            "one distinct id per node",
        ),
    ],
)
def test_invalid_inputs_are_refused_with_the_parameter_named(call, message: str) -> None:
    with pytest.raises(cap.InvalidParameterError, match=message):
        call()
