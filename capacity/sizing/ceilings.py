"""What physics allows one replica: the compute ceiling, the memory-bandwidth ceiling of
decode, and the model's context length.

- **Compute.** A forward pass costs about 2 FLOPs per parameter per token, prompt and
  completion tokens alike, so a replica of G GPUs processes at most
  ``peak FLOPs × G ÷ (2 × parameters)`` tokens/s — at most
  ``peak × G ÷ (2 × parameters × (P + C))`` requests/s of P prompt and C completion tokens.
  The prefill ceiling (``peak × G ÷ (2 × parameters)`` prompt tokens/s) follows from it.
- **Memory bandwidth.** Every decode step reads the KV cache of each sequence it extends, so
  decode tokens/s ≤ ``bandwidth × G ÷ (KV bytes per token × mean context)`` whatever the batch
  (the weights' own read only tightens it). The KV cache is taken at one byte per element
  (fp8), the smallest any serving engine stores, so the bound holds for any cache precision.
  It needs the model's shape (layers, KV heads, head size): known for catalog models only.
- **Context.** Prompt plus completion beyond the model's context length cannot be served.

Peak figures are the catalog's datasheet values (:mod:`capacity.sizing.catalog`); GPU and model
names as load-test tools write them (``H100-SXM-80GB-HBM3``, ``meta-llama3-70b-instruct``,
``meta-llama/Llama-3.1-70B``) are resolved with :func:`gpu_by_name` and :func:`model_by_name`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from capacity._checks import require_positive
from capacity.errors import ContextLengthError, InvalidParameterError
from capacity.sizing.catalog import GPUS, MODELS, GPUSpec, ModelSpec

__all__ = ["ServingCeilings", "gpu_by_name", "model_by_name", "validated_tokens"]

_KV_BYTES_PER_ELEMENT = 1.0  # fp8: the smallest KV cache element any engine stores

# (pattern on the lowercased name without separators, catalog name): first match wins
_GPU_PATTERNS = (
    (r"4090", "rtx-4090-24g"),
    (r"l40s", "l40s-48g"),
    (r"b200", "b200-180g"),
    (r"h200", "h200-141g"),
    (r"h100.*pcie|pcie.*h100", "h100-pcie-80g"),
    (r"h100", "h100-80g"),
    (r"a100.*40g", "a100-40g"),
    (r"a100", "a100-80g"),
    (r"(^|nvidia)l4($|24g)", "l4-24g"),
)
_MODEL_PATTERN = re.compile(r"llama-?(2|3|3\.1)-?(\d+)b")


def gpu_by_name(name: str | None) -> GPUSpec | None:
    """The catalog GPU a load-test tool's GPU name means (``A100-SXM4-80GB`` → ``a100-80g``),
    or None when not recognised."""
    if not name:
        return None
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    if name.lower() in GPUS:
        return GPUS[name.lower()]
    for pattern, catalog_name in _GPU_PATTERNS:
        if re.search(pattern, key):
            return GPUS[catalog_name]
    return None


def model_by_name(name: str | None) -> ModelSpec | None:
    """The catalog model a load-test's model name means (``meta-llama3-70b-instruct`` and
    ``Meta-Llama-3-70B-Instruct`` → ``llama-3-70b``; ``meta-llama/Llama-3.1-70B`` →
    ``llama-3.1-70b``), or None when not recognised."""
    if not name:
        return None
    lowered = name.lower()
    if lowered in MODELS:
        return MODELS[lowered]
    found = _MODEL_PATTERN.search(lowered.replace("_", "-").replace("v2", "2"))
    if found is None:
        return None
    return MODELS.get(f"llama-{found.group(1)}-{found.group(2)}b")


@dataclass(frozen=True)
class ServingCeilings:
    """Physical bounds of one replica (any field None: that bound is not known).

    ``peak_tflops``: dense tensor TFLOPS of one GPU at the serving precision;
    ``memory_bandwidth_gb_per_s``: of one GPU; ``kv_bytes_per_token_element``: bytes of KV cache
    per token at one byte per element (2 × layers × KV heads × head size), None if the model's
    shape is unknown.
    """

    gpus: int
    parameters: float | None = None
    context_tokens: int | None = None
    peak_tflops: float | None = None
    memory_bandwidth_gb_per_s: float | None = None
    kv_bytes_per_token: float | None = None

    def __post_init__(self) -> None:
        require_positive("gpus", self.gpus)
        for name in ("parameters", "context_tokens", "peak_tflops", "memory_bandwidth_gb_per_s"):
            value = getattr(self, name)
            if value is not None:
                require_positive(name, value)

    @classmethod
    def known(
        cls,
        *,
        gpus: int,
        gpu: GPUSpec | None,
        model: ModelSpec | None,
        precision: str | None = None,
        parameters: float | None = None,
        context_tokens: int | None = None,
        peak_tflops: float | None = None,
        memory_bandwidth_gb_per_s: float | None = None,
    ) -> ServingCeilings:
        """Ceilings from catalog entries, each figure overridden where given."""
        fp8 = precision is not None and "fp8" in precision.lower()
        kv = None
        if model is not None:
            kv = 2.0 * model.layers * model.kv_heads * model.head_dim * _KV_BYTES_PER_ELEMENT
        return cls(
            gpus=gpus,
            parameters=parameters or (model.compute_parameters if model else None),
            context_tokens=context_tokens or (model.max_context_tokens if model else None),
            peak_tflops=peak_tflops or (gpu.peak_tflops("fp8" if fp8 else "fp16") if gpu else None),
            memory_bandwidth_gb_per_s=memory_bandwidth_gb_per_s
            or (gpu.memory_bandwidth_gb_per_s if gpu else None),
            kv_bytes_per_token=kv,
        )

    def check_context(self, prompt_tokens: float, completion_tokens: float) -> None:
        """ContextLengthError when prompt + completion exceed the context length."""
        if self.context_tokens is not None and prompt_tokens + completion_tokens > (
            self.context_tokens
        ):
            raise ContextLengthError(
                f"{prompt_tokens:g} prompt + {completion_tokens:g} completion tokens exceed the "
                f"model's context length of {self.context_tokens:,} tokens"
            )

    def prefill_tokens_per_s(self) -> float:
        """The most prompt tokens/s the replica's compute allows (inf when unknown)."""
        if self.parameters is None or self.peak_tflops is None:
            return math.inf
        return self.peak_tflops * 1e12 * self.gpus / (2.0 * self.parameters)

    def requests_per_s(self, prompt_tokens: float, completion_tokens: float) -> float:
        """The most requests/s physics allows at the mix (inf when nothing is known)."""
        compute = self.prefill_tokens_per_s() / (prompt_tokens + completion_tokens)
        decode_steps = max(completion_tokens - 1.0, 0.0)
        if self.kv_bytes_per_token is None or self.memory_bandwidth_gb_per_s is None:
            return compute
        if decode_steps == 0:
            return compute
        mean_context = prompt_tokens + completion_tokens / 2.0
        decode_tokens_per_s = (self.memory_bandwidth_gb_per_s * 1e9 * self.gpus) / (
            self.kv_bytes_per_token * mean_context
        )
        return min(compute, decode_tokens_per_s / decode_steps)

    def describe(self) -> str:
        """One line: what the ceilings rest on."""
        parts = []
        if self.peak_tflops is not None and self.parameters is not None:
            parts.append(
                f"compute {self.prefill_tokens_per_s():,.0f} tokens/s ({self.gpus} × "
                f"{self.peak_tflops:g} TFLOPS ÷ 2 × {self.parameters:.3g} parameters)"
            )
        if self.kv_bytes_per_token is not None and self.memory_bandwidth_gb_per_s is not None:
            parts.append(f"decode within {self.gpus} × {self.memory_bandwidth_gb_per_s:g} GB/s")
        return "; ".join(parts) or "no physical ceiling known"


def validated_tokens(name: str, value: float) -> float:
    """A token count per request: finite and at least 1."""
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"{name} must be a number, got {value!r}") from exc
    if not math.isfinite(number) or number < 1:
        raise InvalidParameterError(f"{name} must be a finite token count >= 1, got {value!r}")
    return number
