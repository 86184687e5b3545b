"""How far an SLO-capacity answer may be off: its range, from the model's own leave-one-mix-out
errors, and the rule for mixes far beyond what was measured.

**Errors.** For each measured mix m the serving model is refitted without m's rows (started
from the full fit's parameters, so it costs a fraction of a fit) and asked for the SLO
capacity at m; ``e_m = ln(model ÷ measured knee)`` at the asked SLO (skipped where either side
finds the SLO unreachable). Computed once per table (the refits) and per SLO (the errors).

**Range at a mix x.** Each side is a split-conformal bound on the table's own errors, pooled
with the errors nearest x. Over-statements ``o_m = max(e_m, 0)`` bound how far the answer may
stand above the knee, under-statements ``u_m = max(−e_m, 0)`` how far below; each side takes
the larger of

- the k-th smallest of its n scores over every measured mix, k = ⌈(n + 1)(1 − ALPHA / 2)⌉
  capped at n (ALPHA = 0.1, split between the two sides: with fewer than 19 mixes, the
  largest — a table of six mixes cannot support a tighter 90 % bound), and
- the largest of its scores at the NEAREST measured mixes to x (distance in log prompt and
  log completion tokens), so a table of many mixes keeps a local bad patch,

call them O and U, and

    low  = value × exp(−(O + FLOOR) × (1 + beyond / ln 2))
    high = value × exp((U + FLOOR) × (1 + beyond / ln 2))

where FLOOR (5 %) covers the knee's own measurement error and ``beyond`` is the log distance
of x outside the measured box (0 inside it): the range widens by its own size for each
doubling beyond the measured range. (The nearest three alone held the measured knee in 89 % of
the public tables' held-out cases; a model that over-states one mix by 50 % is not known to
be within 10 % at another because that one lies further away.) A table of fewer than three
mixes has no errors to learn from: the range is ×/÷ 2 (DEFAULT_LOG_ERROR) around the answer.
``high`` stays under the physical ceiling. A measured mix's answer is its measured knee:
low = high = the knee.

**Far beyond.** A mix whose prompt or completion tokens lie more than FAR_FACTOR (4×) outside
the measured range of that count is refused unless ``allow_extrapolation`` is given
(:class:`capacity.errors.ExtrapolationError` naming the measured range); a plan sizes such an
hour at the nearest mix inside that limit, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from capacity.errors import ExtrapolationError, SloUnreachableError
from capacity.measured.loadtest import make_table

# The model, its SLO and its answers (capacity.measured.slo's SloModel, SloTarget and
# SloCapacity; that module imports this one)
SloModel = Any
SloTarget = Any
SloCapacity = Any

NEAREST = 3
ALPHA = 0.1  # the range misses the knee in at most this share of cases, half on each side
FLOOR = math.log(1.05)
DEFAULT_LOG_ERROR = math.log(2.0)
FAR_FACTOR = 4.0


@dataclass(frozen=True)
class MixError:
    """The held-out model's log error of the SLO capacity at one measured mix."""

    prompt: float
    completion: float
    log_error: float


def box(model: SloModel) -> tuple[float, float, float, float]:
    """The measured range: (prompt min, prompt max, completion min, completion max)."""
    mixes = np.array(model.table.mixes())
    return (
        float(mixes[:, 0].min()),
        float(mixes[:, 0].max()),
        float(mixes[:, 1].min()),
        float(mixes[:, 1].max()),
    )


def beyond(model: SloModel, prompt: float, completion: float) -> float:
    """Log distance of the mix outside the measured box (0 inside), the larger of the two."""
    p_min, p_max, c_min, c_max = box(model)
    return max(
        math.log(max(p_min / prompt, prompt / p_max, 1.0)),
        math.log(max(c_min / completion, completion / c_max, 1.0)),
    )


def is_far(model: SloModel, prompt: float, completion: float) -> bool:
    """More than FAR_FACTOR outside the measured range of prompt or completion tokens."""
    return beyond(model, prompt, completion) > math.log(FAR_FACTOR) + 1e-9


def within_reach(model: SloModel, prompts: np.ndarray, completions: np.ndarray) -> np.ndarray:
    """Each mix moved to the nearest one not far beyond the measured box: shape (2, n)."""
    p_min, p_max, c_min, c_max = box(model)
    return np.stack(
        [
            np.clip(prompts, max(p_min / FAR_FACTOR, 1.0), p_max * FAR_FACTOR),
            np.clip(completions, max(c_min / FAR_FACTOR, 1.0), c_max * FAR_FACTOR),
        ]
    )


