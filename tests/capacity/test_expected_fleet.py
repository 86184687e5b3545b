"""The expected fleet: the replayed fleet ÷ the plan's floor, hour by hour, applied to a plan."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import capacity
from capacity.simulation.expected import hourly_fleet, ratio_note


def timeline(plan: list[int], held: list[int], *, start: str = "2026-11-01T00:00Z") -> pd.DataFrame:
    """A per-minute timeline: each hour's floor and the GPUs held in it (constant per hour)."""
    index = pd.date_range(start, periods=60 * len(plan), freq="min")
    return pd.DataFrame(
        {"plan_gpus": np.repeat(plan, 60), "provisioned_gpus": np.repeat(held, 60)}, index=index
    )


def test_hourly_fleet_is_the_mean_of_each_whole_hour() -> None:
    frame = timeline([2, 4], [3, 4])
    frame.iloc[30:60, 1] = 5  # the first hour holds 3 for 30 minutes, then 5: mean 4
    hourly = hourly_fleet(frame, frame.index[0], frame.index[-1] + pd.Timedelta(minutes=1))
    assert hourly["plan_gpus"].tolist() == [2.0, 4.0]
    assert hourly["executed_gpus"].tolist() == [4.0, 4.0]


def test_an_hour_cut_by_the_window_is_left_out() -> None:
    frame = timeline([2, 4, 6], [2, 4, 6])
    start = frame.index[0] + pd.Timedelta(minutes=5)  # replays start 5 minutes past the hour
    hourly = hourly_fleet(frame, start, frame.index[-1] + pd.Timedelta(minutes=1))
    assert hourly["plan_gpus"].tolist() == [4.0, 6.0]


def test_ratios_are_quantiles_of_the_hourly_ratio_and_the_pooled_total() -> None:
    # 100 hours at a floor of 10: held 10 (ratio 1.0) for 50 hours, 20 (2.0) for 50
    hourly = pd.DataFrame({"plan_gpus": [10.0] * 100, "executed_gpus": [10.0] * 50 + [20.0] * 50})
    ratios = capacity.fleet_ratios(hourly)
    assert ratios is not None
    assert ratios.total == pytest.approx(1500 / 1000)
    assert ratios.p50 == pytest.approx(1.5)  # numpy's linear quantile between 1.0 and 2.0
    assert ratios.p90 == pytest.approx(2.0) and ratios.p99 == pytest.approx(2.0)
    assert ratios.hours == 100


def test_a_fleet_below_its_floor_counts_as_the_floor() -> None:
    # cold start: the fleet ordered later than the floor asked; never below 1 as a ratio
    hourly = pd.DataFrame({"plan_gpus": [10.0] * 30, "executed_gpus": [8.0] * 30})
    ratios = capacity.fleet_ratios(hourly)
    assert ratios is not None and ratios.p50 == 1.0 and ratios.total == 1.0
    assert "the plan is the fleet" in ratio_note(ratios)


def test_too_few_hours_give_no_ratios() -> None:
    hourly = pd.DataFrame({"plan_gpus": [10.0] * 23, "executed_gpus": [12.0] * 23})
    assert capacity.fleet_ratios(hourly) is None


def test_expected_fleet_rounds_to_replicas_and_never_below_the_floor() -> None:
    ratios = capacity.FleetRatios(p50=1.3, p90=1.9, p99=2.4, total=1.4, hours=168)
    fleet = capacity.expected_fleet(np.array([4, 8, 0]), ratios, gpus_per_replica=4)
    # 4 x 1.3 = 5.2 -> nearest replica 4 (the floor); 8 x 1.3 = 10.4 -> 3 replicas = 12
    assert fleet.p50.tolist() == [4, 12, 0]
    # 4 x 1.9 = 7.6 -> up to 8; 8 x 1.9 = 15.2 -> 16
    assert fleet.p90.tolist() == [8, 16, 0]
    assert fleet.p99.tolist() == [12, 20, 0]  # 9.6 -> 12; 19.2 -> 20
    assert fleet.gpu_hours == pytest.approx((4 + 8) * 1.4)
    assert fleet.gpu_hours_p90 == 24


