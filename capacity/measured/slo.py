"""SLO capacity: the largest request rate one replica sustains within p95 TTFT and TPOT limits.

At a measured mix it is the measured knee (:func:`capacity.measured.loadtest.measured_knee`). At
any other prompt/completion mix it comes from a serving-cost model fitted to the table
(:mod:`capacity.measured.serving_model`): the model's latency curves over the measured load
range are searched for the first load that breaks either limit, the same way the knee is read
from measurements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from capacity._checks import require_positive
from capacity._words import count
from capacity.errors import InvalidParameterError, SloUnreachableError
from capacity.measured import slo_envelope, slo_range
from capacity.measured.loadtest import LoadTestTable, MeasuredKnee, measured_knee
from capacity.measured.serving_correction import ResidualCorrection
from capacity.measured.serving_model import (
    Curves,
    ServingModel,
    first_crossing,
    fit_serving_model,
    observations_of,
    reduced,
)
from capacity.sizing.ceilings import ServingCeilings, gpu_by_name, model_by_name, validated_tokens

LOAD_GRID_POINTS = 240
MIX_ROUNDING_DIGITS = 3  # cache unmeasured mixes by 3 significant digits (0.5 % at most)


@dataclass(frozen=True)
class SloTarget:
    """A latency SLO: p95 time to first token and p95 time per output token, in seconds."""

    ttft_p95_s: float
    tpot_p95_s: float

    def __post_init__(self) -> None:
        require_positive("ttft_p95_s", self.ttft_p95_s)
        require_positive("tpot_p95_s", self.tpot_p95_s)


@dataclass(frozen=True)
class SloCapacity:
    """What one replica sustains within the SLO at one mix, and how the figure was obtained.

    ``binding``: "ttft" or "tpot" (the limit reached at the knee), "measured range" (the SLO
    still holds at the highest load measured, so the capacity is at least this) or "physics"
    (the model's figure was above what the replica's compute or memory bandwidth allows, and
    the answer is that ceiling). ``method`` (also ``basis``): "measured" (a measured mix: the
    measured knee), "interpolated" (inside the measured ranges: the model) or "extrapolated".
    ``requests_per_s_per_replica_low`` / ``_high``: the range the capacity is expected in, from
    the model's leave-one-mix-out errors (:mod:`capacity.measured.slo_range`);
    ``production_hours``: hours of the running fleet folded in (:mod:`.slo_fleet`).
    """

    requests_per_s_per_replica: float
    tokens_per_s_per_replica: float
    tokens_per_s_per_gpu: float
    prompt_tokens: float
    completion_tokens: float
    binding: str
    method: str
    concurrency: float | None
    note: str
    requests_per_s_per_replica_low: float
    requests_per_s_per_replica_high: float
    production_hours: int = 0

    @property
    def basis(self) -> str:
        return self.method


_Found = tuple[float, float, str] | None  # (requests/s, in flight, binding); None: unreachable


@dataclass(eq=False)
class SloModel:
    """A load-test table with its fitted serving model; answers SLO capacity at any mix."""

    table: LoadTestTable
    serving: ServingModel
    correction: ResidualCorrection
    gpus_per_replica: int
    ceilings: ServingCeilings
    _cache: dict[tuple[float, float, float, float], _Found] = field(
        default_factory=dict, repr=False
    )

    def __post_init__(self) -> None:
        self._held_out: dict[tuple[float, float], SloModel] | None = None
        self.errors_by_slo: dict[SloTarget, list[slo_range.MixError]] = {}
        self.anchors_by_slo: dict[SloTarget, list[tuple[float, float, float]]] = {}
        self.envelopes_by_slo: dict[SloTarget, slo_envelope.Envelope] = {}
        self._knees: dict[tuple, MeasuredKnee | SloUnreachableError | None] = {}
        self._mixes = np.array(self.table.mixes())
        self._in_flight = np.geomspace(
            1.0, float(np.max(observations_of(self.table).in_flight)), LOAD_GRID_POINTS
        )

    def capacity(
        self,
        *,
        prompt_tokens: float,
        completion_tokens: float,
        slo: SloTarget,
        allow_extrapolation: bool = False,
        with_range: bool = True,
    ) -> SloCapacity:
        """SLO capacity at (prompt_tokens, completion_tokens) with its range; SloUnreachableError
        if none. A mix far beyond the measured range (``slo_range.FAR_FACTOR``) is an
        ExtrapolationError unless ``allow_extrapolation``; ``with_range=False`` skips the range
        (low = high = the answer)."""
        prompt = validated_tokens("prompt_tokens", prompt_tokens)
        completion = validated_tokens("completion_tokens", completion_tokens)
        self.ceilings.check_context(prompt, completion)
        if self.table.measured_mix(prompt, completion) is not None:
            return self._measured(prompt, completion, slo)
        if not allow_extrapolation and slo_range.is_far(self, prompt, completion):
            raise slo_range.far_error(self, prompt, completion)
        answer = self._model_answer(_round(prompt), _round(completion), slo)
        return slo_range.ranged(self, answer, slo) if with_range else answer

    def held_out_models(self) -> dict[tuple[float, float], SloModel]:
        """The model refitted without each measured mix (fitted once; none below 3 mixes)."""
        if self._held_out is None:
            self._held_out = slo_range.held_out_models(self, fit_slo_model)
        return self._held_out

    def _model_answer(self, prompt: float, completion: float, slo: SloTarget) -> SloCapacity:
        envelope = slo_envelope.envelope(self, slo)
        at = np.array([envelope.at_least_edge(prompt, completion)]).T
        found = self.modelled(at[0], at[1], slo)[0]
        method = self._method(prompt, completion)
        if not envelope.reachable_at(prompt, completion):
            raise slo_envelope.unreachable(self, slo, (prompt, completion), found is not None)
        requests_per_s = envelope.at(prompt, completion)
        mixes = count(len(self._mixes), "measured mix", "measured mixes")
        note = f"{method} by the serving-cost model fitted to {mixes}"
        if found is None:
            concurrency, binding = None, "envelope"
            note += (
                "; the model misses the SLO even with one request in flight here, but meets it "
                "with more tokens per request (or a measured knee does): at least that"
            )
        else:
            _, concurrency, binding = found
        if binding == "measured range":
            note += (
                "; the SLO holds up to the highest measured load, so the capacity is at least this"
            )
        return self._answer(prompt, completion, requests_per_s, binding, method, concurrency, note)

    def tokens_per_s_per_gpu(
        self, prompt_tokens: np.ndarray, completion_tokens: np.ndarray, slo: SloTarget
    ) -> np.ndarray:
        """Vectorised SLO capacity in tokens/s per GPU (any shape); 0.0 where the SLO cannot be met.

        Each mix is first made servable (:meth:`sane_mix`: at least one token each, within the
        context length), so one odd hour of a plan never refuses it. Mixes are rounded to 3
        significant digits (measured mixes are matched first) and each distinct mix is read
        from the SLO's envelope (:mod:`capacity.measured.slo_envelope`, built once per SLO).
        The requests/s of the rounded mix are turned into tokens/s with the mix's own tokens
        per request.
        """
        prompts = np.asarray(prompt_tokens, dtype=float)
        completions = np.asarray(completion_tokens, dtype=float)
        if prompts.shape != completions.shape:
            raise InvalidParameterError("prompt_tokens and completion_tokens differ in shape")
        if not (
            np.isfinite(prompts).all()
            and np.isfinite(completions).all()
            and (prompts > 0).all()
            and (completions > 0).all()
        ):
            raise InvalidParameterError(
                "prompt_tokens and completion_tokens must be finite and > 0"
            )
        prompts, completions = self.sane_mix(prompts, completions)
        pairs = np.stack([self._snap(prompts.ravel(), 0), self._snap(completions.ravel(), 1)], 1)
        unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
        per_replica = np.array([self._requests_per_s_or_zero(p, c, slo) for p, c in unique])
        # requests/s at the rounded mix, tokens at the mix itself: the rounding never turns
        # more tokens per request into more requests/s
        requests_per_s = per_replica[inverse.ravel()].reshape(prompts.shape)
        return requests_per_s * (prompts + completions) / self.gpus_per_replica

    def sane_mix(
        self, prompt_tokens: np.ndarray, completion_tokens: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The nearest servable mix: at least one token each, and prompt + completion within
        the model's context length (both scaled down by one factor when beyond it)."""
        prompts = np.maximum(np.asarray(prompt_tokens, dtype=float), 1.0)
        completions = np.maximum(np.asarray(completion_tokens, dtype=float), 1.0)
        context = self.ceilings.context_tokens
        if context is not None:
            over = prompts + completions > context
            scale = np.where(over, context / (prompts + completions), 1.0)
            prompts = np.where(over, np.maximum(np.floor(prompts * scale), 1.0), prompts)
            completions = np.where(
                over, np.maximum(np.floor(completions * scale), 1.0), completions
            )
        return prompts, completions

    def _snap(self, values: np.ndarray, column: int) -> np.ndarray:
        """Round to 3 significant digits, but keep a measured mix's exact token count."""
        rounded = np.array([_round(v) for v in values]) if values.size else values
        for measured in np.unique(self._mixes[:, column]):
            rounded = np.where(np.abs(values - measured) <= 1e-3 * measured, measured, rounded)
        return rounded

    def _requests_per_s_or_zero(self, prompt: float, completion: float, slo: SloTarget) -> float:
        """:meth:`capacity`'s requests/s (allowing extrapolation, without the range), read
        straight from the envelope; 0.0 where the SLO cannot be met."""
        # rounding to 3 significant digits may carry a mix at the context's edge over it
        (prompt,), (completion,) = self.sane_mix(np.array([prompt]), np.array([completion]))
        if self.table.measured_mix(prompt, completion) is not None:
            try:
                return self._measured(prompt, completion, slo).requests_per_s_per_replica
            except SloUnreachableError:
                return 0.0
        prompt, completion = _round(prompt), _round(completion)
        envelope = slo_envelope.envelope(self, slo)
        if not envelope.reachable_at(prompt, completion):
            return 0.0
        return min(
            envelope.at(prompt, completion),
            self.ceilings.requests_per_s(prompt, completion),
        )

    def modelled(
        self, prompts: np.ndarray, completions: np.ndarray, slo: SloTarget
    ) -> list[_Found]:
        """The first crossing of the SLO on the model's curves, per mix (cached)."""
        keys = [self._key(p, c, slo) for p, c in zip(prompts, completions, strict=True)]
        missing = [i for i, key in enumerate(keys) if key not in self._cache]
        if missing:
            for i, curves in zip(
                missing, self.curves_at(prompts[missing], completions[missing]), strict=True
            ):
                self._cache[keys[i]] = first_crossing(
                    curves, self._in_flight, slo.ttft_p95_s, slo.tpot_p95_s
                )
        return [self._cache[key] for key in keys]

    def curves_at(self, prompts: np.ndarray, completions: np.ndarray) -> list[Curves]:
        """Corrected model curves over the load grid, one per mix (computed together)."""
        grid = np.broadcast_to(self._in_flight, (len(prompts), self._in_flight.size))
        curves = self.serving.curves(prompts[:, None], completions[:, None], grid)
        return [
            self.correction.apply(p, c, self._in_flight, curves.row(row))
            for row, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]

    @staticmethod
    def _key(prompt: float, completion: float, slo: SloTarget) -> tuple[float, float, float, float]:
        return (float(prompt), float(completion), slo.ttft_p95_s, slo.tpot_p95_s)

    def _measured(self, prompt: float, completion: float, slo: SloTarget) -> SloCapacity:
        key = ("measured", prompt, completion, slo.ttft_p95_s, slo.tpot_p95_s)
        if key not in self._knees:
            try:
                self._knees[key] = measured_knee(
                    self.table,
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    ttft_p95_s=slo.ttft_p95_s,
                    tpot_p95_s=slo.tpot_p95_s,
                )
            except SloUnreachableError as exc:
                self._knees[key] = exc
        knee = self._knees[key]
        if isinstance(knee, SloUnreachableError):
            raise knee
        assert knee is not None
        return self._from_knee(knee)

    def _from_knee(self, knee: MeasuredKnee) -> SloCapacity:
        note = "measured knee"
        if knee.binding == "measured range":
            note = "the SLO holds at the highest measured load; the capacity is at least this"
        return self._answer(
            knee.prompt_tokens,
            knee.completion_tokens,
            knee.requests_per_s,
            knee.binding,
            "measured",
            knee.concurrency,
            note,
        )

    def _answer(
        self,
        prompt: float,
        completion: float,
        requests_per_s: float,
        binding: str,
        method: str,
        concurrency: float | None,
        note: str,
    ) -> SloCapacity:
        ceiling = self.ceilings.requests_per_s(prompt, completion)
        if requests_per_s > ceiling:
            requests_per_s, binding = ceiling, "physics"
            note += f"; capped at the replica's physical ceiling ({self.ceilings.describe()})"
        tokens = requests_per_s * (prompt + completion)
        return SloCapacity(
            requests_per_s_per_replica=requests_per_s,
            tokens_per_s_per_replica=tokens,
            tokens_per_s_per_gpu=tokens / self.gpus_per_replica,
            prompt_tokens=prompt,
            completion_tokens=completion,
            binding=binding,
            method=method,
            concurrency=concurrency,
            note=note,
            requests_per_s_per_replica_low=requests_per_s,
            requests_per_s_per_replica_high=requests_per_s,
        )

    def _method(self, prompt: float, completion: float) -> str:
        mixes = self._mixes
        inside = (
            mixes[:, 0].min() <= prompt <= mixes[:, 0].max()
            and mixes[:, 1].min() <= completion <= mixes[:, 1].max()
        )
        return "interpolated" if inside and len(mixes) > 1 else "extrapolated"