def mix_errors(model: SloModel, slo: SloTarget) -> list[MixError]:
    """Leave-one-mix-out log errors of the SLO capacity at ``slo`` (see the module's doc)."""
    errors = []
    for (prompt, completion), held_out in model.held_out_models().items():
        try:
            measured = model.capacity(prompt_tokens=prompt, completion_tokens=completion, slo=slo)
            predicted = held_out.capacity(
                prompt_tokens=prompt,
                completion_tokens=completion,
                slo=slo,
                allow_extrapolation=True,
                with_range=False,
            )
        except SloUnreachableError:
            continue
        errors.append(
            MixError(
                prompt,
                completion,
                math.log(
                    predicted.requests_per_s_per_replica / measured.requests_per_s_per_replica
                ),
            )
        )
    return errors


def answer_range(
    errors: list[MixError], *, value: float, prompt: float, completion: float, beyond_log: float
) -> tuple[float, float]:
    """(low, high) requests/s of an answer ``value`` at the mix (see the module's doc)."""
    if errors:
        distance = [
            math.hypot(math.log(prompt / e.prompt), math.log(completion / e.completion))
            for e in errors
        ]
        logs = np.array([e.log_error for e in errors])
        nearest = logs[np.argsort(distance, kind="stable")[:NEAREST]]
        over = max(_conformal(np.maximum(logs, 0.0)), float(np.max(nearest)), 0.0)
        under = max(_conformal(np.maximum(-logs, 0.0)), float(-np.min(nearest)), 0.0)
    else:
        over = under = DEFAULT_LOG_ERROR
    widen = 1.0 + beyond_log / math.log(2.0)
    return value * math.exp(-(over + FLOOR) * widen), value * math.exp((under + FLOOR) * widen)


def _conformal(scores: np.ndarray) -> float:
    """The k-th smallest of n scores, k = ⌈(n + 1)(1 − ALPHA / 2)⌉ capped at n: a bound a new
    score exceeds with chance at most ALPHA / 2 when scores are exchangeable (at most
    1 / (n + 1) when capped)."""
    n = len(scores)
    k = min(math.ceil((n + 1) * (1 - ALPHA / 2) - 1e-9), n)
    return float(np.sort(scores)[k - 1])


def far_error(model: SloModel, prompt: float, completion: float) -> ExtrapolationError:
    p_min, p_max, c_min, c_max = box(model)
    return ExtrapolationError(
        f"mix {prompt:g} prompt / {completion:g} completion tokens is more than "
        f"{FAR_FACTOR:g}x beyond the measured range (prompt {p_min:g}–{p_max:g}, completion "
        f"{c_min:g}–{c_max:g} tokens); measure it, or allow extrapolation to get the model's "
        "answer with its wide range"
    )


def held_out_models(
    model: SloModel, fit_slo_model: Callable[..., SloModel]
) -> dict[tuple[float, float], SloModel]:
    """The model refitted (by ``fit_slo_model``) without each measured mix (none for fewer
    than three mixes)."""
    mixes = model.table.mixes()
    if len(mixes) < 3:
        return {}
    frame, meta = model.table.frame, model.table.meta()
    prompts = frame["prompt_tokens"].to_numpy(dtype=float)
    completions = frame["completion_tokens"].to_numpy(dtype=float)
    held_out = {}
    for prompt, completion in mixes:
        # the table's rows less one whole mix are still valid: no need to check them again
        kept = frame[(prompts != prompt) | (completions != completion)]
        table = make_table(kept, **meta)
        held_out[(prompt, completion)] = fit_slo_model(
            table,
            gpus_per_replica=model.gpus_per_replica,
            ceilings=model.ceilings,
            start=model.serving,
        )
    return held_out


def ranged(model: SloModel, answer: SloCapacity, slo: SloTarget) -> SloCapacity:
    """``answer`` with its range (and, extrapolated, the measured range in its note)."""
    if slo not in model.errors_by_slo:
        model.errors_by_slo[slo] = mix_errors(model, slo)
    prompt, completion = answer.prompt_tokens, answer.completion_tokens
    outside = beyond(model, prompt, completion)
    low, high = answer_range(
        model.errors_by_slo[slo],
        value=answer.requests_per_s_per_replica,
        prompt=prompt,
        completion=completion,
        beyond_log=outside,
    )
    high = max(min(high, model.ceilings.requests_per_s(prompt, completion)), low)
    note = answer.note
    if outside > 0:
        p_min, p_max, c_min, c_max = box(model)
        note += (
            f"; outside the measured range (prompt {p_min:g}–{p_max:g}, completion "
            f"{c_min:g}–{c_max:g} tokens): the range is wide"
        )
    return replace(
        answer,
        requests_per_s_per_replica_low=min(low, answer.requests_per_s_per_replica),
        requests_per_s_per_replica_high=max(high, answer.requests_per_s_per_replica),
        note=note,
    )
