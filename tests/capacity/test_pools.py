"""Pool plans: priority grants and rate limits under a quota, pooled vs per-service
reservations, spot pricing, migrations between hours, and the quota never exceeded."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capacity import InvalidParameterError, Prices
from capacity.allocation import divisible_sizes, grant_by_priority
from capacity.packing import first_fit_decreasing
from capacity.pools import PoolMember, PoolSpec, plan_pool

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


@pytest.mark.parametrize("seed", range(20))
def test_pooling_never_costs_more_than_separate_fleets(seed: int) -> None:
    rng = np.random.default_rng(seed)
    count = int(rng.integers(2, 8))
    sizes = rng.choice([1, 2, 4, 8], size=count)
    members = [
        PoolMember(f"m{i}", int(size), tokens_per_s_per_gpu=1.0, spot_ok=bool(rng.random() < 0.3))
        for i, size in enumerate(sizes)
    ]
    demand = _frame(
        {f"m{i}": list(rng.integers(0, 10, size=24) * int(size)) for i, size in enumerate(sizes)}
    )
    plan = plan_pool(PoolSpec(name="p", node_prices=NODE, spot_interruption=0.0), members, demand)
    res = plan.reservations
    assert res.pooled_peak_nodes <= res.per_service_peak_nodes
    assert res.pooled_cost_usd <= res.per_service_cost_usd + 1e-6


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