def fit_slo_model(
    table: LoadTestTable,
    *,
    gpus_per_replica: int | None = None,
    ceilings: ServingCeilings | None = None,
    start: ServingModel | None = None,
) -> SloModel:
    """Fit the serving-cost model to a table (``start``: parameters to start the fit from).
    ``gpus_per_replica`` turns per-replica into per-GPU figures; default: the table's
    tensor-parallel degree (1 when unknown). ``ceilings``: what physics allows the replica;
    default: the catalog's figures for the table's GPU and model names (:func:`table_ceilings`).
    """
    gpus = gpus_per_replica if gpus_per_replica is not None else (table.tensor_parallel or 1)
    if isinstance(gpus, bool) or int(gpus) != gpus or gpus < 1:
        raise InvalidParameterError(f"gpus_per_replica must be a whole number >= 1, got {gpus!r}")
    observations = reduced(observations_of(table))
    serving = fit_serving_model(observations, start=start)
    if ceilings is None:
        ceilings = table_ceilings(table, gpus=int(gpus))
    return SloModel(
        table, serving, ResidualCorrection.fit(serving, observations), int(gpus), ceilings
    )


def table_ceilings(
    table: LoadTestTable, *, gpus: int, **overrides: float | None
) -> ServingCeilings:
    """The physical ceilings of a replica of ``gpus`` GPUs serving the table's model on its GPU
    type (catalog figures for the names the table gives), each overridable
    (``parameters``, ``context_tokens``, ``peak_tflops``, ``memory_bandwidth_gb_per_s``)."""
    return ServingCeilings.known(
        gpus=gpus,
        gpu=gpu_by_name(table.gpu_type),
        model=model_by_name(table.model),
        precision=table.precision,
        **{key: value for key, value in overrides.items() if value is not None},  # type: ignore[arg-type]
    )


def slo_capacity(
    table: LoadTestTable,
    *,
    prompt_tokens: float,
    completion_tokens: float,
    ttft_p95_s: float,
    tpot_p95_s: float,
) -> SloCapacity:
    """SLO capacity of one replica at one mix (fits the model; reuse fit_slo_model for many)."""
    slo = SloTarget(ttft_p95_s, tpot_p95_s)
    return fit_slo_model(table).capacity(
        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, slo=slo
    )


def _round(value: float) -> float:
    digits = MIX_ROUNDING_DIGITS - 1 - int(math.floor(math.log10(abs(value))))
    return round(value, digits)
