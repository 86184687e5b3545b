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

from capacity import sizing
from capacity.allocation import PRIORITY_CLASSES, grant_by_priority
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
from capacity.exact_packing import EXACT_MAX_REPLICAS, PACK_METHODS, exact_pack, pack
from capacity.hpa import (
    KUBERNETES_TOLERANCE,
    hpa_average_value_replicas,
    hpa_desired_replicas,
    hpa_follow,
)
from capacity.keda import KEDA_MODES, ReactiveTrigger, ScalingBehavior, keda_scaled_object
from capacity.loadtest import (
    LOADTEST_COLUMNS,
    LoadTestTable,
    MeasuredKnee,
    measured_knee,
)
from capacity.loadtest_readers import (
    read_genai_perf_json,
    read_loadtest_csv,
    read_loadtest_csv_setups,
    read_loadtest_files,
    read_vllm_bench_json,
)
from capacity.packing import Placement, ffd_node_count, first_fit_decreasing, naive_first_fit
from capacity.policies import Hybrid, Policy, Predictive, ReactiveHPA, StaticPeak, Tiered
from capacity.pools import (
    MemberReservation,
    PoolMember,
    PoolPlan,
    PoolSpec,
    Reservations,
    plan_pool,
)
from capacity.repacking import Migration, Move, Transition, repack
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
from capacity.slo import SloCapacity, SloModel, SloTarget, fit_slo_model, slo_capacity
from capacity.slo_plan import SLO_PLAN_COLUMNS, plan_gpus_at_slo, slo_capacity_by_hour
from capacity.slo_sensitivity import SloSensitivity, limit_sensitivity

__all__ = [
    *sizing.__all__,
    "SLO_PLAN_COLUMNS",
    "plan_gpus_at_slo",
    "slo_capacity_by_hour",
    "LOADTEST_COLUMNS",
    "LoadTestFormatError",
    "LoadTestTable",
    "MeasuredKnee",
    "SloCapacity",
    "SloModel",
    "SloSensitivity",
    "SloTarget",
    "SloUnreachableError",
    "fit_slo_model",
    "limit_sensitivity",
    "measured_knee",
    "read_genai_perf_json",
    "read_loadtest_csv",
    "read_loadtest_csv_setups",
    "read_loadtest_files",
    "read_vllm_bench_json",
    "slo_capacity",
    "MemberReservation",
    "PoolMember",
    "PoolPlan",
    "PoolSpec",
    "PRIORITY_CLASSES",
    "Reservations",
    "grant_by_priority",
    "plan_pool",
    "KEDA_MODES",
    "REPLAY_KPIS",
    "SLO_KPI",
    "Fleet",
    "PlanDecision",
    "PlanPolicy",
    "InstantBound",
    "ReactivePolicy",
    "ReactiveSpec",
    "ReactiveTrigger",
    "ReplayResult",
    "replay",
    "KPI_COLUMNS",
    "KUBERNETES_TOLERANCE",
    "TIMELINE_COLUMNS",
    "Hybrid",
    "Policy",
    "PolicyComparison",
    "Predictive",
    "ReactiveHPA",
    "SimulationResult",
    "StaticPeak",
    "Tiered",
    "EXACT_MAX_REPLICAS",
    "PACK_METHODS",
    "CapacityError",
    "DoesNotFitError",
    "InvalidParameterError",
    "Migration",
    "Move",
    "Placement",
    "SLOUnreachableError",
    "ScalingBehavior",
    "Transition",
    "UnknownNameError",
    "UnstableQueueError",
    "exact_pack",
    "ffd_node_count",
    "first_fit_decreasing",
    "hpa_average_value_replicas",
    "hpa_desired_replicas",
    "hpa_follow",
    "keda_scaled_object",
    "naive_first_fit",
    "pack",
    "repack",
    "simulate_policies",
    "simulate_policy",
]
