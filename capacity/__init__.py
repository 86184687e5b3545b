"""gpucast.capacity — pure capacity-planning library (no web, database or settings code).

From an hourly load forecast to GPUs, cost and a scaling schedule: the core conversion
(:func:`plan_gpus`) with peak factors (:func:`peak_factors`) and the schedule a fleet follows
(:func:`execute_schedule`), first-principles sizing (:func:`estimate`), cost
(:func:`plan_cost`), the plan replay (:func:`replay`), scaling-policy simulation
(:func:`simulate_policies`), Erlang C queueing, utilization tiers, a KEDA ScaledObject
(:func:`keda_scaled_object`) and the packing of shared pools' replicas onto nodes
(:func:`pack`, :func:`repack`) with the pool plan built on it (:func:`plan_pool`: priority
grants and rate limits under a quota, pooled reservations), and measured profiles: load-test
tables read from CSV, ``vllm bench serve`` or genai-perf files (:func:`read_loadtest_files`)
and the SLO capacity at any prompt/completion mix (:func:`fit_slo_model`,
:func:`slo_capacity`). Errors derive from :class:`CapacityError`.
"""

from capacity import kubernetes, measured, pools, sizing
from capacity.errors import (
    CapacityError,
    DoesNotFitError,
    InvalidParameterError,
    LoadTestFormatError,
    SLOUnreachableError,
    SloUnreachableError,
    UnknownNameError,
    UnstableQueueError,
)
from capacity.kubernetes import *  # noqa: F403
from capacity.measured import *  # noqa: F403
from capacity.policies import Hybrid, Policy, Predictive, ReactiveHPA, StaticPeak, Tiered
from capacity.pools import *  # noqa: F403
from capacity.replay import (
    REPLAY_KPIS,
    SLO_KPI,
    Fleet,
    InstantBound,
    PlanDecision,
    PlanPolicy,
    ReactivePolicy,
    ReactiveSpec,
    ReplayResult,
    replay,
)
from capacity.simulation import (
    KPI_COLUMNS,
    TIMELINE_COLUMNS,
    PolicyComparison,
    SimulationResult,
    simulate_policies,
    simulate_policy,
)
from capacity.sizing import *  # noqa: F403

__all__ = [
    *kubernetes.__all__,
    *pools.__all__,
    *measured.__all__,
    *sizing.__all__,
    "LoadTestFormatError",
    "SloUnreachableError",
    "REPLAY_KPIS",
    "SLO_KPI",
    "Fleet",
    "PlanDecision",
    "PlanPolicy",
    "InstantBound",
    "ReactivePolicy",
    "ReactiveSpec",
    "ReplayResult",
    "replay",
    "KPI_COLUMNS",
    "TIMELINE_COLUMNS",
    "Hybrid",
    "Policy",
    "PolicyComparison",
    "Predictive",
    "ReactiveHPA",
    "SimulationResult",
    "StaticPeak",
    "Tiered",
    "CapacityError",
    "DoesNotFitError",
    "InvalidParameterError",
    "SLOUnreachableError",
    "UnknownNameError",
    "UnstableQueueError",
    "simulate_policies",
    "simulate_policy",
]
