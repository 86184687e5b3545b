"""The SLO capacity made monotone and continuous: more prompt or completion tokens never give
more requests/s, a looser SLO never gives less, and the answer meets each measured knee
without a jump.

**The envelope.** The anchored model (:mod:`capacity.measured.slo_surface`) is evaluated on a
fixed grid, log-spaced by ENVELOPE_STEP in prompt and in completion tokens, from a quarter of
the smallest measured count (the reach of :mod:`capacity.measured.slo_range`) to the model's
context length (four times the largest measured count where the context is unknown). Each
grid value is replaced by the least value at the grid mixes with at most as many prompt AND
completion tokens where the model meets the SLO:

    E(p, c) = min { g(p', c') : p' ≤ p, c' ≤ c on the grid, g met }

the largest surface below the model that never rises with tokens (a grid mix with no such
mix below it takes the most any mix above it gives). A mix between grid points is read by
bilinear interpolation of log requests/s in log tokens (exact for a power law), which keeps
the order. Fewer tokens than the grid get its edge's answer (no credit for fewer tokens where
nothing was measured); more (only where the context is unknown, asked only with
``allow_extrapolation``) lose requests/s in proportion to the tokens beyond the edge.

**Met or not.** The SLO counts as met at a mix where the model meets it at the grid mix with
the next more tokens of both kinds or at one with more still (the model's "not met" with few
completion tokens comes from its load grid starting at one request in flight), so a mix up to
one grid step before the model stops meeting it counts as not met; and within KNEE_LENGTH of a
measured knee that meets it, or with fewer tokens than one.

**The knees.** Each measured knee k at mix m bounds the surface from both sides:

    lo(x) = max_m k · exp(−d₊² ÷ 2ℓ²)      hi(x) = min_m k · exp(d₋² ÷ 2ℓ²)

with d₊ (d₋) the log distance by which x has more (fewer) tokens than m, counted per count
and only where positive, and ℓ = KNEE_LENGTH. A mix with at most m's tokens sustains at
least k (lo = k there: the measurement lifts it), one with at least m's tokens at most k
(hi = k there: the measurement caps it), and both bounds relax smoothly away from m. The
answer is E clipped to [lo, hi]: at m it is k; within 1 % of m it is within 1 % of k.

Every part is non-increasing in both token counts, so the answer is too. Across SLOs: the
model's capacity is the highest throughput at any load up to the first that breaks a limit
(:func:`capacity.measured.serving_model.first_crossing`), which a looser limit can only
raise; the grid, the minimum and the knees' bounds keep that order wherever the anchored
model and the measured knees have it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from capacity.errors import SloUnreachableError
from capacity.measured import slo_range, slo_surface
from capacity.measured.loadtest import unreachable_error

# capacity.measured.slo's SloModel and SloTarget (that module imports this one)
SloModel = Any
SloTarget = Any

ENVELOPE_STEP = math.log(1.2)  # grid step: 20 % in prompt and in completion tokens
KNEE_LENGTH = 0.1  # log tokens; the knee's bounds relax to 61 % (165 %) at 10 % in both counts
_MAX_EXPONENT = 600.0
_TINY = 1e-300


@dataclass(frozen=True)
class Envelope:
    """The monotone surface of one model at one SLO (requests/s per replica)."""

    log_prompts: np.ndarray  # grid axes, log tokens
    log_completions: np.ndarray
    values: np.ndarray  # E on the grid
    reachable: np.ndarray  # the SLO can be met at the grid mix or one with more tokens
    knees: np.ndarray  # rows of (log prompt, log completion, requests/s)

    @cached_property
    def _log_values(self) -> np.ndarray:
        return np.log(np.maximum(self.values, _TINY))

    def at_least_edge(self, prompt: float, completion: float) -> tuple[float, float]:
        """The mix, with fewer tokens than the grid's lower edge raised to it."""
        return (
            max(prompt, math.exp(self.log_prompts[0])),
            max(completion, math.exp(self.log_completions[0])),
        )

    def grid_mix_above(self, prompt: float, completion: float) -> tuple[float, float]:
        """The grid mix with the next more (or as many) tokens of both kinds (beyond the grid's
        upper edge, the edge)."""
        i = _above(self.log_prompts, math.log(prompt))
        j = _above(self.log_completions, math.log(completion))
        return math.exp(self.log_prompts[i]), math.exp(self.log_completions[j])

    def reachable_at(self, prompt: float, completion: float) -> bool:
        """Whether the SLO can be met at a mix: where it can at :meth:`grid_mix_above` (the
        model meets it there or with more tokens), so a mix up to one grid step before the
        model stops meeting it already counts as not meeting it; and wherever a measured knee
        meets it with at least as many tokens, or with at most KNEE_LENGTH more in log tokens
        (the reach of the knee's own bound)."""
        lp, lc = math.log(prompt), math.log(completion)
        if len(self.knees) and np.any(_more(self.knees, lp, lc) <= KNEE_LENGTH**2):
            return True
        i = _above(self.log_prompts, lp)
        j = _above(self.log_completions, lc)
        return bool(self.reachable[i, j])

    def at(self, prompt: float, completion: float) -> float:
        """The answer at a mix the model finds the SLO reachable at."""
        lp, lc = math.log(prompt), math.log(completion)
        value = math.exp(
            _bilinear(self.log_prompts, self.log_completions, self._log_values, lp, lc)
        )
        # more tokens than the grid's upper edge: requests/s fall in proportion
        value *= math.exp(min(self.log_prompts[-1] - lp, 0.0))
        value *= math.exp(min(self.log_completions[-1] - lc, 0.0))
        if not len(self.knees):
            return value
        more = _more(self.knees, lp, lc)
        fewer = (
            np.maximum(self.knees[:, 0] - lp, 0.0) ** 2
            + np.maximum(self.knees[:, 1] - lc, 0.0) ** 2
        )
        scale = 2.0 * KNEE_LENGTH**2
        low = float(np.max(self.knees[:, 2] * np.exp(-more / scale)))
        high = float(np.min(self.knees[:, 2] * np.exp(np.minimum(fewer / scale, _MAX_EXPONENT))))
        return min(max(value, low), high)


