"""The schedule rules on hand-made hourly plans: hold, cold-start lead, floor and quota."""

from __future__ import annotations

import numpy as np
import pytest

import capacity as cap

FIVE_MIN = 300


def _timeline(schedule: cap.Schedule) -> np.ndarray:
    levels, step = schedule.timeline()
    assert step == FIVE_MIN  # gcd(3600, 300, 1800) with the default rules
    return levels.reshape(len(schedule.gpus), -1)  # one row per hour, 12 five-minute steps


def test_a_one_hour_dip_is_held() -> None:
    schedule = cap.execute_schedule([40, 40, 13, 44, 44])
    assert schedule.raw_gpus.tolist() == [40, 40, 13, 44, 44]
    assert schedule.gpus.tolist() == [40, 40, 40, 44, 44]
    # no drop inside the dip hour either; its last 5 minutes start hour 3's extra GPUs
    assert _timeline(schedule)[2].tolist() == [40] * 11 + [44]


def test_a_sustained_drop_waits_for_the_hold_then_happens_at_an_hour_boundary() -> None:
    schedule = cap.execute_schedule([20, 5, 5, 5])
    assert schedule.gpus.tolist() == [20, 20, 5, 5]
    # hold 7200 s: two low hours must pass first
    longer = cap.execute_schedule([20, 5, 5, 5], rules=cap.ScheduleRules(scale_down_hold_s=3600))
    assert longer.gpus.tolist() == [20, 20, 5, 5]
    none = cap.execute_schedule([20, 5, 5, 5], rules=cap.ScheduleRules(scale_down_hold_s=0))
    assert none.gpus.tolist() == [20, 5, 5, 5]


def test_a_rise_is_started_one_cold_start_early_and_billed() -> None:
    schedule = cap.execute_schedule([4, 4, 10])
    levels = _timeline(schedule)
    assert levels[0].tolist() == [4] * 12
    assert levels[1].tolist() == [4] * 11 + [10]  # 300 s before hour 2
    assert levels[2].tolist() == [10] * 12
    assert schedule.gpu_hours == pytest.approx(4 + 4 + 10 + 6 * FIVE_MIN / 3600)


def test_a_ten_minute_cold_start_leads_by_ten_minutes() -> None:
    rules = cap.ScheduleRules(cold_start_s=600)
    schedule = cap.execute_schedule([1, 3], rules=rules)
    levels, step = schedule.timeline()
    assert step == 600
    assert levels.tolist() == [1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3]


def test_the_floor_is_at_least_one_and_whole_replicas() -> None:
    schedule = cap.execute_schedule(
        [0, 3, 9], gpus_per_replica=4, rules=cap.ScheduleRules(min_gpus=2)
    )
    assert schedule.raw_gpus.tolist() == [4, 4, 12]
    with pytest.raises(cap.InvalidParameterError, match="min_gpus must be >= 1"):
        cap.ScheduleRules(min_gpus=0)


def test_the_quota_binds_and_says_by_how_much() -> None:
    rules = cap.ScheduleRules(max_gpus=16, scale_down_hold_s=0)
    schedule = cap.execute_schedule([8, 20, 30, 10], gpus_per_replica=4, rules=rules)
    assert schedule.gpus.tolist() == [8, 16, 16, 12]
    assert schedule.short_gpus.tolist() == [0, 4, 16, 0]
    assert schedule.short_hours.tolist() == [1, 2]


def test_a_plan_reports_its_short_hours() -> None:
    from tests.capacity.conftest import make_forecast

    forecast = make_forecast([1000 * 3600, 9000 * 3600])
    plan = cap.plan_gpus(forecast, per_gpu_tokens_per_s=1000, max_gpus=10)
    short = plan.short_hours
    assert short["hour"].tolist() == [forecast["ds"].iloc[1]]
    assert short["raw_gpus"].tolist() == [15]
    assert short["gpus"].tolist() == [10]
    assert short["short_gpus"].tolist() == [5]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cold_start_s": -1}, "cold_start_s must be >= 0"),
        ({"cold_start_s": 7200}, "cold_start_s must be <= 3600"),
        ({"scale_down_hold_s": 4000}, "scale_down_hold_s must be <= 3600"),
        ({"max_gpus": 1, "min_gpus": 2}, "below min_gpus"),
        ({"cold_start_s": 1.5}, "whole number"),
    ],
)
def test_rules_reject_what_a_fleet_cannot_do(kwargs: dict, message: str) -> None:
    with pytest.raises(cap.InvalidParameterError, match=message):
        cap.ScheduleRules(**kwargs)


def test_desired_gpus_announce_a_drop_one_hold_early_and_the_hpa_executes_it_on_time() -> None:
    # 10 GPUs for two hours, then 3: the endpoint serves 3 from the last step at which an HPA
    # with a 30-minute stabilization window (6 steps) keeps 10 until the hour, then drops.
    gpus = np.array([10, 10, 3, 3])
    served = cap.desired_gpus(gpus, cold_start_s=300, scale_down_hold_s=1800, step_s=300)
    assert served.reshape(4, 12)[1].tolist() == [10] * 7 + [3] * 5
    fleet = cap.fleet_timeline(gpus, cold_start_s=300, scale_down_hold_s=1800, step_s=300)
    assert fleet.reshape(4, 12)[1].tolist() == [10] * 12
    assert fleet.reshape(4, 12)[2].tolist() == [3] * 12
