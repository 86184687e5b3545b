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
from capacity.measured.loadtest import LoadTestTable, MeasuredKnee, measured_knee, unreachable_error
from capacity.measured.serving_correction import ResidualCorrection
from capacity.measured.serving_model import Curves, Observations, ServingModel, fit_serving_model

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

    ``binding``: "ttft" or "tpot" (the limit reached at the knee), or "measured range" (the SLO
    still holds at the highest load measured, so the capacity is at least this). ``method``:
    "measured" (a measured mix: the measured knee), "interpolated" (inside the measured prompt
    and completion ranges: the fitted model) or "extrapolated" (outside them).
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


_Found = tuple[float, float, str] | None  # (requests/s, in flight, binding); None: unreachable


@dataclass(eq=False)
class SloModel:
    """A load-test table with its fitted serving model; answers SLO capacity at any mix."""

    table: LoadTestTable
    serving: ServingModel
    correction: ResidualCorrection
    gpus_per_replica: int
    _cache: dict[tuple[float, float, float, float], _Found] = field(
        default_factory=dict, repr=False
    )

    def __post_init__(self) -> None:
        self._knees: dict[tuple, MeasuredKnee | SloUnreachableError | None] = {}
        self._mixes = np.array(self.table.mixes())
        self._in_flight = np.geomspace(
            1.0, float(np.max(_observations(self.table).in_flight)), LOAD_GRID_POINTS
        )

    def capacity(
        self, *, prompt_tokens: float, completion_tokens: float, slo: SloTarget
    ) -> SloCapacity:
        """SLO capacity at (prompt_tokens, completion_tokens); SloUnreachableError if none."""
        prompt = require_positive("prompt_tokens", prompt_tokens)
        completion = require_positive("completion_tokens", completion_tokens)
        if self.table.measured_mix(prompt, completion) is not None:
            return self._measured(prompt, completion, slo)
        prompt, completion = _round(prompt), _round(completion)
        found = self._modelled(np.array([prompt]), np.array([completion]), slo)[0]
        method = self._method(prompt, completion)
        if found is None:
            curves = self._curves(np.array([prompt]), np.array([completion]))[0]
            raise unreachable_error(
                (prompt, completion),
                float(curves.ttft_p95_s[0]),
                float(curves.tpot_p95_s[0]),
                slo.ttft_p95_s,
                slo.tpot_p95_s,
                f"{method} by the fitted model",
            )
        requests_per_s, concurrency, binding = found
        mixes = count(len(self._mixes), "measured mix", "measured mixes")
        note = f"{method} by the serving-cost model fitted to {mixes}"
        if binding == "measured range":
            note += (
                "; the SLO holds up to the highest measured load, so the capacity is at least this"
            )
        return self._answer(prompt, completion, requests_per_s, binding, method, concurrency, note)

    def tokens_per_s_per_gpu(
        self, prompt_tokens: np.ndarray, completion_tokens: np.ndarray, slo: SloTarget
    ) -> np.ndarray:
        """Vectorised SLO capacity in tokens/s per GPU (any shape); 0.0 where the SLO cannot be met.

        Mixes are rounded to 3 significant digits (measured mixes are matched first) and each
        distinct mix is solved once, all together; results are cached per SLO.
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
        pairs = np.stack([self._snap(prompts.ravel(), 0), self._snap(completions.ravel(), 1)], 1)
        unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
        per_gpu = (
            np.array([self._per_gpu_or_zero(p, c, slo) for p, c in unique])
            if self._prefill_cache(unique, slo)
            else np.zeros(0)
        )
        return per_gpu[inverse.ravel()].reshape(prompts.shape)

    def _snap(self, values: np.ndarray, column: int) -> np.ndarray:
        """Round to 3 significant digits, but keep a measured mix's exact token count."""
        rounded = np.array([_round(v) for v in values]) if values.size else values
        for measured in np.unique(self._mixes[:, column]):
            rounded = np.where(np.abs(values - measured) <= 1e-3 * measured, measured, rounded)
        return rounded

    def _prefill_cache(self, mixes: np.ndarray, slo: SloTarget) -> bool:
        """Solve every uncached, unmeasured mix of ``mixes`` in one batch."""
        todo = [
            (p, c)
            for p, c in mixes
            if self._key(p, c, slo) not in self._cache and self.table.measured_mix(p, c) is None
        ]
        for start in range(0, len(todo), 256):
            chunk = np.array(todo[start : start + 256])
            for (p, c), found in zip(
                chunk, self._modelled(chunk[:, 0], chunk[:, 1], slo), strict=True
            ):
                self._cache[self._key(p, c, slo)] = found
        return True

    def _per_gpu_or_zero(self, prompt: float, completion: float, slo: SloTarget) -> float:
        try:
            return self.capacity(
                prompt_tokens=prompt, completion_tokens=completion, slo=slo
            ).tokens_per_s_per_gpu
        except SloUnreachableError:
            return 0.0

    def _modelled(
        self, prompts: np.ndarray, completions: np.ndarray, slo: SloTarget
    ) -> list[_Found]:
        """The first crossing of the SLO on the model's curves, per mix (cached)."""
        keys = [self._key(p, c, slo) for p, c in zip(prompts, completions, strict=True)]
        missing = [i for i, key in enumerate(keys) if key not in self._cache]
        if missing:
            for i, curves in zip(
                missing, self._curves(prompts[missing], completions[missing]), strict=True
            ):
                self._cache[keys[i]] = _first_crossing(curves, self._in_flight, slo)
        return [self._cache[key] for key in keys]

    def _curves(self, prompts: np.ndarray, completions: np.ndarray) -> list[Curves]:
        """Corrected model curves over the load grid, one per mix (computed together)."""
        grid = np.broadcast_to(self._in_flight, (len(prompts), self._in_flight.size))
        curves = self.serving.curves(prompts[:, None], completions[:, None], grid)
        return [
            self.correction.apply(p, c, self._in_flight, _row(curves, row))
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
        )

    def _method(self, prompt: float, completion: float) -> str:
        mixes = self._mixes
        inside = (
            mixes[:, 0].min() <= prompt <= mixes[:, 0].max()
            and mixes[:, 1].min() <= completion <= mixes[:, 1].max()
        )
        return "interpolated" if inside and len(mixes) > 1 else "extrapolated"


