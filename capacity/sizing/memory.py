"""Memory sizing: weights, KV cache and the smallest tensor-parallel degree that fits."""

from __future__ import annotations

from dataclasses import dataclass

from capacity._checks import require_fraction, require_int
from capacity.errors import DoesNotFitError, InvalidParameterError
from capacity.sizing.catalog import GPUSpec, ModelSpec, bytes_per_parameter, get_gpu, get_model

BYTES_PER_GB = 1e9
TP_DEGREES = (1, 2, 4, 8)


@dataclass(frozen=True)
class MemoryFit:
    """How a model fits at one tensor-parallel degree (all sizes in GB, summed over the TP group).

    max_concurrency is how many sequences of context_tokens the KV budget left after weights
    holds at this degree (>= the requested concurrency when the fit succeeds).
    """

    tensor_parallel: int
    weights_gb: float
    kv_cache_gb: float
    activations_gb: float
    reserve_gb: float
    capacity_gb: float
    max_concurrency: int

    @property
    def used_gb(self) -> float:
        return self.weights_gb + self.kv_cache_gb + self.activations_gb + self.reserve_gb


def weights_gb(parameters: float, precision: str = "bf16") -> float:
    """Weight memory in GB: parameters x bytes per parameter (fp16/bf16 2, fp8/int8 1, int4 0.5)."""
    if parameters <= 0:
        raise InvalidParameterError(f"parameters must be > 0, got {parameters!r}")
    return parameters * bytes_per_parameter(precision) / BYTES_PER_GB


def kv_cache_bytes_per_token(model: str | ModelSpec, kv_precision: str = "bf16") -> float:
    """KV-cache bytes per token: 2 (K and V) x layers x kv_heads x head_dim x bytes per element.

    Grouped-query attention shares each K/V head among several query heads, so kv_heads (not
    attention_heads) sets the size.
    """
    spec = get_model(model)
    return 2.0 * spec.layers * spec.kv_heads * spec.head_dim * bytes_per_parameter(kv_precision)


def naive_kv_cache_bytes_per_token(model: str | ModelSpec, kv_precision: str = "bf16") -> float:
    """KV bytes per token by the naive formula 2 x layers x hidden_size x bytes (ignores GQA)."""
    spec = get_model(model)
    return 2.0 * spec.layers * spec.hidden_size * bytes_per_parameter(kv_precision)


def _kv_gb_at(tp: int, kv_per_token: float, tokens: float, kv_heads: int) -> float:
    # Beyond kv_heads ranks, K/V heads are replicated rather than split further.
    replication = max(1.0, tp / kv_heads)
    return kv_per_token * tokens * replication / BYTES_PER_GB


def fit_at(
    model: str | ModelSpec,
    gpu: str | GPUSpec,
    tensor_parallel: int,
    *,
    precision: str = "bf16",
    context_tokens: int = 4096,
    concurrency: int = 1,
    kv_precision: str | None = None,
    activation_fraction: float = 0.05,
    reserve_fraction: float = 0.05,
) -> MemoryFit:
    """Memory budget of `model` on `tensor_parallel` GPUs of type `gpu` (fits or not)."""
    spec, card = get_model(model), get_gpu(gpu)
    tp = require_int("tensor_parallel", tensor_parallel, minimum=1)
    require_int("context_tokens", context_tokens, minimum=1)
    require_int("concurrency", concurrency, minimum=1)
    act = require_fraction("activation_fraction", activation_fraction, allow_zero=True)
    res = require_fraction("reserve_fraction", reserve_fraction, allow_zero=True)
    if act + res >= 1:
        raise InvalidParameterError("activation_fraction + reserve_fraction must be < 1")
    kv_per_token = kv_cache_bytes_per_token(spec, kv_precision or precision)
    capacity = tp * card.memory_gb
    weights = weights_gb(spec.parameters, precision)
    kv_budget = capacity * (1 - act - res) - weights
    per_sequence = _kv_gb_at(tp, kv_per_token, context_tokens, spec.kv_heads)
    return MemoryFit(
        tensor_parallel=tp,
        weights_gb=weights,
        kv_cache_gb=_kv_gb_at(tp, kv_per_token, context_tokens * concurrency, spec.kv_heads),
        activations_gb=capacity * act,
        reserve_gb=capacity * res,
        capacity_gb=capacity,
        max_concurrency=max(0, int(kv_budget // per_sequence)),
    )


def min_tensor_parallel(
    model: str | ModelSpec,
    gpu: str | GPUSpec,
    *,
    precision: str = "bf16",
    context_tokens: int = 4096,
    concurrency: int = 1,
    kv_precision: str | None = None,
    activation_fraction: float = 0.05,
    reserve_fraction: float = 0.05,
) -> MemoryFit:
    """Smallest TP degree in (1, 2, 4, 8) where weights + KV for concurrency x context fit.

    The usable memory per TP group is capacity x (1 - activation_fraction - reserve_fraction).
    Raises DoesNotFitError naming what would have to change when even TP=8 is too small.
    """
    fit = None
    for tp in TP_DEGREES:
        fit = fit_at(
            model,
            gpu,
            tensor_parallel=tp,
            precision=precision,
            context_tokens=context_tokens,
            concurrency=concurrency,
            kv_precision=kv_precision,
            activation_fraction=activation_fraction,
            reserve_fraction=reserve_fraction,
        )
        if fit.max_concurrency >= concurrency:
            return fit
    assert fit is not None
    raise DoesNotFitError(
        f"{get_model(model).name} ({precision}) with {concurrency} x {context_tokens} tokens of "
        f"KV cache needs {fit.weights_gb + fit.kv_cache_gb:.1f} GB plus overheads; it does not "
        f"fit even at TP=8 ({fit.capacity_gb:.0f} GB of {get_gpu(gpu).name}); use a lower "
        "precision, a shorter context, less concurrency or a larger GPU"
    )
