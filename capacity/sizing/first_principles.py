"""First-principles sizing: long-range peak, replica counts, and the five-step estimate."""

from __future__ import annotations

from dataclasses import dataclass

from capacity._checks import require_finite, require_non_negative, require_positive
from capacity.errors import InvalidParameterError
from capacity.sizing.catalog import GPUSpec, ModelSpec, get_gpu, get_model
from capacity.sizing.cost import HOURS_PER_MONTH
from capacity.sizing.memory import min_tensor_parallel
from capacity.sizing.rounding import round_up_count
from capacity.sizing.throughput import (
    in_flight_requests,
    littles_law_qps,
    requests_per_s,
    theoretical_tokens_per_s,
)


def long_range_peak_qps(
    avg_qps: float, *, growth_rate: float, periods: float, spike_factor: float = 1.0
) -> float:
    """Planned peak: Q_peak = Q_avg x (1 + growth_rate)^periods x spike_factor.

    growth_rate is per period (e.g. 0.08 per month for 6 months); spike_factor is the ratio
    of the busiest moment to the average.
    """
    require_non_negative("avg_qps", avg_qps)
    require_non_negative("periods", periods)
    if require_finite("growth_rate", growth_rate) <= -1:
        raise InvalidParameterError(f"growth_rate must be > -1, got {growth_rate!r}")
    return avg_qps * (1.0 + growth_rate) ** periods * require_positive("spike_factor", spike_factor)


def replicas_for_qps(
    qps: float, replica_qps: float, *, redundancy: float = 0.3, growth: float = 1.0
) -> int:
    """Replicas for a QPS: ceil(ceil(qps / replica_qps) x (1 + redundancy) x growth).

    The bare fleet is first rounded to whole replicas (you cannot run 8.3 replicas), then the
    redundancy and growth headroom is added to that fleet and rounded up again.
    """
    qps = require_non_negative("qps", qps)
    base = round_up_count(qps / require_positive("replica_qps", replica_qps))
    return with_headroom(base, redundancy=redundancy, growth=growth)


def with_headroom(replicas: int, *, redundancy: float = 0.3, growth: float = 1.0) -> int:
    """Whole replicas after headroom: ceil(replicas x (1 + redundancy) x growth)."""
    factor = (1.0 + require_non_negative("redundancy", redundancy)) * require_positive(
        "growth", growth
    )
    return round_up_count(replicas * factor)


@dataclass(frozen=True)
class SizingEstimate:
    """Result of :func:`estimate`. Replica bounds are whole replicas before headroom.

    replicas = max(memory, compute, SLO bound) x (1 + redundancy) x growth, rounded up;
    gpus = replicas x tensor_parallel; binding names the bound that decided.
    """

    model: str
    gpu: str
    precision: str
    tensor_parallel: int
    weights_gb: float
    kv_cache_gb: float
    max_concurrency_per_replica: int
    tokens_per_s_per_gpu: float
    replica_qps_compute: float
    replica_qps_slo: float
    replicas_memory_bound: int
    replicas_compute_bound: int
    replicas_slo_bound: int
    binding: str
    replicas: int
    gpus: int
    usd_per_hour: float
    usd_per_month: float


def estimate(
    model: str | ModelSpec,
    gpu: str | GPUSpec,
    *,
    qps: float,
    slo_latency_s: float,
    concurrency: int = 32,
    precision: str = "bf16",
    context_tokens: int = 4096,
    prompt_tokens: int = 2000,
    output_tokens: int = 512,
    compute_utilization: float = 0.35,
    measured_replica_qps: float | None = None,
    redundancy: float = 0.3,
    growth: float = 1.0,
    usd_per_gpu_hour: float | None = None,
) -> SizingEstimate:
    """Size a deployment from first principles.

    1. memory: smallest TP where weights + KV for `concurrency` sequences of `context_tokens` fit;
    2. compute: per-GPU tokens/s from peak FLOPS x compute_utilization / (2 x active params),
       times TP, divided by prompt + output tokens -> requests/s per replica;
    3. SLO: per-replica QPS by Little's law (concurrency / slo_latency_s), or the measured knee
       passed as measured_replica_qps;
    4. replicas = max(memory, compute, SLO bound) x (1 + redundancy) x growth; GPUs = replicas x TP;
    5. cost at usd_per_gpu_hour (default: the GPU's catalog on-demand price).
    """
    spec, card = get_model(model), get_gpu(gpu)
    if context_tokens > spec.max_context_tokens:
        raise InvalidParameterError(
            f"context_tokens={context_tokens} exceeds {spec.name}'s maximum context of "
            f"{spec.max_context_tokens} tokens"
        )
    fit = min_tensor_parallel(
        spec, card, precision=precision, context_tokens=context_tokens, concurrency=concurrency
    )
    tp = fit.tensor_parallel
    per_gpu = theoretical_tokens_per_s(
        card.peak_tflops(precision), spec.compute_parameters, utilization=compute_utilization
    )
    qps_compute = requests_per_s(
        per_gpu * tp, prompt_tokens=prompt_tokens, output_tokens=output_tokens
    )
    qps_slo = (
        littles_law_qps(concurrency, slo_latency_s)
        if measured_replica_qps is None
        else require_positive("measured_replica_qps", measured_replica_qps)
    )
    bounds = {
        "memory": round_up_count(in_flight_requests(qps, slo_latency_s) / fit.max_concurrency),
        "compute": round_up_count(qps / qps_compute),
        "slo": round_up_count(qps / qps_slo),
    }
    binding = max(bounds, key=lambda name: bounds[name])
    replicas = with_headroom(bounds[binding], redundancy=redundancy, growth=growth)
    price = card.on_demand_usd_per_hour if usd_per_gpu_hour is None else usd_per_gpu_hour
    usd_per_hour = replicas * tp * require_non_negative("usd_per_gpu_hour", price)
    return SizingEstimate(
        model=spec.name,
        gpu=card.name,
        precision=precision,
        tensor_parallel=tp,
        weights_gb=fit.weights_gb,
        kv_cache_gb=fit.kv_cache_gb,
        max_concurrency_per_replica=fit.max_concurrency,
        tokens_per_s_per_gpu=per_gpu,
        replica_qps_compute=qps_compute,
        replica_qps_slo=qps_slo,
        replicas_memory_bound=bounds["memory"],
        replicas_compute_bound=bounds["compute"],
        replicas_slo_bound=bounds["slo"],
        binding=binding,
        replicas=replicas,
        gpus=replicas * tp,
        usd_per_hour=usd_per_hour,
        usd_per_month=usd_per_hour * HOURS_PER_MONTH,
    )
