"""Sizing from first principles and the core conversion: model and GPU catalogs, memory
(weights, KV cache, tensor-parallel degree), throughput (FLOPs, Little's law, SLO knees),
Erlang C queueing, peak factors, utilization tiers, the conversion of an hourly load forecast
into GPUs (:func:`plan_gpus`) with the schedule a fleet follows (:func:`execute_schedule`),
the one place counts are rounded up, and cost (on-demand, reserved, spot).

Every other family builds on this one; it imports none of them.
"""

from capacity.sizing.catalog import (
    BYTES_PER_PARAMETER,
    GPUS,
    MODELS,
    GPUSpec,
    ModelSpec,
    bytes_per_parameter,
    get_gpu,
    get_model,
)
from capacity.sizing.ceilings import ServingCeilings, gpu_by_name, model_by_name, validated_tokens
from capacity.sizing.conversion import (
    PLAN_BANDS,
    PLAN_COLUMNS,
    GPUPlan,
    gpus_for_load,
    plan_gpus,
    tokens_per_request_from_history,
)
from capacity.sizing.cost import (
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
from capacity.sizing.first_principles import (
    SizingEstimate,
    estimate,
    long_range_peak_qps,
    replicas_for_qps,
    with_headroom,
)
from capacity.sizing.memory import (
    MemoryFit,
    fit_at,
    kv_cache_bytes_per_token,
    min_tensor_parallel,
    naive_kv_cache_bytes_per_token,
    weights_gb,
)
from capacity.sizing.peaks import PeakFactors, peak_factors, peak_factors_from_load
from capacity.sizing.queueing import (
    ErlangC,
    erlang_c,
    min_servers_for_latency,
    response_quantile_s,
    wait_quantile_s,
)
from capacity.sizing.rounding import round_up_count
from capacity.sizing.schedule import (
    Schedule,
    ScheduleRules,
    desired_gpus,
    execute_schedule,
    fleet_timeline,
    planned_level,
)
from capacity.sizing.throughput import (
    Knee,
    in_flight_requests,
    littles_law_qps,
    requests_per_s,
    slo_knee,
    theoretical_tokens_per_s,
)
from capacity.sizing.utilization import UtilizationTier, utilization, utilization_tier

__all__ = [
    "BYTES_PER_PARAMETER",
    "GPUS",
    "HOURS_PER_MONTH",
    "MODELS",
    "PLAN_BANDS",
    "PLAN_COLUMNS",
    "RESERVED_RULES",
    "ErlangC",
    "GPUPlan",
    "GPUSpec",
    "Knee",
    "MemoryFit",
    "ModelSpec",
    "PeakFactors",
    "PlanCost",
    "Prices",
    "Schedule",
    "ScheduleRules",
    "ServingCeilings",
    "SizingEstimate",
    "UtilizationTier",
    "break_even_reserved_gpus",
    "bytes_per_parameter",
    "desired_gpus",
    "erlang_c",
    "estimate",
    "execute_schedule",
    "fit_at",
    "fleet_timeline",
    "get_gpu",
    "get_model",
    "gpu_by_name",
    "gpus_for_load",
    "in_flight_requests",
    "kv_cache_bytes_per_token",
    "littles_law_qps",
    "long_range_peak_qps",
    "lowest_cost_reserved",
    "min_servers_for_latency",
    "min_tensor_parallel",
    "model_by_name",
    "monthly_cost_usd",
    "naive_kv_cache_bytes_per_token",
    "peak_factors",
    "peak_factors_from_load",
    "plan_cost",
    "plan_gpus",
    "planned_level",
    "purchase_mix",
    "replicas_for_qps",
    "requests_per_s",
    "response_quantile_s",
    "round_up_count",
    "slo_knee",
    "theoretical_tokens_per_s",
    "timeline_cost_usd",
    "tokens_per_request_from_history",
    "utilization",
    "utilization_tier",
    "validated_tokens",
    "wait_quantile_s",
    "weights_gb",
    "with_headroom",
]