def test_expected_fleet_respects_the_quota() -> None:
    ratios = capacity.FleetRatios(p50=2.0, p90=3.0, p99=4.0, total=2.0, hours=168)
    fleet = capacity.expected_fleet(np.array([5.0, 10.0]), ratios, max_gpus=12)
    assert fleet.p90.tolist() == [12, 12]
    assert fleet.mean.tolist() == [10.0, 12.0]


def test_ratios_round_trip_through_a_stored_choice() -> None:
    ratios = capacity.FleetRatios(p50=1.1, p90=1.5, p99=2.0, total=1.2, hours=150)
    assert capacity.FleetRatios.from_dict(ratios.as_dict()) == ratios
    assert capacity.FleetRatios.from_dict(None) is None
    assert capacity.FleetRatios.from_dict({"p50": 1.0}) is None  # a row from an older version


def test_a_replay_timeline_states_the_floor_beside_what_ran() -> None:
    """The replay's timeline carries the floor the plan asked for: a floor of 2 GPUs all day
    under a load only the reactive trigger covers runs above it."""
    index = pd.date_range("2026-11-01T00:00Z", periods=6 * 60, freq="min")
    load = pd.Series(np.full(len(index), 3000.0), index=index)  # 3 GPUs' worth at 1000/s
    fleet = capacity.Fleet(
        per_gpu_tokens_per_s=1000.0,
        gpus_per_replica=1,
        rules=capacity.ScheduleRules(cold_start_s=60, scale_down_hold_s=600, min_gpus=1),
    )
    decision = capacity.PlanDecision(at=index[0], start=index[0], gpus=np.full(24, 2))
    policy = capacity.PlanPolicy(
        "gpucast", (decision,), reactive=capacity.ReactiveSpec(target_utilization=0.75)
    )
    # the fleet starts at the floor an hour before the measured window (one tick of metric
    # lag, then the reactive trigger's replicas): the window sees the settled fleet
    result = capacity.replay(
        load, [policy], fleet=fleet, warmup_start=index[0], start=index[60], end=index[-1]
    )
    frame = result.timelines["gpucast"]
    assert (frame["plan_gpus"] == 2).all()
    hourly = hourly_fleet(frame, result.start, result.end)
    # the reactive trigger holds ceil(3000 / (1000 x 0.75)) = 4 GPUs over the floor of 2
    assert hourly["executed_gpus"].tolist() == [4.0] * len(hourly)
    assert hourly["plan_binds"].tolist() == [0.0] * len(hourly)  # the floor never set it
    ratios = capacity.fleet_ratios(pd.concat([hourly] * 6))
    assert ratios is not None and ratios.total == pytest.approx(2.0)


def test_a_service_the_reactive_trigger_carries_says_so() -> None:
    # the floor set the fleet in 10 % of the time: the reactive trigger carries the service
    hourly = pd.DataFrame(
        {"plan_gpus": [10.0] * 48, "executed_gpus": [18.0] * 48, "plan_binds": [0.1] * 48}
    )
    ratios = capacity.fleet_ratios(hourly)
    assert ratios is not None and ratios.plan_binds_share == pytest.approx(0.1)
    assert "carried by the reactive trigger" in ratio_note(ratios)
    adds = "+12 GPU-h (+3.0%) to the reactive trigger alone"
    assert ratio_note(ratios, adds).endswith(f"the forecast adds {adds}")
    bound = hourly.assign(plan_binds=0.6)  # the floor sets the fleet most of the time
    ratios = capacity.fleet_ratios(bound)
    assert ratios is not None and "carried" not in ratio_note(ratios)
    assert adds not in ratio_note(ratios, adds)  # said only where the trigger carries it


