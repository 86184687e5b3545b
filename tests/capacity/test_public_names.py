"""capacity's public face stays stable: every name ``from capacity import X`` gave before the
library was cut into families (sizing, measured, pools, kubernetes, simulation) still imports
from ``capacity``, and is the very object its family exports."""

from __future__ import annotations

import importlib

import pytest

import capacity

#: Every name of ``capacity.__all__`` when the families were cut, by the module that now
#: exports it (a family sub-package, or the root's ``errors``). Names may be added; none may go.
PUBLIC_NAMES: dict[str, tuple[str, ...]] = {
    "capacity.errors": (
        "CapacityError",
        "DoesNotFitError",
        "InvalidParameterError",
        "LoadTestFormatError",
        "SLOUnreachableError",
        "SloUnreachableError",
        "UnknownNameError",
        "UnstableQueueError",
    ),
    "capacity.sizing": (
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
        "gpus_for_load",
        "in_flight_requests",
        "kv_cache_bytes_per_token",
        "littles_law_qps",
        "long_range_peak_qps",
        "lowest_cost_reserved",
        "min_servers_for_latency",
        "min_tensor_parallel",
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
        "wait_quantile_s",
        "weights_gb",
        "with_headroom",
    ),
    "capacity.measured": (
        "LOADTEST_COLUMNS",
        "SLO_PLAN_COLUMNS",
        "LoadTestTable",
        "MeasuredKnee",
        "SloCapacity",
        "SloModel",
        "SloSensitivity",
        "SloTarget",
        "fit_slo_model",
        "limit_sensitivity",
        "measured_knee",
        "plan_gpus_at_slo",
        "read_genai_perf_json",
        "read_loadtest_csv",
        "read_loadtest_csv_setups",
        "read_loadtest_files",
        "read_vllm_bench_json",
        "slo_capacity",
        "slo_capacity_by_hour",
    ),
    "capacity.pools": (
        "EXACT_MAX_REPLICAS",
        "PACK_METHODS",
        "PRIORITY_CLASSES",
        "MemberReservation",
        "Migration",
        "Move",
        "Placement",
        "PoolMember",
        "PoolPlan",
        "PoolSpec",
        "Reservations",
        "Transition",
        "exact_pack",
        "ffd_node_count",
        "first_fit_decreasing",
        "grant_by_priority",
        "naive_first_fit",
        "pack",
        "plan_pool",
        "repack",
    ),
    "capacity.kubernetes": (
        "KEDA_HPA_PREFIX",
        "KEDA_MODES",
        "KUBERNETES_TOLERANCE",
        "ReactiveTrigger",
        "ScalingBehavior",
        "hpa_average_value_replicas",
        "hpa_desired_replicas",
        "hpa_follow",
        "keda_hpa_name",
        "keda_scaled_object",
    ),
    "capacity.simulation": (
        "KPI_COLUMNS",
        "REPLAY_KPIS",
        "SLO_KPI",
        "TIMELINE_COLUMNS",
        "Fleet",
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
        "replay",
        "simulate_policies",
        "simulate_policy",
    ),
}
PINNED = [(home, name) for home, names in PUBLIC_NAMES.items() for name in names]


def test_the_pinned_names_are_the_public_face() -> None:
    pinned = [name for _, name in PINNED]
    assert len(pinned) == len(set(pinned)) == 138
    assert set(pinned) <= set(capacity.__all__)
    assert len(capacity.__all__) == len(set(capacity.__all__))


@pytest.mark.parametrize(("home", "name"), PINNED)
def test_each_name_imports_from_capacity_as_its_familys_object(home: str, name: str) -> None:
    family = importlib.import_module(home)
    assert name in family.__all__
    assert getattr(capacity, name) is getattr(family, name)


def test_every_family_export_is_on_the_face() -> None:
    for home in PUBLIC_NAMES:
        family = importlib.import_module(home)
        missing = set(family.__all__) - set(capacity.__all__)
        assert not missing, f"{home} exports {sorted(missing)} that capacity does not"
