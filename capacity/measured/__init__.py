"""Measured capacity: load-test tables (read from CSV, ``vllm bench serve``, genai-perf, guidellm,
inference-perf or genai-bench files,
checked row by row) and the SLO model fitted to them — the largest request rate one replica
sustains within p95 TTFT and TPOT limits at any prompt/completion mix
(:func:`fit_slo_model`, :func:`slo_capacity`), how far it moves with its binding limit, and
the hourly GPU plan sized at that capacity (:func:`plan_gpus_at_slo`).

Imports only the sizing family (the plan at the SLO goes through its conversion).
"""

from capacity.measured.loadtest import LOADTEST_COLUMNS, LoadTestTable, MeasuredKnee, measured_knee
from capacity.measured.loadtest_checks import (
    MAX_PLAUSIBLE_TPOT_S,
    MAX_PLAUSIBLE_TTFT_S,
    MIN_LATENCY_S,
)
from capacity.measured.loadtest_json import read_genai_perf_json, read_vllm_bench_json
from capacity.measured.loadtest_readers import (
    read_loadtest_csv,
    read_loadtest_csv_setups,
    read_loadtest_files,
)
from capacity.measured.production_hour import ProductionHour
from capacity.measured.slo import (
    SloCapacity,
    SloModel,
    SloTarget,
    fit_slo_model,
    slo_capacity,
    table_ceilings,
)
from capacity.measured.slo_fleet import expected_p95, with_production
from capacity.measured.slo_plan import (
    SLO_PLAN_COLUMNS,
    plan_gpus_at_slo,
    sized_tokens_per_s_per_gpu,
    slo_capacity_by_hour,
    slo_plan_notes,
)
from capacity.measured.slo_sensitivity import SloSensitivity, limit_sensitivity

__all__ = [
    "LOADTEST_COLUMNS",
    "MAX_PLAUSIBLE_TPOT_S",
    "MAX_PLAUSIBLE_TTFT_S",
    "MIN_LATENCY_S",
    "SLO_PLAN_COLUMNS",
    "LoadTestTable",
    "MeasuredKnee",
    "ProductionHour",
    "SloCapacity",
    "SloModel",
    "SloSensitivity",
    "SloTarget",
    "expected_p95",
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
    "slo_plan_notes",
    "sized_tokens_per_s_per_gpu",
    "table_ceilings",
    "with_production",
]
