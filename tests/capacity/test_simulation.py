"""The policy simulator on small hand-made loads whose replica timelines are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import capacity as cap

# 10-minute samples replayed in 5-minute ticks: 4 ticks of 100, 4 of 300, 4 of 100 (units/s).
LOAD = np.array([100.0, 100, 300, 300, 100, 100])
PLAN = np.array([1, 1, 3, 3, 1, 1])
# The load before the replay (what each fleet starts sized for) equals its first sample.
RUN = {
    "capacity_per_replica": 100.0,
    "step_s": 600,
    "tick_s": 300,
    "cold_start_s": 300,
    "initial_load": 100.0,
}
EXACT_HPA = cap.ReactiveHPA(target_utilization=1.0, tolerance=0.0, scale_down_window_s=0)


def _timeline(policy, load=LOAD, **overrides):
    result = cap.simulate_policy(load, policy, **(RUN | overrides))
    return (
        result,
        result.timeline["provisioned_replicas"].tolist(),
        result.timeline["ready_replicas"].tolist(),
    )


def test_static_peak_holds_the_peak_fleet() -> None:
    result, provisioned, ready = _timeline(cap.StaticPeak(utilization_target=1.0, peak_load=300))
    assert provisioned == ready == [3] * 12
    assert result.kpis["gpu_hours"] == 3.0
    assert result.kpis["scale_events"] == 0
    assert result.kpis["mean_utilization"] == pytest.approx(
        2000 / 3600
    )  # 8 ticks x 100 + 4 x 300 on 3 x 100


def test_reactive_lags_one_metric_tick_plus_the_cold_start() -> None:
    result, provisioned, ready = _timeline(EXACT_HPA, usd_per_gpu_hour=2.0)
    assert provisioned == [1, 1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1]
    assert ready == [1, 1, 1, 1, 1, 1, 3, 3, 3, 1, 1, 1]
    kpis = result.kpis
    assert kpis["hours_above_100"] == pytest.approx(2 * 300 / 3600)
    assert kpis["rate_limited"] == pytest.approx(2 * 200 * 300)  # two ticks 200/s short
    assert kpis["rate_limited_share"] == pytest.approx(120_000 / (2000 * 300))
    assert kpis["gpu_hours"] == pytest.approx(20 * 300 / 3600)
    assert kpis["cost_usd"] == pytest.approx(2 * kpis["gpu_hours"])
    assert kpis["scale_events"] == 2


def test_without_cold_start_reactive_still_lags_one_tick() -> None:
    _, provisioned, ready = _timeline(EXACT_HPA, cold_start_s=0)
    assert provisioned == ready == [1, 1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1]


def test_scale_down_stabilization_window_delays_the_drop() -> None:
    policy = cap.ReactiveHPA(target_utilization=1.0, tolerance=0.0, scale_down_window_s=600)
    _, provisioned, _ = _timeline(policy)
    assert provisioned == [1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 1]


def test_scale_up_step_limit_and_cooldown() -> None:
    limited = cap.ReactiveHPA(
        target_utilization=1.0,
        tolerance=0.0,
        scale_down_window_s=0,
        max_scale_up_step=1,
        step_period_s=300,
    )
    _, provisioned, _ = _timeline(limited)
    assert provisioned == [1, 1, 1, 1, 1, 2, 3, 3, 3, 1, 1, 1]
    cooled = cap.ReactiveHPA(
        target_utilization=1.0, tolerance=0.0, scale_down_window_s=0, cooldown_s=1500
    )
    _, provisioned, _ = _timeline(cooled)
    assert provisioned == [1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 1, 1]


def test_hpa_tolerance_ignores_small_deviations() -> None:
    policy = cap.ReactiveHPA(target_utilization=1.0, tolerance=0.1, scale_down_window_s=0)
    _, provisioned, _ = _timeline(policy, load=np.array([100.0, 108, 108, 100]))
    assert provisioned == [1] * 8


def test_tiered_emergency_jump_rate_limit_and_slow_scale_down() -> None:
    result, provisioned, ready = _timeline(cap.Tiered())
    # Starts at ceil(100 / 75) = 2; sees 300/s on 2 replicas (150 %): emergency jump to
    # ceil(300 / 75) = 4; then 25 % utilization for 2 ticks (600 s) removes one replica.
    assert provisioned == [2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 3, 3]
    assert ready == [2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 3, 3]
    # The gateway admits 95 % of 200/s while the new replicas start: 110/s rejected, 2 ticks.
    assert result.kpis["rate_limited"] == pytest.approx(2 * 110 * 300)


def test_tiered_sustained_85_percent_adds_one_then_two() -> None:
    load = np.full(12, 86.0)  # on 1 replica: 86 % -> +1 after 2 ticks of 60 s
    policy = cap.Tiered(scale_down_below=0.0)
    result = cap.simulate_policy(
        load,
        policy,
        capacity_per_replica=100.0,
        step_s=60,
        tick_s=60,
        cold_start_s=0,
        initial_load=86.0,
    )
    assert result.timeline["provisioned_replicas"].tolist()[:4] == [2, 2, 2, 2]
    hot = cap.simulate_policy(
        np.concatenate([np.full(1, 50.0), np.full(5, 92.0)]),
        policy,
        capacity_per_replica=100.0,
        step_s=60,
        tick_s=60,
        cold_start_s=0,
        initial_load=50.0,
    )
    assert hot.timeline["provisioned_replicas"].tolist() == [1, 1, 1, 3, 3, 3]


def test_predictive_orders_capacity_one_cold_start_ahead() -> None:
    result, provisioned, ready = _timeline(cap.Predictive(PLAN))
    assert provisioned == [1, 1, 1, 3, 3, 3, 3, 3, 1, 1, 1, 1]
    assert ready == [1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1]
    assert result.kpis["hours_above_100"] == 0
    assert result.kpis["rate_limited"] == 0


def test_hybrid_is_the_max_of_plan_and_reaction() -> None:
    under_plan = np.array([1, 1, 1, 1, 1, 1])  # the forecast missed the surge
    _, provisioned, _ = _timeline(cap.Hybrid(cap.Predictive(under_plan), EXACT_HPA))
    assert provisioned == [1, 1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1]
    _, provisioned, _ = _timeline(cap.Hybrid(cap.Predictive(PLAN), EXACT_HPA))
    assert provisioned == [1, 1, 1, 3, 3, 3, 3, 3, 3, 1, 1, 1]


def test_compare_policies_side_by_side_on_a_time_indexed_load() -> None:
    index = pd.date_range("2026-12-01", periods=6, freq="10min", tz="UTC")
    load = pd.Series(LOAD, index=index)
    plan = pd.Series(PLAN, index=index)
    comparison = cap.simulate_policies(
        load,
        [
            cap.StaticPeak(1.0, peak_load=300),
            EXACT_HPA,
            cap.Tiered(),
            cap.Predictive(plan),
            cap.Hybrid(cap.Predictive(plan), EXACT_HPA),
        ],
        capacity_per_replica=100.0,
        tick_s=300,
        cold_start_s=300,
    )
    table = comparison.table
    assert list(table.index) == ["static-peak", "reactive-hpa", "tiered", "predictive", "hybrid"]
    assert list(table.columns) == list(cap.KPI_COLUMNS)
    assert table.loc["predictive", "gpu_hours"] < table.loc["static-peak", "gpu_hours"]
    timeline = comparison.timelines["predictive"]
    assert timeline.index[0] == index[0] and len(timeline) == 12
    assert list(timeline.columns) == list(cap.TIMELINE_COLUMNS)


def test_linear_interpolation_ramps_between_samples() -> None:
    result = cap.simulate_policy(
        np.array([0.0, 100.0]),
        cap.StaticPeak(1.0, peak_load=100),
        capacity_per_replica=100.0,
        step_s=4,
        tick_s=1,
        interpolation="linear",
    )
    assert result.timeline["load"].tolist() == [0, 0, 12.5, 37.5, 62.5, 87.5, 100, 100]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tick_s": 7}, "must divide the load step"),
        ({"step_s": None}, "step_s is required"),
        ({"interpolation": "cubic"}, "interpolation must be"),
        ({"capacity_per_replica": 0}, "capacity_per_replica must be > 0"),
    ],
)
def test_simulator_rejects_bad_input(kwargs: dict, message: str) -> None:
    with pytest.raises(cap.InvalidParameterError, match=message):
        cap.simulate_policy(LOAD, EXACT_HPA, **(RUN | kwargs))


def test_duplicate_policy_names_are_rejected() -> None:
    with pytest.raises(cap.InvalidParameterError, match="unique"):
        cap.simulate_policies(LOAD, [EXACT_HPA, EXACT_HPA], **RUN)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: cap.ReactiveHPA(target_utilization=0), r"target_utilization must be in \(0, 1\]"),
        (lambda: cap.ReactiveHPA(scale_down_window_s=-1), "scale_down_window_s must be >= 0"),
        (lambda: cap.ReactiveHPA(max_scale_up_step=0), "max_scale_up_step must be >= 1"),
        (lambda: cap.Tiered(scale_up_at=0.99), "tiers must satisfy"),
        (lambda: cap.StaticPeak(utilization_target=2), "utilization_target"),
        (lambda: cap.Predictive(PLAN, lead_s=-5), "lead_s must be >= 0"),
    ],
)
def test_policies_validate_their_parameters(make, message: str) -> None:
    with pytest.raises(cap.InvalidParameterError, match=message):
        make()


def test_predictive_plan_must_cover_the_load() -> None:
    with pytest.raises(cap.InvalidParameterError, match="for every load sample"):
        cap.simulate_policy(LOAD, cap.Predictive(PLAN[:3]), **RUN)


def test_warning_tier_time_is_reported() -> None:
    result = cap.simulate_policy(
        np.array([80.0, 50.0]),
        cap.StaticPeak(replicas=1),
        capacity_per_replica=100.0,
        step_s=3600,
        tick_s=3600,
    )
    assert result.kpis["hours_above_75"] == 1.0
    assert result.kpis["hours_above_85"] == 0.0


def test_time_indexed_plan_must_cover_the_load_and_share_its_timezone() -> None:
    index = pd.date_range("2026-12-01", periods=6, freq="10min", tz="UTC")
    load = pd.Series(LOAD, index=index)
    options = {"capacity_per_replica": 100.0, "tick_s": 300, "cold_start_s": 300}
    short = cap.Predictive(pd.Series(PLAN[:4], index=index[:4]))
    with pytest.raises(cap.InvalidParameterError, match="plan covers"):
        cap.simulate_policy(load, short, **options)
    naive = cap.Predictive(pd.Series(PLAN, index=index.tz_localize(None)))
    with pytest.raises(cap.InvalidParameterError, match="timezone-aware"):
        cap.simulate_policy(load, naive, **options)


def test_static_peak_never_reads_the_replayed_load() -> None:
    with pytest.raises(cap.InvalidParameterError, match="peak of past load"):
        cap.StaticPeak(utilization_target=0.75)
    # Sized from the past peak (100/s), not from the replay's own peak of 300/s.
    _, provisioned, _ = _timeline(cap.StaticPeak(utilization_target=1.0, peak_load=100))
    assert provisioned == [1] * 12


def test_the_first_fleet_is_sized_from_the_load_before_the_replay() -> None:
    # The replay opens at 300/s but the hour before ran at 100/s: the HPA starts with one
    # replica and catches up one metric tick plus a cold start later.
    load = np.array([300.0, 300, 100, 100])
    _, provisioned, ready = _timeline(EXACT_HPA, load=load)
    assert provisioned[:3] == [1, 3, 3]
    assert ready[:3] == [1, 1, 3]
