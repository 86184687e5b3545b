"""Built-in catalogs of GPUs and open models, and the bytes per parameter of each precision.

Figures are public datasheet / model-card values. Prices are typical cloud on-demand list
prices per GPU-hour at the time of writing; they vary by provider and region, so real plans
should pass their own :class:`capacity.sizing.cost.Prices`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capacity.errors import UnknownNameError

#: Bytes per stored weight (or KV-cache element) for each supported precision.
BYTES_PER_PARAMETER: dict[str, float] = {
    "fp32": 4.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator.

    memory_gb is the marketed HBM/GDDR size taken as 1e9-byte GB (physical memory is GiB; the
    ~7 % difference is headroom that the CUDA context and fragmentation consume anyway).
    dense_fp16_tflops is dense (no sparsity) FP16/BF16 tensor throughput; dense_fp8_tflops is
    None where the GPU has no FP8 tensor cores.
    """

    name: str
    memory_gb: float
    dense_fp16_tflops: float
    dense_fp8_tflops: float | None
    memory_bandwidth_gb_per_s: float
    on_demand_usd_per_hour: float

    def peak_tflops(self, precision: str) -> float:
        """Dense tensor TFLOPS used for `precision`: FP8 cores for fp8 when present, else FP16.

        int8/int4 weight-only quantisation still multiplies in 16-bit, so it uses FP16 peak.
        """
        if precision == "fp8" and self.dense_fp8_tflops is not None:
            return self.dense_fp8_tflops
        return self.dense_fp16_tflops


@dataclass(frozen=True)
class ModelSpec:
    """One transformer model. active_parameters differs from parameters only for MoE models."""

    name: str
    parameters: float
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    max_context_tokens: int
    active_parameters: float | None = None

    @property
    def compute_parameters(self) -> float:
        """Parameters touched per token (all of them for dense models, the active set for MoE)."""
        return self.active_parameters if self.active_parameters is not None else self.parameters


# Dense (no sparsity) tensor TFLOPS and memory bandwidth from the vendors' datasheets:
# A100: NVIDIA A100 datasheet (312 TFLOPS FP16/BF16 dense; 1,555 GB/s for 40 GB, 2,039 GB/s
#   for 80 GB SXM); H100 SXM / PCIe: NVIDIA H100 datasheet (989 / 756 TFLOPS FP16 dense, 1,979 /
#   1,513 FP8; 3.35 / 2.0 TB/s); H200: NVIDIA H200 datasheet (as H100 SXM, 4.8 TB/s); B200:
#   NVIDIA HGX B200 datasheet, per GPU (2.25 PFLOPS FP16 dense, 4.5 FP8; 7.7 TB/s, 180 GB);
#   L40S: NVIDIA L40S datasheet (362 FP16 dense, 733 FP8; 864 GB/s); L4: NVIDIA L4 datasheet;
#   RTX 4090: NVIDIA Ada Lovelace architecture whitepaper, appendix (165.2 TFLOPS FP16 tensor
#   with FP32 accumulate, dense; 330.3 FP8; 1,008 GB/s).
GPUS: dict[str, GPUSpec] = {
    gpu.name: gpu
    for gpu in (
        GPUSpec("a100-40g", 40, 312, None, 1555, 1.50),
        GPUSpec("a100-80g", 80, 312, None, 2039, 1.80),
        GPUSpec("h100-80g", 80, 989, 1979, 3350, 2.50),
        GPUSpec("h100-pcie-80g", 80, 756, 1513, 2000, 2.20),
        GPUSpec("h200-141g", 141, 989, 1979, 4800, 3.50),
        GPUSpec("b200-180g", 180, 2250, 4500, 7700, 5.00),
        GPUSpec("l40s-48g", 48, 362, 733, 864, 1.00),
        GPUSpec("l4-24g", 24, 121, 242, 300, 0.70),
        GPUSpec("rtx-4090-24g", 24, 165.2, 330.3, 1008, 0.40),
    )
}

MODELS: dict[str, ModelSpec] = {
    model.name: model
    for model in (
        # Llama 3 (April 2024) has an 8k context; Llama 3.1 the same weights' shape at 128k
        # (Meta's model cards).
        ModelSpec("llama-2-7b", 6.74e9, 32, 4096, 32, 32, 128, 4096),
        ModelSpec("llama-3-8b", 8.03e9, 32, 4096, 32, 8, 128, 8192),
        ModelSpec("llama-3-70b", 70.6e9, 80, 8192, 64, 8, 128, 8192),
        ModelSpec("llama-3.1-8b", 8.03e9, 32, 4096, 32, 8, 128, 131072),
        ModelSpec("llama-3.1-70b", 70.6e9, 80, 8192, 64, 8, 128, 131072),
        ModelSpec("llama-3.1-405b", 405.9e9, 126, 16384, 128, 8, 128, 131072),
        ModelSpec("mistral-7b-v0.3", 7.25e9, 32, 4096, 32, 8, 128, 32768),
        ModelSpec("mixtral-8x7b", 46.7e9, 32, 4096, 32, 8, 128, 32768, active_parameters=12.9e9),
        ModelSpec("qwen2.5-7b", 7.62e9, 28, 3584, 28, 4, 128, 32768),
        ModelSpec("qwen2.5-72b", 72.7e9, 80, 8192, 64, 8, 128, 32768),
    )
}


def _lookup(kind: str, catalog: dict[str, Any], name: str) -> Any:
    try:
        return catalog[name.lower()]
    except KeyError:
        known = ", ".join(sorted(catalog))
        raise UnknownNameError(f"unknown {kind} {name!r}; known: {known}") from None


def get_gpu(gpu: str | GPUSpec) -> GPUSpec:
    """A GPUSpec from a catalog name (case-insensitive) or a spec passed through unchanged."""
    return gpu if isinstance(gpu, GPUSpec) else _lookup("GPU", GPUS, gpu)


def get_model(model: str | ModelSpec) -> ModelSpec:
    """A ModelSpec from a catalog name (case-insensitive) or a spec passed through unchanged."""
    return model if isinstance(model, ModelSpec) else _lookup("model", MODELS, model)


def bytes_per_parameter(precision: str) -> float:
    """Bytes per weight for a precision name such as "bf16", "fp8" or "int4"."""
    return _lookup("precision", BYTES_PER_PARAMETER, precision)
