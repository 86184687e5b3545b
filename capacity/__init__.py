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

from capacity.allocation import PRIORITY_CLASSES, grant_by_priority
from capacity.catalog import (
    BYTES_PER_PARAMETER,
    GPUS,
    MODELS,
    GPUSpec,
    ModelSpec,
    bytes_per_parameter,
    get_gpu,
    get_model,
)
from capacity.conversion import (
    PLAN_BANDS,
    PLAN_COLUMNS,
    GPUPlan,
    gpus_for_load,
    plan_gpus,
    tokens_per_request_from_history,
)
from capacity.cost import (
    HOURS_PER_MONTH,
    RESERVED_RULES,
    PlanCost,
    Prices,
    break_even_reserved_gpus,
    lowest_cost_reserved,
    monthly_cost_usd,
    plan_cost,
    purchase_mix,
    timeline_cost_usd,
)
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
from capacity.memory import (
    MemoryFit,
    fit_at,
    kv_cache_bytes_per_token,
    min_tensor_parallel,
    naive_kv_cache_bytes_per_token,
    weights_gb,
)
from capacity.packing import Placement, ffd_node_count, first_fit_decreasing, naive_first_fit
from capacity.peaks import PeakFactors, peak_factors, peak_factors_from_load
from capacity.policies import Hybrid, Policy, Predictive, ReactiveHPA, StaticPeak, Tiered
from capacity.pools import (
    MemberReservation,
    PoolMember,
    PoolPlan,
    PoolSpec,
    Reservations,
    plan_pool,
)
from capacity.queueing import (
    ErlangC,
    erlang_c,
    min_servers_for_latency,
    response_quantile_s,
    wait_quantile_s,
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
from capacity.rounding import round_up_count
from capacity.schedule import (
    Schedule,
    ScheduleRules,
    desired_gpus,
    execute_schedule,
    fleet_timeline,
    planned_level,
)
from capacity.simulation import (
    KPI_COLUMNS,
    TIMELINE_COLUMNS,
    PolicyComparison,
    SimulationResult,
    simulate_policies,
    simulate_policy,
)
from capacity.sizing import (
    SizingEstimate,
    estimate,
    long_range_peak_qps,
    replicas_for_qps,
    with_headroom,
)
from capacity.slo import SloCapacity, SloModel, SloTarget, fit_slo_model, slo_capacity
from capacity.slo_plan import SLO_PLAN_COLUMNS, plan_gpus_at_slo, slo_capacity_by_hour
from capacity.slo_sensitivity import SloSensitivity, limit_sensitivity
from capacity.throughput import (
    Knee,
    in_flight_requests,
    littles_law_qps,
    requests_per_s,
    slo_knee,
    theoretical_tokens_per_s,
)
from capacity.utilization import UtilizationTier, utilization, utilization_tier

__all__ = [
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
    "RESERVED_RULES",
    "Fleet",
    "PeakFactors",
    "PlanDecision",
    "PlanPolicy",
    "InstantBound",
    "ReactivePolicy",
    "ReactiveSpec",
    "ReactiveTrigger",
    "ReplayResult",
    "Schedule",
    "ScheduleRules",
    "break_even_reserved_gpus",
    "desired_gpus",
    "execute_schedule",
    "fleet_timeline",
    "peak_factors",
    "peak_factors_from_load",
    "planned_level",
    "replay",
    "timeline_cost_usd",
    "BYTES_PER_PARAMETER",
    "GPUS",
    "HOURS_PER_MONTH",
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
    "MODELS",
    "PACK_METHODS",
    "PLAN_BANDS",
    "PLAN_COLUMNS",
    "CapacityError",
    "DoesNotFitError",
    "ErlangC",
    "GPUPlan",
    "GPUSpec",
    "InvalidParameterError",
    "Knee",
    "MemoryFit",
    "Migration",
    "ModelSpec",
    "Move",
    "Placement",
    "PlanCost",
    "Prices",
    "SLOUnreachableError",
    "ScalingBehavior",
    "SizingEstimate",
    "Transition",
    "UnknownNameError",
    "UnstableQueueError",
    "UtilizationTier",
    "bytes_per_parameter",
    "erlang_c",
    "estimate",
    "exact_pack",
    "fit_at",
    "ffd_node_count",
    "first_fit_decreasing",
    "get_gpu",
    "get_model",
    "gpus_for_load",
    "hpa_average_value_replicas",
    "hpa_desired_replicas",
    "hpa_follow",
    "in_flight_requests",
    "keda_scaled_object",
    "kv_cache_bytes_per_token",
    "littles_law_qps",
    "long_range_peak_qps",
    "lowest_cost_reserved",
    "min_servers_for_latency",
    "min_tensor_parallel",
    "monthly_cost_usd",
    "naive_first_fit",
    "naive_kv_cache_bytes_per_token",
    "pack",
    "plan_cost",
    "purchase_mix",
    "plan_gpus",
    "repack",
    "replicas_for_qps",
    "requests_per_s",
    "response_quantile_s",
    "round_up_count",
    "simulate_policies",
    "simulate_policy",
    "slo_knee",
    "theoretical_tokens_per_s",
    "tokens_per_request_from_history",
    "utilization",
    "utilization_tier",
    "wait_quantile_s",
    "weights_gb",
    "with_headroom",
]
