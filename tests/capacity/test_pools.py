"""Pool plans: priority grants and rate limits under a quota, pooled vs per-service
reservations, spot pricing, migrations between hours, and the quota never exceeded."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capacity import InvalidParameterError, Prices
from capacity.pools.allocation import divisible_sizes, grant_by_priority
from capacity.pools.packing import first_fit_decreasing
from capacity.pools.plan import PoolMember, PoolSpec, plan_pool
from capacity.sizing.cost import break_even_reserved_gpus, lowest_cost_reserved, purchase_mix

HOURS = pd.date_range("2026-03-02", periods=24, freq="h", tz="UTC")
NODE = Prices(on_demand_usd_per_hour=32.0, reserved_usd_per_hour=20.0, spot_usd_per_hour=12.0)


def _frame(columns: dict[str, list[float]], hours: pd.DatetimeIndex = HOURS) -> pd.DataFrame:
    return pd.DataFrame(columns, index=hours[: len(next(iter(columns.values())))])


def _shortfall_pool() -> tuple[PoolSpec, list[PoolMember], pd.DataFrame, pd.DataFrame]:
    # 2 nodes of 8 GPUs. Demand: critical 8 GPUs (2 x TP4), standard 8 + 4 GPUs (TP2), batch 8.
    pool = PoolSpec(name="p", node_prices=NODE, quota_nodes=2)
    members = [
        PoolMember(
            "chat", 4, tokens_per_s_per_gpu=500.0, priority="critical", tokens_per_request=1000.0
        ),
        PoolMember(
            "code", 2, tokens_per_s_per_gpu=400.0, priority="standard", tokens_per_request=800.0
        ),
        PoolMember(
            "docs", 2, tokens_per_s_per_gpu=300.0, priority="standard", tokens_per_request=600.0
        ),
        PoolMember(
            "eval", 1, tokens_per_s_per_gpu=200.0, priority="batch", tokens_per_request=2000.0
        ),
    ]
    gpus = _frame({"chat": [8.0], "code": [8.0], "docs": [4.0], "eval": [8.0]})
    tokens = _frame({"chat": [4000.0], "code": [3200.0], "docs": [1200.0], "eval": [1600.0]})
    return pool, members, gpus, tokens


def test_critical_fully_served_standard_shares_batch_queued() -> None:
    pool, members, gpus, tokens = _shortfall_pool()
    plan = plan_pool(pool, members, gpus, tokens)
    rows = plan.members.set_index("member")
    assert rows.loc["chat", "granted_gpus"] == 8
    assert not rows.loc["chat", "throttled"]
    # standard shares the 8 GPUs left in proportion to demand (2:1 in replicas: 4 and 2 asked)
    assert rows.loc["code", "granted_gpus"] + rows.loc["docs", "granted_gpus"] == 8
    assert rows.loc["code", "granted_gpus"] == 6 and rows.loc["docs", "granted_gpus"] == 2
    assert rows.loc["eval", "granted_gpus"] == 0
    assert rows.loc["eval", "shortfall_gpus"] == 8
    hour = plan.hours.iloc[0]
    assert hour["nodes"] == 2 and hour["demand_nodes"] == 4
    assert hour["throttled"]
    assert hour["queued_classes"] == ("standard", "batch")
    assert hour["short_gpus"] == 2 + 2 + 8


def test_rate_limit_is_granted_capacity_over_tokens_per_request() -> None:
    pool, members, gpus, tokens = _shortfall_pool()
    rows = plan_pool(pool, members, gpus, tokens).members.set_index("member")
    for member in members:
        granted_capacity = rows.loc[member.name, "granted_gpus"] * member.tokens_per_s_per_gpu
        assert rows.loc[member.name, "granted_tokens_per_s"] == pytest.approx(granted_capacity)
        assert rows.loc[member.name, "rate_limit_rps"] == pytest.approx(
            granted_capacity / member.tokens_per_request
        )
    assert rows.loc["code", "rate_limit_rps"] == pytest.approx(6 * 400.0 / 800.0)
    assert rows.loc["eval", "rate_limit_rps"] == 0.0
    # shortfall in tokens/s: the demand the granted capacity cannot carry
    assert rows.loc["code", "shortfall_tokens_per_s"] == pytest.approx(3200.0 - 2400.0)
    assert rows.loc["chat", "shortfall_tokens_per_s"] == 0.0


def _heavy_afternoon() -> tuple[PoolSpec, list[PoolMember], pd.DataFrame, pd.DataFrame]:
    # 2 nodes: chat (critical) takes one, reason (batch, asks for 2) gets the other. Its
    # requests average 2,000 tokens over the day: 1,000 in the morning, 3,000 after noon.
    pool = PoolSpec(name="p", node_prices=NODE, quota_nodes=2)
    members = [
        PoolMember("chat", 4, 500.0, priority="critical", tokens_per_request=1000.0),
        PoolMember("reason", 8, 500.0, priority="batch", tokens_per_request=2000.0),
    ]
    gpus = _frame({"chat": [8.0] * 24, "reason": [16.0] * 24})
    per_request = _frame({"reason": [1000.0] * 12 + [3000.0] * 12})
    return pool, members, gpus, per_request


def test_a_requests_per_s_limit_divides_by_the_hours_tokens_per_request() -> None:
    pool, members, gpus, per_request = _heavy_afternoon()
    plan = plan_pool(pool, members, gpus, tokens_per_request=per_request)
    reason = plan.members[plan.members["member"] == "reason"].reset_index(drop=True)
    assert (reason["granted_tokens_per_s"] == 8 * 500.0).all()
    assert (reason["rate_limit_tokens_per_s"] == reason["granted_tokens_per_s"]).all()
    assert list(reason["tokens_per_request"]) == [1000.0] * 12 + [3000.0] * 12
    assert reason["rate_limit_rps"].tolist() == pytest.approx([4.0] * 12 + [4000 / 3000] * 12)
    admitted = reason["rate_limit_rps"] * per_request["reason"].to_numpy()
    assert (admitted <= reason["granted_tokens_per_s"] * (1 + 1e-12)).all()
    # chat has no column: its one figure holds every hour
    chat = plan.members[plan.members["member"] == "chat"]
    assert (chat["tokens_per_request"] == 1000.0).all()
    assert (chat["rate_limit_rps"] == 8 * 500.0 / 1000.0).all()
    row = plan.as_dict()["hours"][12]["members"][1]
    assert (row["member"], row["tokens_per_request"], row["rate_limit_tokens_per_s"]) == (
        "reason",
        3000.0,
        4000.0,
    )


def test_per_hour_figures_are_not_truncated_by_integer_member_figures() -> None:
    pool, _, gpus, _ = _heavy_afternoon()
    members = [
        PoolMember("chat", 4, 500.0, priority="critical", tokens_per_request=1000),
        PoolMember("reason", 8, 500.0, priority="batch", tokens_per_request=2000),
    ]
    per_request = _frame({"reason": [1999.5] * 24})
    plan = plan_pool(pool, members, gpus, tokens_per_request=per_request)
    reason = plan.members[plan.members["member"] == "reason"]
    assert (reason["tokens_per_request"] == 1999.5).all()
    assert reason["rate_limit_rps"].tolist() == pytest.approx([4000 / 1999.5] * 24)


def test_a_day_mean_tokens_per_request_admits_more_than_the_grant_in_heavy_hours() -> None:
    pool, members, gpus, per_request = _heavy_afternoon()
    plan = plan_pool(pool, members, gpus)
    reason = plan.members[plan.members["member"] == "reason"].reset_index(drop=True)
    assert (reason["rate_limit_rps"] == 2.0).all()  # 4,000 tokens/s / 2,000
    admitted = reason["rate_limit_rps"] * per_request["reason"].to_numpy()
    # the afternoon's requests carry 3,000 tokens: the limit lets in 6,000 tokens/s
    assert admitted.tolist() == [2000.0] * 12 + [6000.0] * 12
    assert (admitted[12:] > reason["rate_limit_tokens_per_s"][12:]).all()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f * 0, "finite values > 0"),
        (lambda f: f.where(f < 2000), "finite values > 0"),
        (lambda f: f.rename(columns={"reason": "nope"}), r"unknown members \['nope'\]"),
        (lambda f: f.iloc[:12], "the hours of demand_gpus"),
        (lambda f: f["reason"], "the hours of demand_gpus"),
    ],
)
def test_bad_tokens_per_request_is_rejected(change, message: str) -> None:
    pool, members, gpus, per_request = _heavy_afternoon()
    with pytest.raises(InvalidParameterError, match=message):
        plan_pool(pool, members, gpus, tokens_per_request=change(per_request))


def test_critical_shares_when_even_it_does_not_fit() -> None:
    grants = grant_by_priority(
        {"a": 6, "b": 3, "c": 4},
        {"a": 2, "b": 2, "c": 1},
        {"a": "critical", "b": "critical", "c": "standard"},
        gpus_per_node=8,
        quota_nodes=1,
    )
    assert grants["c"] == 0
    assert grants["a"] * 2 + grants["b"] * 2 <= 8
    assert (grants["a"], grants["b"]) == (3, 1)


def test_quota_is_never_exceeded_and_unthrottled_without_pressure() -> None:
    rng = np.random.default_rng(7)
    names = [f"m{i}" for i in range(12)]
    sizes = rng.choice([1, 2, 4, 8], size=len(names))
    members = [
        PoolMember(
            name,
            int(size),
            tokens_per_s_per_gpu=100.0,
            priority=("critical", "standard", "batch")[i % 3],
        )
        for i, (name, size) in enumerate(zip(names, sizes, strict=True))
    ]
    demand = _frame(
        {
            name: list(rng.integers(0, 6, size=24) * int(size))
            for name, size in zip(names, sizes, strict=True)
        }
    )
    free = plan_pool(PoolSpec(name="free", node_prices=NODE), members, demand)
    assert not free.hours["throttled"].any()
    assert (free.members["granted_gpus"] == free.members["demand_gpus"]).all()
    quota = int(free.hours["nodes"].max()) - 2
    tight = plan_pool(PoolSpec(name="tight", node_prices=NODE, quota_nodes=quota), members, demand)
    assert (tight.hours["nodes"] <= quota).all()
    assert tight.hours["throttled"].any()
    short = tight.hours["demand_nodes"] > quota
    assert (tight.hours["throttled"] == short).all()
    critical = tight.members[tight.members["priority"] == "critical"]
    batch = tight.members[tight.members["priority"] == "batch"]
    assert critical["shortfall_gpus"].sum() <= batch["shortfall_gpus"].sum()


def test_pooled_reservation_is_at_most_per_service_with_offset_peaks() -> None:
    # two services whose peaks are twelve hours apart: 12 GPUs for half the day, 4 otherwise
    west = [12.0] * 12 + [4.0] * 12
    east = [4.0] * 12 + [12.0] * 12
    members = [
        PoolMember("west", 1, tokens_per_s_per_gpu=100.0),
        PoolMember("east", 1, tokens_per_s_per_gpu=100.0),
    ]
    prices = Prices(on_demand_usd_per_hour=32.0, reserved_usd_per_hour=15.0)  # break-even 47 %
    plan = plan_pool(
        PoolSpec(name="p", node_prices=prices), members, _frame({"west": west, "east": east})
    )
    res = plan.reservations
    # Alone, each holds 2 nodes half of the time (50 % >= 47 %): 2 reserved each.
    assert [item.reserved_nodes for item in res.per_service] == [2, 2]
    assert [item.peak_nodes for item in res.per_service] == [2, 2]
    # Together the pool holds 16 GPUs every hour: 2 nodes, both reserved.
    assert (plan.hours["nodes"] == 2).all()
    assert res.pooled_reserved_nodes == 2
    assert res.pooled_reserved_nodes < res.per_service_reserved_nodes == 4
    assert res.pooled_peak_nodes == 2 and res.per_service_peak_nodes == 4
    assert res.pooled_cost_usd == pytest.approx(2 * 24 * 15.0)
    assert res.per_service_cost_usd == pytest.approx(4 * 24 * 15.0)
    assert res.saving_usd == pytest.approx(2 * 24 * 15.0)
    assert plan.total_cost_usd == pytest.approx(res.pooled_cost_usd)


def _random_pool(seed: int, sizes: tuple[int, ...]) -> tuple[list[PoolMember], pd.DataFrame]:
    rng = np.random.default_rng(seed)
    count = int(rng.integers(2, 8))
    drawn = rng.choice(sizes, size=count)
    members = [
        PoolMember(f"m{i}", int(size), tokens_per_s_per_gpu=1.0, spot_ok=bool(rng.random() < 0.3))
        for i, size in enumerate(drawn)
    ]
    demand = _frame(
        {f"m{i}": list(rng.integers(0, 10, size=24) * int(size)) for i, size in enumerate(drawn)}
    )
    return members, demand


def test_pooling_never_costs_more_than_separate_fleets() -> None:
    # 2,000 seeded pools of TP 1/2/4/8 members, a third of them spot-tolerant; before the
    # reserved count weighed spot, 13 of them cost more pooled (seeds 77, 123, 343, ...)
    plans = 0
    for seed in range(2000):
        members, demand = _random_pool(seed, (1, 2, 4, 8))
        pool = PoolSpec(name="p", node_prices=NODE, spot_interruption=0.0)
        res = plan_pool(pool, members, demand).reservations
        assert res.pooled_peak_nodes <= res.per_service_peak_nodes, seed
        assert res.pooled_cost_usd <= res.per_service_cost_usd + 1e-6, seed
        plans += 1
    assert plans == 2000


def test_pooling_never_costs_more_with_sizes_that_do_not_divide_the_node() -> None:
    # fewer seeds: most hours of these small pools run the exact solve for demand_nodes
    for seed in range(150):
        members, demand = _random_pool(10_000 + seed, (1, 2, 3, 4, 6, 8))
        pool = PoolSpec(name="p", node_prices=NODE, spot_interruption=0.05)
        res = plan_pool(pool, members, demand).reservations
        assert res.pooled_peak_nodes <= res.per_service_peak_nodes, seed
        assert res.pooled_cost_usd <= res.per_service_cost_usd + 1e-6, seed


def test_reserving_is_weighed_against_spot_where_the_elastic_nodes_run_on_spot() -> None:
    # a holds one node for 12 h and may not be interrupted; spot-tolerant b holds one node
    # from 06:00 to 18:00. The pool holds 2, 2 and then 1 node: with break-even against on
    # demand it reserved 1 node (held 18 of 24 h >= 62.5 %) and paid $552, though the hours
    # above that node would run on spot: no reservation costs $528.
    members = [
        PoolMember("a", 8, tokens_per_s_per_gpu=1.0),
        PoolMember("b", 8, tokens_per_s_per_gpu=1.0, spot_ok=True),
    ]
    demand = _frame({"a": [8.0] * 12 + [0.0] * 12, "b": [0.0] * 6 + [8.0] * 12 + [0.0] * 6})
    plan = plan_pool(PoolSpec(name="p", node_prices=NODE, spot_interruption=0.0), members, demand)
    res = plan.reservations
    assert res.pooled_reserved_nodes == 0
    assert res.pooled_cost_usd == pytest.approx(12 * 32.0 + 12 * 12.0)  # 528
    assert [(item.reserved_nodes, item.cost_usd) for item in res.per_service] == [
        (0, pytest.approx(12 * 32.0)),
        (0, pytest.approx(12 * 12.0)),
    ]
    assert res.per_service_cost_usd == pytest.approx(528.0)
    hours = plan.hours
    assert list(hours["stable_nodes"]) == [1] * 12 + [0] * 12
    assert list(hours["on_demand_nodes"]) == [1] * 12 + [0] * 12
    assert list(hours["spot_nodes"]) == [0] * 6 + [1] * 12 + [0] * 6
    # reserving the node would have cost 24 x 20 + 6 x 12
    assert 24 * 20.0 + 6 * 12.0 == 552.0 > res.pooled_cost_usd


def test_lowest_cost_reserved_is_break_even_without_spot_and_weighs_spot_with_it() -> None:
    rng = np.random.default_rng(3)
    prices = Prices(on_demand_usd_per_hour=32.0, reserved_usd_per_hour=20.0)
    for _ in range(300):
        levels = rng.integers(0, 12, size=int(rng.integers(1, 48))).astype(float)
        assert lowest_cost_reserved(levels, prices) == break_even_reserved_gpus(levels, prices)
    with_spot = Prices(32.0, 20.0, 12.0)
    levels = np.array([3.0] * 12 + [1.0] * 12)
    assert lowest_cost_reserved(levels, with_spot, stable=np.full(24, 3.0)) == 1  # 50 % < 62.5 %
    assert lowest_cost_reserved(levels, with_spot, stable=np.zeros(24)) == 0  # spot beats 20
    # one stable unit all day: reserved (20 < 32); the spot-tolerant rest stays on spot
    assert lowest_cost_reserved(levels, with_spot, stable=np.ones(24)) == 1
    on_demand, spot, usd = purchase_mix(levels, np.ones(24), 1, with_spot)
    assert list(on_demand) == [0.0] * 24
    assert list(spot) == [2.0] * 12 + [0.0] * 12
    assert usd.sum() == pytest.approx(24 * 20.0 + 24 * 12.0)
    # spot dearer than on demand is not bought
    dear = Prices(32.0, 20.0, 40.0)
    assert list(purchase_mix(levels, np.zeros(24), 0, dear)[1]) == [0.0] * 24
    assert lowest_cost_reserved(levels, Prices(32.0)) == 0
    with pytest.raises(InvalidParameterError, match="levels must be a 1-D array"):
        lowest_cost_reserved(np.array([1.0, -1.0]), prices)
    with pytest.raises(InvalidParameterError, match="one count >= 0 per hour"):
        lowest_cost_reserved(levels, with_spot, stable=np.ones(3))


def test_a_node_a_spot_tolerant_member_shares_with_another_is_priced_stable() -> None:
    # chat (TP2, 2 replicas) may not be interrupted; batch (TP6, 2 replicas) may. Beside each
    # batch replica there is room for one chat replica, but a node holding one is stable:
    # 2 stable nodes cost more than chat's own node and batch's 2 spot nodes apart.
    members = [
        PoolMember("chat", 2, tokens_per_s_per_gpu=1.0),
        PoolMember("batch", 6, tokens_per_s_per_gpu=1.0, spot_ok=True),
    ]
    demand = _frame({"chat": [4.0] * 24, "batch": [12.0] * 24})
    pool = PoolSpec(name="p", node_prices=NODE, spot_interruption=0.0)
    plan = plan_pool(pool, members, demand)
    assert plan.placements[0].nodes == ((("batch", 1),), (("batch", 1),), (("chat", 2),))
    hour = plan.hours.iloc[0]
    assert (hour["nodes"], hour["stable_nodes"], hour["spot_nodes"]) == (3, 1, 2)
    assert plan.total_cost_usd == pytest.approx(24 * (20.0 + 2 * 12.0))
    assert plan.reservations.per_service_cost_usd == pytest.approx(plan.total_cost_usd)
    # without a spot price nothing runs on spot, so the chat replicas share the batch nodes
    no_spot = plan_pool(PoolSpec(name="p", node_prices=Prices(32.0, 20.0)), members, demand)
    assert no_spot.placements[0].nodes == ((("batch", 1), ("chat", 1)),) * 2
    assert no_spot.total_cost_usd == pytest.approx(24 * 2 * 20.0)
    assert no_spot.hours.iloc[0]["stable_nodes"] == 2
    assert plan.as_dict()["hours"][0]["stable_nodes"] == 1


def test_a_plan_that_drifts_dearer_than_separate_fleets_is_placed_afresh_there() -> None:
    # 00:00 a (TP2, not spot) fills node 1 and spot-tolerant s node 2. 01:00 a shrinks to 2
    # and s grows into node 1's free half. 02:00 a is back at 4: kept in place its 2 new
    # replicas open a third node, so a sits on 2 stable nodes where alone it needs 1 — and
    # kept that way all day the pool would cost $1,224 against $1,044 apart.
    members = [
        PoolMember("a", 2, tokens_per_s_per_gpu=1.0),
        PoolMember("s", 2, tokens_per_s_per_gpu=1.0, spot_ok=True),
    ]
    demand = _frame({"a": [8.0, 4.0] + [8.0] * 22, "s": [8.0] + [12.0] * 23})
    plan = plan_pool(PoolSpec(name="p", node_prices=NODE, spot_interruption=0.0), members, demand)
    assert plan.placements[1].nodes == ((("a", 2), ("s", 2)), (("s", 4),))
    assert plan.placements[2].nodes == ((("a", 4),), (("s", 4),), (("s", 2),))
    assert plan.notes == (
        "kept in place the pool would cost $1,224.00, more than $1,044.00 on separate fleets: "
        "hours that needed more (stable) nodes than those fleets were placed afresh",
        "2026-03-02T02:00:00+00:00: placed afresh as kept in place it needs more (stable) "
        "nodes than the members' own fleets",
    )
    # laid onto 01:00's nodes: a's 4 take node 1 (its 2 replicas stay, 2 start), s's 4 on
    # node 2 stay, and only s's 2 replicas from node 1 move, onto the new node 3
    assert plan.placements[2].node_ids == (1, 2, 3)
    assert plan.hours["moved_replicas"].tolist() == [0, 0, 2] + [0] * 21
    assert list(plan.hours["stable_nodes"]) == [1] * 24
    res = plan.reservations
    assert res.pooled_cost_usd == pytest.approx(24 * 20.0 + (1 + 1 + 22 * 2) * 12.0)  # 1,032
    assert res.per_service_cost_usd == pytest.approx(1044.0)


def test_spot_tolerant_members_run_their_elastic_part_on_spot() -> None:
    members = [
        PoolMember("steady", 8, tokens_per_s_per_gpu=100.0),
        PoolMember("bursty", 8, tokens_per_s_per_gpu=100.0, spot_ok=True),
    ]
    bursty = [0.0] * 12 + [16.0] * 12
    pool = PoolSpec(name="p", node_prices=NODE, spot_interruption=0.1)
    plan = plan_pool(pool, members, _frame({"steady": [8.0] * 24, "bursty": bursty}))
    hours = plan.hours
    assert (hours["reserved_nodes"] == 1).all()
    assert (hours["on_demand_nodes"] == 0).all()
    assert list(hours["spot_nodes"]) == [0] * 12 + [2] * 12
    spot_price = 0.9 * 12.0 + 0.1 * 32.0
    assert plan.total_cost_usd == pytest.approx(24 * 20.0 + 24 * spot_price)
    no_spot = plan_pool(
        PoolSpec(name="p", node_prices=Prices(32.0, 20.0)),
        members,
        _frame({"steady": [8.0] * 24, "bursty": bursty}),
    )
    assert (no_spot.hours["spot_nodes"] == 0).all()
    assert no_spot.total_cost_usd == pytest.approx(24 * 20.0 + 24 * 32.0)


def test_a_shrink_that_frees_a_node_lists_the_migration() -> None:
    members = [
        PoolMember("a", 4, tokens_per_s_per_gpu=1.0),
        PoolMember("b", 4, tokens_per_s_per_gpu=1.0),
    ]
    # hour 0: a on node 1 (2 replicas), b on node 2 (2 replicas); hour 1: one replica each
    plan = plan_pool(
        PoolSpec(name="p", node_prices=NODE),
        members,
        _frame({"a": [8.0, 4.0], "b": [8.0, 4.0]}),
    )
    assert list(plan.hours["nodes"]) == [2, 1]
    assert plan.hours["migrations"].tolist() == [0, 1]
    assert plan.hours["moved_replicas"].tolist() == [0, 1]
    (migration,) = plan.migrations[1]
    assert migration.describe().endswith("frees 1 node")
    hour = plan.as_dict()["hours"][1]
    assert hour["migrations"] == [migration.describe()]
    assert hour["nodes"] == 1 and len(hour["placement"]) == 1


def test_replicas_are_whole_and_fragmentation_reported() -> None:
    members = [
        PoolMember("tp8", 8, tokens_per_s_per_gpu=1.0),
        PoolMember("tp2", 2, tokens_per_s_per_gpu=1.0),
    ]
    plan = plan_pool(
        PoolSpec(name="p", node_prices=NODE), members, _frame({"tp8": [9.0], "tp2": [3.0]})
    )
    rows = plan.members.set_index("member")
    assert rows.loc["tp8", "demand_gpus"] == 16  # 9 GPUs are two whole TP8 replicas
    assert rows.loc["tp2", "demand_gpus"] == 4
    hour = plan.hours.iloc[0]
    assert (hour["nodes"], hour["gpus_used"], hour["lower_bound"], hour["fragmentation_gpus"]) == (
        3,
        20,
        3,
        4,
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m, d: ([*m, m[0]], d), "unique"),
        (lambda m, d: (m, d.drop(columns=["chat"])), "missing"),
        (lambda m, d: (m, d.assign(extra=1.0)), "unknown"),
        (lambda m, d: (m, d * -1), ">= 0"),
        (lambda m, d: (m, d.reset_index(drop=True)), "DatetimeIndex"),
        (lambda m, d: ([], d), "at least one member"),
    ],
)
def test_bad_inputs_are_rejected(change, message) -> None:
    pool, members, gpus, _ = _shortfall_pool()
    bad_members, bad_demand = change(members, gpus)
    with pytest.raises(InvalidParameterError, match=message):
        plan_pool(pool, bad_members, bad_demand)


def test_bad_specs_are_rejected() -> None:
    with pytest.raises(InvalidParameterError, match="priority"):
        PoolMember("x", 1, tokens_per_s_per_gpu=1.0, priority="gold")
    with pytest.raises(InvalidParameterError, match="spot_interruption"):
        PoolSpec(name="p", node_prices=NODE, spot_interruption=1.0)
    with pytest.raises(InvalidParameterError, match="quota_nodes"):
        PoolSpec(name="p", node_prices=NODE, quota_nodes=0)
    with pytest.raises(InvalidParameterError, match="does not fit"):
        plan_pool(
            PoolSpec(name="p", node_prices=NODE, gpus_per_node=4),
            [PoolMember("x", 8, tokens_per_s_per_gpu=1.0)],
            _frame({"x": [8.0]}),
        )


@pytest.mark.parametrize("seed", range(30))
def test_divisible_sizes_fill_every_node_but_the_last(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    sizes = {f"m{i}": int(s) for i, s in enumerate(rng.choice([1, 2, 4, 8], size=6))}
    replicas = {name: int(rng.integers(0, 9)) for name in sizes}
    assert divisible_sizes(sizes.values(), 8)
    gpus = sum(replicas[n] * sizes[n] for n in sizes)
    placed = first_fit_decreasing({n: c for n, c in replicas.items() if c}, sizes, 8)
    assert placed.nodes_used == -(-gpus // 8)


def test_sizes_that_do_not_divide_are_packed_to_check_a_grant() -> None:
    assert not divisible_sizes([2, 3], 8)
    assert not divisible_sizes([4, 6], 12)
    assert divisible_sizes([3, 6], 12)
    # three blocks of 3 GPUs: 9 GPUs but no two fit on one 4-GPU node with a 3 beside them
    grants = grant_by_priority(
        {"a": 3}, {"a": 3}, {"a": "critical"}, gpus_per_node=4, quota_nodes=2
    )
    assert grants == {"a": 2}
