"""Catalog lookups, memory fit, throughput, SLO knee and the full estimate."""

from __future__ import annotations

import pandas as pd
import pytest

import capacity as cap


def test_catalogs_hold_the_required_entries() -> None:
    assert {"a100-80g", "h100-80g", "h200-141g", "l40s-48g", "l4-24g"} <= set(cap.GPUS)
    assert {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"} <= set(cap.MODELS)
    assert len(cap.MODELS) >= 5
    assert cap.get_gpu("H100-80G") is cap.GPUS["h100-80g"]


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(
        cap.UnknownNameError, match="unknown GPU 'b300'; known: a100-40g, a100-80g, b200-180g"
    ) as info:
        cap.get_gpu("b300")
    assert isinstance(info.value, LookupError)
    with pytest.raises(cap.UnknownNameError, match="unknown precision 'fp6'"):
        cap.weights_gb(1e9, "fp6")


@pytest.mark.parametrize(("precision", "gb"), [("bf16", 140), ("fp8", 70), ("int4", 35)])
def test_weights_by_precision(precision: str, gb: float) -> None:
    assert cap.weights_gb(70e9, precision) == pytest.approx(gb)


def test_more_concurrency_needs_more_tensor_parallelism() -> None:
    model = cap.MODELS["llama-3.1-70b"]
    small = cap.min_tensor_parallel(model, "h100-80g", context_tokens=4096, concurrency=1)
    large = cap.min_tensor_parallel(model, "h100-80g", context_tokens=8192, concurrency=48)
    assert (small.tensor_parallel, large.tensor_parallel) == (2, 4)
    assert large.max_concurrency >= 48
    assert large.used_gb <= large.capacity_gb


def test_405b_bf16_does_not_fit_on_l4() -> None:
    with pytest.raises(cap.DoesNotFitError, match="does not fit even at TP=8"):
        cap.min_tensor_parallel("llama-3.1-405b", "l4-24g")


def test_kv_heads_replicate_beyond_their_count() -> None:
    # qwen2.5-7b has 4 KV heads: at TP=8 each head lives on two GPUs, doubling total KV.
    fit4 = cap.fit_at(
        "qwen2.5-7b", "l4-24g", tensor_parallel=4, context_tokens=1000, concurrency=10
    )
    fit8 = cap.fit_at(
        "qwen2.5-7b", "l4-24g", tensor_parallel=8, context_tokens=1000, concurrency=10
    )
    assert fit8.kv_cache_gb == pytest.approx(2 * fit4.kv_cache_gb)


def test_moe_compute_uses_active_parameters() -> None:
    mixtral = cap.MODELS["mixtral-8x7b"]
    assert mixtral.compute_parameters == 12.9e9
    assert cap.MODELS["llama-3.1-8b"].compute_parameters == 8.03e9


def test_slo_knee_picks_the_best_row_that_meets_both_limits() -> None:
    table = pd.DataFrame(
        {
            "concurrency": [1, 8, 16, 32, 64],
            "throughput": [0.3, 1.2, 1.9, 2.6, 3.0],
            "p95_ttft_s": [0.2, 0.4, 0.7, 1.4, 3.0],
            "p95_tpot_s": [0.02, 0.03, 0.045, 0.06, 0.09],
        }
    )
    knee = cap.slo_knee(table, max_p95_ttft_s=1.0, max_p95_tpot_s=0.05)
    assert (knee.concurrency, knee.throughput) == (16, 1.9)
    with pytest.raises(cap.SLOUnreachableError, match="no load-test row meets"):
        cap.slo_knee(table, max_p95_ttft_s=0.1, max_p95_tpot_s=0.05)


def test_estimate_takes_the_largest_bound_and_multiplies_by_tp() -> None:
    result = cap.estimate("llama-3.1-70b", "h100-80g", qps=10, slo_latency_s=20, concurrency=32)
    assert result.tensor_parallel == 4
    assert result.replicas_slo_bound == 7  # 10 / (32 / 20) = 6.25
    assert result.binding == "slo"
    assert result.replicas == 10  # 7 x 1.3 = 9.1
    assert result.gpus == 40
    assert result.usd_per_hour == pytest.approx(40 * 2.5)
    assert result.usd_per_month == pytest.approx(40 * 2.5 * 720)


def test_estimate_with_a_measured_knee_reproduces_the_12_replica_example() -> None:
    result = cap.estimate(
        "llama-3.1-8b", "l4-24g", qps=10, slo_latency_s=2, measured_replica_qps=1.2
    )
    assert result.replicas_slo_bound == 9
    assert result.replicas == 12


def test_estimate_is_compute_bound_for_long_requests_on_small_gpus() -> None:
    result = cap.estimate(
        "llama-3.1-8b", "l4-24g", qps=50, slo_latency_s=2, concurrency=8, context_tokens=2048
    )
    assert result.binding == "compute"
    assert result.replicas_compute_bound > result.replicas_slo_bound


def test_estimate_rejects_contexts_beyond_the_model_and_bad_knees() -> None:
    with pytest.raises(cap.InvalidParameterError, match="maximum context of 32768"):
        cap.estimate("qwen2.5-7b", "l4-24g", qps=1, slo_latency_s=1, context_tokens=65536)
    with pytest.raises(cap.InvalidParameterError, match="measured_replica_qps must be > 0"):
        cap.estimate("qwen2.5-7b", "l4-24g", qps=1, slo_latency_s=1, measured_replica_qps=0)
