"""A fitted cost model of one replica serving requests of P prompt and C completion tokens.

The model (docs/capacity.md, "The SLO capacity model") predicts, for a mix (P, C) and a number
of requests in flight N, the request throughput and the mean and p95 TTFT and TPOT:

- **Prefill** of one request costs ``prefill(P) = c1·P + c2·P²`` seconds of the replica (the
  quadratic term is attention over the prompt); an idle replica answers after
  ``t0 + prefill(P)``.
- **Decode**: one step for a batch of n running requests at mean context
  ``ctx = P + C/2`` takes ``batch(n) + (a1 + g·(n − 1))·ctx``; ``batch(n)`` is a monotone
  piecewise-linear curve in log n (fitted: kernels and scheduling make it anything but linear).
- **Interference**: prefill work takes the share ``ρ = X·prefill(P)`` of the replica; decoding
  requests wait for it, so TPOT = step × (1 + k·ρ/(1 − ρ)) (k separately for mean and p95).
- **TTFT under load**: requests arriving together are prefilled together; the p95 waits for
  ``θ·(n − 1)`` other prefills, but no longer than a decode phase
  ``(C − 1)·TPOT`` (by then earlier requests return and the arrivals spread out):
  a smooth minimum of the two.
- **KV cache**: at most ``K / (P + C)`` requests run at once; the rest queue, which adds
  ``(N − n)/X`` to TTFT (closed loop) and caps the throughput.
- **Little's law** closes the loop: ``X = n / (TTFT_mean + (C − 1)·TPOT_mean)``.

Parameters are fitted per load-test table by robust least squares on log errors of the
throughput and the latencies, with weak priors so that a table with one mix still fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from capacity.measured.loadtest import LoadTestTable

BATCH_KNOTS = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0])
SCALARS = (
    "t0_s",
    "c1",
    "c2",
    "a1",
    "g",
    "k_mean",
    "k_p95",
    "tpot_p95_ratio",
    "burst_p95",
    "burst_mean",
    "kv_tokens",
    "context_odds",
)
_FIXED_POINT_STEPS = 40
_KV_SOFTNESS = 8.0
_BURST_SOFTNESS = 2.0


@dataclass(frozen=True)
class Curves:
    """Model outputs on arrays of (P, C, N): throughput (req/s) and latencies (s)."""

    requests_per_s: np.ndarray
    ttft_p95_s: np.ndarray
    ttft_mean_s: np.ndarray
    tpot_p95_s: np.ndarray
    tpot_mean_s: np.ndarray

    def row(self, row: int) -> Curves:
        """The curves of one mix of a batch computed together."""
        return Curves(
            self.requests_per_s[row],
            self.ttft_p95_s[row],
            self.ttft_mean_s[row],
            self.tpot_p95_s[row],
            self.tpot_mean_s[row],
        )


@dataclass(frozen=True)
class ServingModel:
    """Fitted parameters (``values`` in the order SCALARS, then the batch curve)."""

    values: tuple[float, ...]

    @property
    def params(self) -> dict[str, float]:
        return dict(zip(SCALARS, self.values[: len(SCALARS)], strict=True))

    def curves(self, prompt: np.ndarray, completion: np.ndarray, in_flight: np.ndarray) -> Curves:
        return _forward(np.asarray(self.values), prompt, completion, in_flight)


def _softmin(x: np.ndarray, y: np.ndarray, k: float) -> np.ndarray:
    """A smooth minimum, (x^-k + y^-k)^(-1/k); k = 2 written out because it is the hot path."""
    if k == 2.0:
        return x * y / np.hypot(x, y)
    return (x**-k + y**-k) ** (-1.0 / k)


def _batch_step_s(n: np.ndarray, base_s: float, increments: np.ndarray) -> np.ndarray:
    log_knots = np.log(BATCH_KNOTS)
    position = (np.log(np.maximum(n, 1.0))[..., None] - log_knots[:-1]) / np.diff(log_knots)
    return base_s + (np.clip(position, 0.0, 1.0) * increments).sum(axis=-1)


def _forward(
    values: np.ndarray, prompt: np.ndarray, completion: np.ndarray, in_flight: np.ndarray
) -> Curves:
    t0, c1, c2, a1, g, k_mean, k_p95, ratio, burst_p95, burst_mean, kv, odds = values[
        : len(SCALARS)
    ]
    base_s, increments = values[len(SCALARS)], values[len(SCALARS) + 1 :]
    prefill = c1 * prompt + c2 * prompt * prompt
    idle_ttft = t0 + prefill
    running = np.minimum(_softmin(in_flight, kv / (prompt + completion), _KV_SOFTNESS), in_flight)
    context = prompt + odds / (1.0 + odds) * completion
    step = _batch_step_s(running, base_s, increments) + (a1 + g * (running - 1)) * context
    decode_steps = np.maximum(completion - 1, 0.0)
    throughput = running / (idle_ttft + decode_steps * step)
    for _ in range(_FIXED_POINT_STEPS):
        tpot_mean, ttft_mean = _latencies(
            throughput, prefill, step, k_mean, burst_mean, running, idle_ttft, decode_steps, None
        )
        throughput = 0.5 * throughput + 0.5 * running / (ttft_mean + decode_steps * tpot_mean)
    tpot_mean, ttft_mean = _latencies(
        throughput, prefill, step, k_mean, burst_mean, running, idle_ttft, decode_steps, None
    )
    tpot_p95, ttft_p95 = _latencies(
        throughput,
        prefill,
        step * ratio,
        k_p95,
        burst_p95,
        running,
        idle_ttft,
        decode_steps,
        tpot_mean,
    )
    queue_s = np.maximum(in_flight - running, 0.0) / throughput
    return Curves(throughput, ttft_p95 + queue_s, ttft_mean + queue_s, tpot_p95, tpot_mean)


def _latencies(
    throughput: np.ndarray,
    prefill: np.ndarray,
    step: np.ndarray,
    k: float,
    burst: float,
    running: np.ndarray,
    idle_ttft: np.ndarray,
    decode_steps: np.ndarray,
    tpot_mean: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    busy = np.minimum(throughput * prefill, 0.98)
    tpot = step * (1.0 + k * busy / (1.0 - busy))
    decode_phase_s = decode_steps * (tpot if tpot_mean is None else tpot_mean) + 1e-9
    wait_s = _softmin(burst * (running - 1) * prefill + 1e-12, decode_phase_s, _BURST_SOFTNESS)
    return tpot, idle_ttft + wait_s


@dataclass(frozen=True)
class Observations:
    """Measured rows to fit: mix, requests in flight, throughput and latencies (NaN = absent)."""

    prompt: np.ndarray
    completion: np.ndarray
    in_flight: np.ndarray
    requests_per_s: np.ndarray
    ttft_p95_s: np.ndarray
    tpot_p95_s: np.ndarray
    ttft_mean_s: np.ndarray
    tpot_mean_s: np.ndarray


def fit_serving_model(obs: Observations, *, start: ServingModel | None = None) -> ServingModel:
    """Robust least squares on log errors of throughput and latencies, plus weak priors.

    ``start``: parameters to start from (a fit of nearly the same rows converges in a fraction
    of the steps); default: values from the lightest-load rows."""
    # scipy.optimize takes about a second to import, so importing capacity does not pay for it.
    from scipy.optimize import least_squares

    start_values, prior_centre, prior_sd = _start_and_priors(obs)

    def residuals(log_values: np.ndarray) -> np.ndarray:
        curves = _forward(np.exp(log_values), obs.prompt, obs.completion, obs.in_flight)
        parts = [
            _log_error(curves.requests_per_s, obs.requests_per_s),
            _log_error(curves.ttft_p95_s, obs.ttft_p95_s),
            _log_error(curves.tpot_p95_s, obs.tpot_p95_s),
            _log_error(curves.ttft_mean_s, obs.ttft_mean_s),
            _log_error(curves.tpot_mean_s, obs.tpot_mean_s),
            (log_values - prior_centre) / prior_sd * _PRIOR_WEIGHT,
        ]
        return np.concatenate(parts)

    first = np.log(start_values if start is None else np.asarray(start.values))
    solution = least_squares(residuals, first, loss="soft_l1", f_scale=0.2, max_nfev=4000)
    return ServingModel(tuple(float(v) for v in np.exp(solution.x)))


_PRIOR_WEIGHT = 0.2


def _log_error(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    present = ~np.isnan(measured)
    return np.log(np.maximum(predicted[present], 1e-12) / measured[present])


def _start_and_priors(obs: Observations) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Starting values from the lightest-load rows; priors centred on typical ratios."""
    light = obs.in_flight <= np.min(obs.in_flight) * 1.5
    ttft0, tpot0 = np.nanmedian(obs.ttft_p95_s[light]), np.nanmedian(obs.tpot_p95_s[light])
    prompt0 = float(np.median(obs.prompt[light]))
    # Prefill of one prompt token costs a few hundred times less than one decode step.
    c1 = min(tpot0 / 250.0, 0.8 * ttft0 / prompt0)
    t0 = max(ttft0 - c1 * prompt0, 0.05 * ttft0)
    base = 0.9 * tpot0
    scalars = {
        "t0_s": (t0, 2.0),
        "c1": (c1, 1.5),
        "c2": (c1 / 2e4, 2.0),
        "a1": (base / 2e4, 2.0),
        "g": (base / 1e6, 2.5),
        "k_mean": (0.5, 1.0),
        "k_p95": (0.3, 1.5),
        "tpot_p95_ratio": (1.0, 0.2),
        "burst_p95": (1.0, 1.0),
        "burst_mean": (0.7, 1.0),
        "kv_tokens": (1e6, 3.0),
        "context_odds": (1.0, 1.5),
    }
    increments = [(0.05 * base, 2.0)] * (len(BATCH_KNOTS) - 1)
    pairs = [scalars[name] for name in SCALARS] + [(base, 0.5)] + increments
    centre = np.array([v for v, _ in pairs])
    return centre, np.log(centre), np.array([sd for _, sd in pairs])


