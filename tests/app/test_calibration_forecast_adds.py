"""Band auto's choice says what the plan's floor adds to the reactive trigger alone: the HPA
at the same target, replayed on the same fleet and days."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import capacity
from app.plans.calibration import BandChoice, HeadroomReplay

START = pd.Timestamp("2026-03-02T00:00Z")
HOURS = 48
# tokens/s by hour, repeating: quiet and busy hours (100 tokens/s per GPU)
PATTERN = (600.0, 600.0, 2400.0, 2400.0, 600.0, 1200.0)
SPEC = capacity.ReactiveSpec(target_utilization=0.75, tolerance=0.0)
FLEET = capacity.Fleet(
    per_gpu_tokens_per_s=100.0,
    rules=capacity.ScheduleRules(cold_start_s=600, scale_down_hold_s=1200),
)


def _hourly() -> list[float]:
    return [PATTERN[h % len(PATTERN)] for h in range(HOURS + 24)]


def _decisions(headroom: float) -> list[capacity.PlanDecision]:
    """A perfect hourly forecast times the headroom, sized at 0.75 (whole GPUs)."""
    hourly = _hourly()
    return [
        capacity.PlanDecision(
            at=START + pd.Timedelta(hours=h),
            start=START + pd.Timedelta(hours=h),
            gpus=np.maximum(np.ceil(np.array(hourly[h : h + 24]) * headroom / 75 - 1e-9), 1),
        )
        for h in range(HOURS)
    ]


def _load() -> pd.Series:
    minutes = pd.date_range(START, periods=HOURS * 60, freq="min")
    return pd.Series(np.repeat(_hourly()[:HOURS], 60), index=minutes)


def _replay(backstop: capacity.ReactiveSpec | None) -> HeadroomReplay:
    return HeadroomReplay(
        _decisions,
        _load(),
        fleet=FLEET,
        start=START + pd.Timedelta(hours=1),
        end=START + pd.Timedelta(hours=HOURS),
        backstop=backstop,
    )


def test_the_choice_carries_the_reactive_trigger_alone_on_the_same_days() -> None:
    replay = _replay(SPEC)
    choice = replay.choose(0.01)
    # the deployment with its floor at the minimum (1 GPU): only the reactive trigger lifts it
    floorless = [
        capacity.PlanDecision(at=d.at, start=d.start, gpus=np.ones(len(d.gpus)))
        for d in _decisions(1.0)
    ]
    alone = capacity.replay(
        _load(),
        [capacity.PlanPolicy("hpa", tuple(floorless), reactive=SPEC)],
        fleet=FLEET,
        start=replay.start,
        end=replay.end,
        initial_tokens_per_s=600.0,
    ).table.loc["hpa"]
    assert choice.reactive_alone == {
        "gpu_hours": pytest.approx(float(alone["gpu_hours"])),
        "time_over_capacity_share": pytest.approx(float(alone["time_over_capacity_share"])),
    }
    # the HPA alone pays a cold start at every busy hour; the floor orders it ahead
    assert choice.reactive_alone["time_over_capacity_share"] > choice.risk
    assert choice.gpu_hours is not None
    added = choice.gpu_hours - float(alone["gpu_hours"])
    text = choice.forecast_adds()
    assert text is not None
    assert text.startswith(f"{added:+,.0f} GPU-h ({added / float(alone['gpu_hours']):+.1%})")
    assert text.endswith(
        f"moves time over capacity from {choice.reactive_alone['time_over_capacity_share']:.2%}"
        f" to {choice.risk:.2%}"
    )
    # stored and read back, the choice says the same
    assert BandChoice.from_dict(choice.as_dict()).forecast_adds() == text


def test_without_a_reactive_trigger_nothing_is_added_to() -> None:
    choice = _replay(None).choose(0.01)
    assert choice.reactive_alone is None and choice.forecast_adds() is None
    assert BandChoice.from_dict(choice.as_dict()).forecast_adds() is None
