"""The simulators: the plan replay (:func:`replay`) runs the actual load against the capacity
each policy would have provided — plan decisions made before they apply, the reactive HPA
alone, the instant bound — on one fleet (HPA, cold start, scale-down hold) and scores each
(GPU-hours, cost, time and requests over capacity, over the SLO); the policy simulator
(:func:`simulate_policies`) runs the five scaling policies of ``policies`` (static peak,
reactive HPA, tiers, predictive, hybrid) over an hourly load.

Imports the sizing family (schedule, cost, rounding) and the Kubernetes family (the HPA's
replica rule).
"""

from capacity.simulation.expected import (
    ExpectedFleet,
    FleetRatios,
    expected_fleet,
    fleet_ratios,
    hourly_fleet,
    ratio_note,
    recent_and_window_ratios,
)
from capacity.simulation.fleet import Fleet
from capacity.simulation.policies import Hybrid, Policy, Predictive, ReactiveHPA, StaticPeak, Tiered
from capacity.simulation.policy_sim import (
    KPI_COLUMNS,
    TIMELINE_COLUMNS,
    PolicyComparison,
    SimulationResult,
    simulate_policies,
    simulate_policy,
)
from capacity.simulation.replay import ReplayResult, replay
from capacity.simulation.replay_kpis import REPLAY_KPIS, SLO_KPI
from capacity.simulation.replay_policies import (
    InstantBound,
    PlanDecision,
    PlanPolicy,
    ReactivePolicy,
    ReactiveSpec,
)

__all__ = [
    "KPI_COLUMNS",
    "REPLAY_KPIS",
    "SLO_KPI",
    "TIMELINE_COLUMNS",
    "ExpectedFleet",
    "Fleet",
    "FleetRatios",
    "Hybrid",
    "InstantBound",
    "PlanDecision",
    "PlanPolicy",
    "Policy",
    "PolicyComparison",
    "Predictive",
    "ReactiveHPA",
    "ReactivePolicy",
    "ReactiveSpec",
    "ReplayResult",
    "SimulationResult",
    "StaticPeak",
    "Tiered",
    "expected_fleet",
    "fleet_ratios",
    "hourly_fleet",
    "ratio_note",
    "recent_and_window_ratios",
    "replay",
    "simulate_policies",
    "simulate_policy",
]
