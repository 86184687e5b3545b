"""Load the autoscaler could not see (NaN: telemetry lost) in the plan replay: the HPA does not
scale down on a read it could not make, KEDA's fallback takes over after its failure
threshold, and the unobserved minutes are left out of every load KPI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import capacity as cap

T0 = pd.Timestamp("2026-12-02T00:00Z")
HOUR = pd.Timedelta(hours=1)
RULES = cap.ScheduleRules(cold_start_s=300, scale_down_hold_s=600)
FLEET = cap.Fleet(per_gpu_tokens_per_s=100.0, rules=RULES)  # tick 60 s
BACKSTOP = cap.ReactiveSpec(target_utilization=1.0, tolerance=0.0)


def _minutes(values: list[float]) -> pd.Series:
    return pd.Series(values, index=pd.date_range(T0, periods=len(values), freq="min"), dtype=float)


def _gap_load(before: float = 800.0, gap_min: int = 60, after: float = 800.0) -> pd.Series:
    """An hour at ``before`` tokens/s, a gap of ``gap_min`` unobserved minutes, then
    ``after`` until the third hour ends."""
    return _minutes([before] * 60 + [np.nan] * gap_min + [after] * (120 - gap_min))


def _plan(gpus: int = 2, **kwargs) -> cap.PlanPolicy:
    decision = cap.PlanDecision(at=T0, start=T0, gpus=np.array([gpus] * 3))
    return cap.PlanPolicy("plan", (decision,), reactive=BACKSTOP, **kwargs)


def _run(load: pd.Series, *policies) -> cap.ReplayResult:
    return cap.replay(
        load,
        list(policies),
        fleet=FLEET,
        start=T0,
        end=T0 + 3 * HOUR,
        initial_tokens_per_s=800.0,
    )


def test_a_lost_metric_holds_the_fleet_where_a_zero_would_scale_it_down() -> None:
    held = _run(_gap_load(), _plan()).timelines["plan"]["provisioned_gpus"].to_numpy()
    assert held[:60].min() == 8
    assert held[60:120].min() == 8  # the reactive read fails: the HPA never scales down
    zero = _run(_gap_load().fillna(0.0), _plan()).timelines["plan"]["provisioned_gpus"].to_numpy()
    assert zero[60:120].min() == 2  # read as 0, the fleet falls to the plan's floor


def test_the_plan_still_scales_up_during_the_gap() -> None:
    # the plan asks for 12 in the second hour: its trigger is read, so the HPA scales up to it
    decision = cap.PlanDecision(at=T0, start=T0, gpus=np.array([2, 12, 2]))
    policy = cap.PlanPolicy("plan", (decision,), reactive=BACKSTOP)
    held = _run(_gap_load(), policy).timelines["plan"]["provisioned_gpus"].to_numpy()
    assert held[60:115].max() == 12
    assert held[60:120].min() >= 8


def test_the_fallback_takes_over_after_more_than_failure_threshold_polls() -> None:
    result = _run(_gap_load(), _plan(fallback_replicas=20))
    desired = result.timelines["plan"]["desired_replicas"].to_numpy()
    # the gap's minutes are read at ticks 61.. (each tick reads the previous minute);
    # polls every 30 s fail from 60:00, the 4th at 61:30: in force at the tick of 62:00
    after = FLEET.fallback_after_ticks
    assert after == 3
    assert desired[61 : 61 + after - 1].max() == 8
    assert desired[61 + after - 1] == 20
    assert desired[61 + after : 121].min() == 20
    # observed again (read at 2:01): the reactive trigger answers, the hold then releases
    provisioned = result.timelines["plan"]["provisioned_gpus"].to_numpy()
    assert desired[125] == 8
    assert provisioned[125] == 20 and provisioned[-1] == 8


def test_the_fallback_counts_polls_of_the_written_interval_and_threshold() -> None:
    for threshold, polling, ticks in ((3, 30, 3), (1, 30, 2), (5, 60, 6), (2, 15, 2)):
        fleet = cap.Fleet(
            per_gpu_tokens_per_s=100.0,
            rules=RULES,
            failure_threshold=threshold,
            polling_interval_s=polling,
        )
        assert fleet.fallback_after_ticks == ticks, (threshold, polling)


def test_a_fallback_per_night_is_the_one_in_force() -> None:
    pairs = ((T0, 12), (T0 + 90 * pd.Timedelta(minutes=1), 30))
    desired = (
        _run(_gap_load(), _plan(fallback_replicas=pairs))
        .timelines["plan"]["desired_replicas"]
        .to_numpy()
    )
    assert desired[70] == 12 and desired[100] == 30


def test_the_hpa_alone_keeps_its_count_through_the_gap() -> None:
    hpa = cap.ReactivePolicy(reactive=cap.ReactiveSpec(target_utilization=1.0, tolerance=0.0))
    held = _run(_gap_load(), hpa).timelines["reactive-hpa"]["provisioned_gpus"].to_numpy()
    assert held[60:121].min() == 8 and held[60:121].max() == 8


def test_unobserved_minutes_are_left_out_of_the_load_kpis_but_billed() -> None:
    # after the gap the load doubles: the fleet (8) is over capacity until the HPA catches up
    load = _gap_load(after=1600.0)
    result = _run(load, _plan(), cap.InstantBound())
    row = result.table.loc["plan"]
    assert result.unobserved_share == pytest.approx(60 / 180)
    timeline = result.timelines["plan"]
    over_minutes = int((timeline["load_tokens_per_s"] > timeline["capacity_tokens_per_s"]).sum())
    assert over_minutes > 0
    assert row["time_over_capacity_share"] == pytest.approx(over_minutes / 120)
    assert row["gpu_hours"] == pytest.approx(timeline["provisioned_gpus"].sum() / 60)
    # the bound bridges the gap with a straight line from 8 to 16 replicas
    bound = result.timelines["instant-bound"]["provisioned_gpus"].to_numpy()
    assert bound[59] == 8 and bound[120] == 16
    assert 8 < bound[90] < 16
    assert result.table.loc["instant-bound", "time_over_capacity_share"] == 0.0


def test_a_fully_observed_load_replays_as_before() -> None:
    load = _gap_load().fillna(500.0)
    with_fallback = _run(load, _plan(fallback_replicas=40))
    without = _run(load, _plan())
    assert with_fallback.table.equals(without.table)
    assert with_fallback.unobserved_share == 0.0


@pytest.mark.parametrize(
    "values, message",
    [
        ([np.nan, np.nan], "no observed sample"),
        ([1.0, -1.0], ">= 0 where observed"),
        ([1.0, np.inf], ">= 0 where observed"),
    ],
)
def test_a_load_with_nothing_to_replay_is_refused(values: list[float], message: str) -> None:
    with pytest.raises(cap.InvalidParameterError, match=message):
        cap.replay(
            _minutes(values), [_plan()], fleet=FLEET, start=T0, end=T0 + pd.Timedelta(minutes=2)
        )


@pytest.mark.parametrize("fallback", [0, -3, True, ((T0, 0),), ((T0 + HOUR, 3), (T0, 4))])
def test_a_fallback_must_be_whole_replicas_in_time_order(fallback) -> None:
    with pytest.raises(cap.InvalidParameterError, match="fallback_replicas"):
        _plan(fallback_replicas=fallback)


@pytest.mark.parametrize(
    ("behavior", "held"), [("static", 20), ("currentReplicas", 8), ("currentReplicasIfHigher", 20)]
)
def test_the_fallback_behavior_decides_what_a_long_gap_holds(behavior: str, held: int) -> None:
    result = _run(_gap_load(), _plan(fallback_replicas=20, fallback_behavior=behavior))
    provisioned = result.timelines["plan"]["provisioned_gpus"].to_numpy()
    assert provisioned[70:121].min() == provisioned[70:121].max() == held


def test_an_unknown_fallback_behavior_is_refused() -> None:
    with pytest.raises(cap.InvalidParameterError, match="fallback_behavior must be one of"):
        _plan(fallback_replicas=20, fallback_behavior="sometimes")


def test_gpu_hours_of_a_fleet_beyond_int64_seconds_do_not_wrap_around() -> None:
    """GPUs x seconds summed in int64 wrap past 9.2e18 (negative GPU-hours); the sum is a float."""
    from capacity.simulation.replay_kpis import policy_kpis

    held = np.full(10_080, 10**15, dtype=np.int64)  # 10**15 GPUs for a week of minutes
    load = np.ones(len(held))
    kpis = policy_kpis(load, load * 2, held, 60, None)
    assert kpis["gpu_hours"] == pytest.approx(10**15 * 10_080 / 60)