def fit_slo_model(table: LoadTestTable, *, gpus_per_replica: int | None = None) -> SloModel:
    """Fit the serving-cost model to a table.

    ``gpus_per_replica`` turns per-replica into per-GPU figures; default: the table's
    tensor-parallel degree (1 when unknown).
    """
    gpus = gpus_per_replica if gpus_per_replica is not None else (table.tensor_parallel or 1)
    if isinstance(gpus, bool) or int(gpus) != gpus or gpus < 1:
        raise InvalidParameterError(f"gpus_per_replica must be a whole number >= 1, got {gpus!r}")
    observations = _observations(table)
    serving = fit_serving_model(observations)
    return SloModel(table, serving, ResidualCorrection.fit(serving, observations), int(gpus))


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


def _observations(table: LoadTestTable) -> Observations:
    frame = table.frame
    throughput = frame["request_throughput_rps"].to_numpy(dtype=float)
    ttft_p95 = frame["ttft_p95_s"].fillna(frame["ttft_p99_s"]).to_numpy(dtype=float)
    tpot_p95 = frame["tpot_p95_s"].fillna(frame["tpot_p99_s"]).to_numpy(dtype=float)
    ttft_mean = frame["ttft_mean_s"].to_numpy(dtype=float)
    tpot_mean = frame["tpot_mean_s"].to_numpy(dtype=float)
    prompt = frame["prompt_tokens"].to_numpy(dtype=float)
    completion = frame["completion_tokens"].to_numpy(dtype=float)
    in_flight = frame["concurrency"].to_numpy(dtype=float)
    if table.load_column == "request_rate":
        # Open loop: requests in flight by Little's law from the measured latencies.
        cycle_s = np.where(np.isnan(ttft_mean), ttft_p95, ttft_mean) + np.maximum(
            completion - 1, 0
        ) * np.where(np.isnan(tpot_mean), tpot_p95, tpot_mean)
        in_flight = np.maximum(throughput * cycle_s, 1.0)
    return Observations(
        prompt, completion, in_flight, throughput, ttft_p95, tpot_p95, ttft_mean, tpot_mean
    )


def _row(curves: Curves, row: int) -> Curves:
    return Curves(
        *(
            getattr(curves, name)[row]
            for name in ("requests_per_s", "ttft_p95_s", "ttft_mean_s", "tpot_p95_s", "tpot_mean_s")
        )
    )


def _first_crossing(curves: Curves, in_flight: np.ndarray, slo: SloTarget) -> _Found:
    """(requests/s, in-flight, binding) where a limit is first crossed; None if already at 1."""
    over_ttft = curves.ttft_p95_s > slo.ttft_p95_s
    over_tpot = curves.tpot_p95_s > slo.tpot_p95_s
    violated = over_ttft | over_tpot
    if violated[0]:
        return None
    throughput = curves.requests_per_s
    if not violated.any():
        return float(throughput[-1]), float(in_flight[-1]), "measured range"
    j = int(np.argmax(violated))
    fractions = {}
    for limit, values, bound in (
        ("ttft", curves.ttft_p95_s, slo.ttft_p95_s),
        ("tpot", curves.tpot_p95_s, slo.tpot_p95_s),
    ):
        if values[j] > bound:
            fractions[limit] = (bound - values[j - 1]) / (values[j] - values[j - 1])
    binding = min(fractions, key=lambda limit: fractions[limit])
    f = fractions[binding]
    return (
        float(throughput[j - 1] + f * (throughput[j] - throughput[j - 1])),
        float(in_flight[j - 1] + f * (in_flight[j] - in_flight[j - 1])),
        binding,
    )


def _round(value: float) -> float:
    digits = MIX_ROUNDING_DIGITS - 1 - int(math.floor(math.log10(abs(value))))
    return round(value, digits)