def first_crossing(
    curves: Curves, in_flight: np.ndarray, ttft_limit_s: float, tpot_limit_s: float
) -> tuple[float, float, str] | None:
    """(requests/s, in-flight, binding) where a limit is first crossed; None if already at 1."""
    over_ttft = curves.ttft_p95_s > ttft_limit_s
    over_tpot = curves.tpot_p95_s > tpot_limit_s
    violated = over_ttft | over_tpot
    if violated[0]:
        return None
    # the capacity is the highest throughput at any load up to the crossing (a load past a
    # dip in the curve is not needed), so a looser limit never gives less
    throughput = np.maximum.accumulate(curves.requests_per_s)
    if not violated.any():
        return float(throughput[-1]), float(in_flight[-1]), "measured range"
    j = int(np.argmax(violated))
    fractions = {}
    for limit, values, bound in (
        ("ttft", curves.ttft_p95_s, ttft_limit_s),
        ("tpot", curves.tpot_p95_s, tpot_limit_s),
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


#: The load levels per mix the fit takes: a sweep with more is averaged down to this many
#: (consecutive levels together), so the fit's cost does not grow with raw rows.
MAX_FIT_LEVELS_PER_MIX = 32


def reduced(obs: Observations) -> Observations:
    """The observations with at most :data:`MAX_FIT_LEVELS_PER_MIX` load levels per mix: the
    levels of a mix measured at more are split, in load order, into that many runs of
    consecutive levels, each averaged (a latency absent in every row of a run stays absent).
    A mix with fewer levels is kept as it is."""
    mixes, mix_index = np.unique(
        np.stack([obs.prompt, obs.completion], axis=1), axis=0, return_inverse=True
    )
    mix_index = mix_index.ravel()
    sizes = np.bincount(mix_index, minlength=len(mixes))
    if sizes.max(initial=0) <= MAX_FIT_LEVELS_PER_MIX:
        return obs
    order = np.lexsort((obs.in_flight, mix_index))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - starts[mix_index[order]]
    size = sizes[mix_index]
    level = np.where(size > MAX_FIT_LEVELS_PER_MIX, rank * MAX_FIT_LEVELS_PER_MIX // size, rank)
    groups, group = np.unique(mix_index * MAX_FIT_LEVELS_PER_MIX + level, return_inverse=True)
    group = group.ravel()

    def mean(values: np.ndarray) -> np.ndarray:
        present = ~np.isnan(values)
        total = np.bincount(group, weights=np.where(present, values, 0.0), minlength=len(groups))
        count = np.bincount(group, weights=present.astype(float), minlength=len(groups))
        out = np.full(len(groups), np.nan)
        np.divide(total, count, out=out, where=count > 0)
        return out

    return Observations(*(mean(getattr(obs, name)) for name in Observations.__dataclass_fields__))


def observations_of(table: LoadTestTable) -> Observations:
    """The rows of a load-test table as the fit takes them (requests in flight by Little's law
    for open-loop rows)."""
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