def envelope(model: SloModel, slo: SloTarget) -> Envelope:
    """The model's envelope at ``slo`` (built once per model and SLO)."""
    if slo not in model.envelopes_by_slo:
        model.envelopes_by_slo[slo] = _build(model, slo)
    return model.envelopes_by_slo[slo]


def unreachable(
    model: SloModel, slo: SloTarget, mix: tuple[float, float], model_meets_it: bool
) -> SloUnreachableError:
    """The error for a mix :meth:`Envelope.reachable_at` says cannot meet the SLO, with the
    model's latencies at the lowest load where it misses: at the mix itself, or (where the
    model still meets it there) at the grid mix above, past which it never does."""
    prompt, completion = mix
    envelope_ = envelope(model, slo)
    how = f"{model._method(prompt, completion)} by the fitted model"
    at = envelope_.at_least_edge(prompt, completion)
    if model_meets_it:
        at = envelope_.grid_mix_above(prompt, completion)
        how += f" at {at[0]:.4g} prompt / {at[1]:.4g} completion tokens, a step on"
    curves = model.curves_at(np.array([at[0]]), np.array([at[1]]))[0]
    return unreachable_error(
        mix,
        float(curves.ttft_p95_s[0]),
        float(curves.tpot_p95_s[0]),
        slo.ttft_p95_s,
        slo.tpot_p95_s,
        how,
    )


def grid_axis(low: float, high: float) -> np.ndarray:
    """Log tokens from ``low`` to ``high``, both included, in steps of at most ENVELOPE_STEP."""
    low, high = math.log(low), math.log(high)
    high = max(high, low + ENVELOPE_STEP)
    points = max(int(math.ceil((high - low) / ENVELOPE_STEP - 1e-9)) + 1, 2)
    return np.linspace(low, high, points)


def _build(model: SloModel, slo: SloTarget) -> Envelope:
    p_min, p_max, c_min, c_max = slo_range.box(model)
    reach = slo_range.FAR_FACTOR
    # up to the context where it is known: every servable mix is read from the model's grid
    context = model.ceilings.context_tokens
    p_top = float(context) if context is not None else p_max * reach
    c_top = float(context) if context is not None else c_max * reach
    log_prompts = grid_axis(max(p_min / reach, 1.0), p_top)
    log_completions = grid_axis(max(c_min / reach, 1.0), c_top)
    prompts, completions = np.meshgrid(np.exp(log_prompts), np.exp(log_completions), indexing="ij")
    found = model.modelled(prompts.ravel(), completions.ravel(), slo)
    reached = np.array([f is not None for f in found]).reshape(prompts.shape)
    values = np.array(
        [
            math.inf if f is None else f[0] * slo_surface.anchor(model, p, c, slo)
            for f, p, c in zip(found, prompts.ravel(), completions.ravel(), strict=True)
        ]
    ).reshape(prompts.shape)
    values = _cumulative(np.minimum, values)
    # a grid mix with no reachable mix below it: the most any reachable mix above it gives
    finite = np.where(np.isfinite(values), values, 0.0)
    above = _cumulative(np.maximum, finite[::-1, ::-1])[::-1, ::-1]
    values = np.where(np.isfinite(values), values, above)
    # the SLO can be met wherever it can with at least as many tokens
    reachable = _cumulative(np.logical_or, reached[::-1, ::-1])[::-1, ::-1]
    return Envelope(log_prompts, log_completions, values, reachable, _knees(model, slo))


def _cumulative(ufunc: Any, values: np.ndarray) -> np.ndarray:
    """``ufunc`` accumulated over every grid mix with at most as many tokens of both kinds."""
    return ufunc.accumulate(ufunc.accumulate(values, axis=0), axis=1)


def _knees(model: SloModel, slo: SloTarget) -> np.ndarray:
    knees = slo_surface.measured_knees(model, slo)
    return np.array([(math.log(p), math.log(c), k) for p, c, k in knees]).reshape(-1, 3)


def _more(knees: np.ndarray, lp: float, lc: float) -> np.ndarray:
    """d₊² of each knee: the squared log tokens by which the mix has more than the knee."""
    return np.maximum(lp - knees[:, 0], 0.0) ** 2 + np.maximum(lc - knees[:, 1], 0.0) ** 2


def _above(axis: np.ndarray, value: float) -> int:
    """The index of the first grid point at or above ``value`` (the last beyond the grid)."""
    return min(int(np.searchsorted(axis, value - 1e-12, side="left")), len(axis) - 1)


def _bilinear(xs: np.ndarray, ys: np.ndarray, values: np.ndarray, x: float, y: float) -> float:
    """Bilinear interpolation on a grid, the point clamped to it."""
    x, y = min(max(x, xs[0]), xs[-1]), min(max(y, ys[0]), ys[-1])
    i = min(int(np.searchsorted(xs, x, side="right")) - 1, len(xs) - 2)
    j = min(int(np.searchsorted(ys, y, side="right")) - 1, len(ys) - 2)
    fx = (x - xs[i]) / (xs[i + 1] - xs[i])
    fy = (y - ys[j]) / (ys[j + 1] - ys[j])
    return float(
        (1 - fx) * (1 - fy) * values[i, j]
        + fx * (1 - fy) * values[i + 1, j]
        + (1 - fx) * fy * values[i, j + 1]
        + fx * fy * values[i + 1, j + 1]
    )