def test_ratios_on_the_sized_load_keep_the_forecast_shape_where_the_floor_is_flat() -> None:
    """A floor on the minimum all day (1 GPU) says nothing of tomorrow's peak; the load the
    plan sized each hour for does: the replayed fleet ran twice that load in every hour, so
    tomorrow's expected fleet is twice tomorrow's sized load, never below the floor."""
    load = np.array([0.5, 1.0, 2.0, 4.0] * 12)  # GPUs at 100 % of the line
    hourly = pd.DataFrame(
        {"plan_gpus": [1.0] * 48, "executed_gpus": 2 * load, "sized_load_gpus": load}
    )
    ratios = capacity.fleet_ratios(hourly)
    assert ratios is not None and ratios.base == "load"
    assert (ratios.p50, ratios.p90, ratios.total) == pytest.approx((2.0, 2.0, 2.0))
    on_floor = capacity.fleet_ratios(hourly.drop(columns="sized_load_gpus"))
    assert on_floor is not None and on_floor.base == "floor"
    tomorrow = np.array([0.25, 3.0, 6.0])
    fleet = capacity.expected_fleet(np.ones(3), ratios, sized_load_gpus=tomorrow)
    assert fleet.p50.tolist() == [1, 6, 12]  # 0.5 is held at the floor of 1
    assert fleet.p90.tolist() == [1, 6, 12]
    assert fleet.mean.tolist() == pytest.approx([1.0, 6.0, 12.0])
    flat = capacity.expected_fleet(np.ones(3), on_floor)  # the floor's view: one figure
    assert len(set(flat.p90.tolist())) == 1
    with pytest.raises(capacity.CapacityError, match="sized_load_gpus"):
        capacity.expected_fleet(np.ones(3), ratios)


def test_ratios_stored_before_the_sized_load_was_kept_read_as_floor_ratios() -> None:
    ratios = capacity.FleetRatios(p50=1.1, p90=1.5, p99=2.0, total=1.2, hours=150, base="load")
    assert capacity.FleetRatios.from_dict(ratios.as_dict()) == ratios
    older = {k: v for k, v in ratios.as_dict().items() if k != "base"}
    assert capacity.FleetRatios.from_dict(older).base == "floor"  # type: ignore[union-attr]
    assert capacity.FleetRatios.from_dict(ratios.as_dict() | {"base": "moon"}) is None


def test_the_replay_timeline_carries_the_load_each_decision_sized_for() -> None:
    index = pd.date_range("2026-11-01T00:00Z", periods=4 * 60, freq="min")
    load = pd.Series(np.full(len(index), 3000.0), index=index)
    fleet = capacity.Fleet(
        per_gpu_tokens_per_s=1000.0,
        rules=capacity.ScheduleRules(cold_start_s=60, scale_down_hold_s=600, min_gpus=1),
    )
    sized = np.arange(24, dtype=float) + 0.5
    first = capacity.PlanDecision(index[0], index[0], np.full(24, 2), load_gpus=sized)
    # an hour later a fresher plan for the same hours sized each for 10 GPUs more
    second = capacity.PlanDecision(index[60], index[0], np.full(24, 2), load_gpus=sized + 10)
    policy = capacity.PlanPolicy("gpucast", (first, second))
    result = capacity.replay(load, [policy], fleet=fleet, start=index[0], end=index[-1])
    frame = result.timelines["gpucast"]
    hourly = hourly_fleet(frame, result.start, result.end)
    assert hourly["sized_load_gpus"].tolist() == [0.5, 11.5, 12.5]  # hour 0, then the fresher
    plain = capacity.PlanPolicy(
        "plain", (capacity.PlanDecision(index[0], index[0], np.full(24, 2)),)
    )
    result = capacity.replay(load, [plain], fleet=fleet, start=index[0], end=index[-1])
    assert "sized_load_gpus" not in result.timelines["plain"]
    with pytest.raises(capacity.CapacityError, match="load_gpus"):
        capacity.PlanDecision(index[0], index[0], np.full(24, 2), load_gpus=np.full(23, 1.0))
