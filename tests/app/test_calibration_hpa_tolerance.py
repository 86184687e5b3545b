"""Band auto calibrated for the HPA tolerance the cluster really holds on the plan trigger."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import capacity
from app.plans import PlanParams
from app.plans.calibration import HEADROOMS, HeadroomReplay

START = pd.Timestamp("2026-03-02T00:00Z")
HOURS = 48
# tokens/s by hour, repeating: the plan steps by one replica above 10 (100 tokens/s per GPU)
PATTERN = (2000.0, 2100.0, 2200.0, 2300.0, 2200.0, 2100.0)


def _hourly_load() -> list[float]:
    return [PATTERN[h % len(PATTERN)] for h in range(HOURS + 24)]


def _decisions(headroom: float) -> list[capacity.PlanDecision]:
    """A perfect hourly forecast of the load, times the headroom, at 100 tokens/s per GPU."""
    hourly = _hourly_load()
    return [
        capacity.PlanDecision(
            at=START + pd.Timedelta(hours=h),
            start=START + pd.Timedelta(hours=h),
            gpus=np.array([math.ceil(v * headroom / 100 - 1e-9) for v in hourly[h : h + 24]]),
        )
        for h in range(HOURS)
    ]


def _replay(tolerance: float) -> HeadroomReplay:
    minutes = pd.date_range(START, periods=HOURS * 60, freq="min")
    load = pd.Series(np.repeat(_hourly_load()[:HOURS], 60), index=minutes)
    fleet = capacity.Fleet(
        per_gpu_tokens_per_s=100.0,
        rules=capacity.ScheduleRules(cold_start_s=0, scale_down_hold_s=0),
        hpa_tolerance=tolerance,
    )
    return HeadroomReplay(
        _decisions, load, fleet=fleet, start=START, end=START + pd.Timedelta(hours=HOURS)
    )


def test_a_cluster_holding_ten_percent_gets_a_larger_headroom() -> None:
    exact_choice, held_choice = _replay(0.0).choose(0.01), _replay(0.1).choose(0.01)
    assert exact_choice.met and held_choice.met
    exact, held = exact_choice.headroom, held_choice.headroom
    assert exact is not None and held is not None
    # with tolerance 0 the perfect forecast itself is enough (the smallest headroom that
    # still rounds each hour up to its load); with 10 % the fleet ignores the steps by one,
    # so the margin must cover what the HPA does not follow
    assert exact == min(
        h for h in HEADROOMS if all(math.ceil(v * h / 100 - 1e-9) * 100 >= v for v in PATTERN)
    )
    assert held > exact
    assert _replay(0.1).row(exact)["time_over_capacity_share"] > 0.01
    assert held_choice.gpu_hours is not None and exact_choice.gpu_hours is not None
    assert held_choice.gpu_hours > exact_choice.gpu_hours


@pytest.mark.parametrize(
    ("setting", "held"),
    [(0.0, 0.0), (0.1, 0.1), (0.05, 0.05), (None, capacity.KUBERNETES_TOLERANCE)],
)
def test_the_plan_setting_is_the_fleets_tolerance(setting: float | None, held: float) -> None:
    params = PlanParams(hpa_tolerance=setting)
    fleet = params.fleet(tokens_per_s_per_gpu=100.0, gpus_per_replica=2)
    assert fleet.hpa_tolerance == held and fleet.gpus_per_replica == 2
    assert fleet.rules == params.rules()
    # the default keeps the calibration keys kept before the setting existed
    assert ("hpa_tolerance" in params.calibration_key()) is (setting != 0)
