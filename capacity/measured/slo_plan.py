"""A GPU plan sized to a latency SLO: each hour's per-GPU throughput is the SLO capacity at
that hour's prompt/completion mix (:class:`capacity.measured.slo.SloModel`), then the user's
formula.

The formula is unchanged — gpus = ceil(tokens/s ÷ (per-GPU tokens/s × utilization target) ×
safety factor) — only the per-GPU tokens/s becomes the measured capacity within the SLO at
the hour's own mix, so a mix that turns decode-heavy at equal requests grows the plan by the
ratio of the SLO capacities (requests/s per replica), not by the ratio of token counts.

Given the running fleet's production hours, each hour's capacity is the answer of
:func:`capacity.measured.slo_fleet.with_production` at its mix — the SLO capacity endpoint's
rule — so a plan hour at a mix near production hours sizes on what production showed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from capacity._words import count
from capacity.errors import InvalidParameterError, SloUnreachableError
from capacity.measured import slo_range
from capacity.measured.slo import SloCapacity, SloModel, SloTarget
from capacity.measured.slo_fleet import (
    MAX_AGE_HOURS,
    MIX_FACTOR,
    ProductionHour,
    expected_p95,
    with_production,
)
from capacity.sizing.conversion import GPUPlan, plan_gpus

#: Columns an SLO plan adds to the plan frame, per hour.
SLO_PLAN_COLUMNS = (
    "prompt_tokens_per_request",
    "completion_tokens_per_request",
    "requests_per_s_per_replica",
    "per_gpu_tokens_per_s",
    "basis",
    "mix_adjusted",
    "production_hours",
)


def slo_capacity_by_hour(
    model: SloModel,
    slo: SloTarget,
    *,
    prompt_tokens: np.ndarray,
    completion_tokens: np.ndarray,
    hours: pd.Series | None = None,
) -> np.ndarray:
    """SLO capacity in tokens/s per GPU at each hour's mix (tokens per request, arrays of one
    shape). A mix the SLO cannot be met at raises :class:`SloUnreachableError` naming the first
    such hour (when ``hours`` is given) and the limit it misses."""
    prompts, completions = model.sane_mix(
        np.asarray(prompt_tokens, dtype=float), np.asarray(completion_tokens, dtype=float)
    )
    per_gpu = model.tokens_per_s_per_gpu(prompts, completions, slo)
    missed = np.flatnonzero(per_gpu <= 0)
    if missed.size:
        first = int(missed[0])
        try:
            model.capacity(
                prompt_tokens=float(prompts[first]),
                completion_tokens=float(completions[first]),
                slo=slo,
                allow_extrapolation=True,  # the hour's figure came from the model: say why it is 0
                with_range=False,
            )
        except SloUnreachableError as exc:
            if hours is None and per_gpu.size == 1:
                raise  # one mix, no hours: the mix says it all
            when = f"hour {first}"
            if hours is not None:
                when = f"hour {pd.Timestamp(hours.iloc[first]):%Y-%m-%d %H:00} UTC"
            raise SloUnreachableError(
                f"{when} ({missed.size} of {per_gpu.size} hours): {exc}",
                limit=exc.limit,
                value_s=exc.value_s,
                limit_s=exc.limit_s,
            ) from exc
    return per_gpu


def plan_gpus_at_slo(
    forecast: pd.DataFrame,
    *,
    model: SloModel,
    slo: SloTarget,
    prompt_tokens: np.ndarray,
    completion_tokens: np.ndarray,
    of_requests: bool,
    band: str = "yhat",
    production: Sequence[ProductionHour] = (),
    max_age_hours: float = MAX_AGE_HOURS,
    **plan_options: Any,
) -> GPUPlan:
    """:func:`capacity.plan_gpus` with each hour's per-GPU tokens/s the SLO capacity at that
    hour's mix (``prompt_tokens`` and ``completion_tokens`` per request, one per forecast row).

    ``of_requests``: the forecast counts requests (each hour carries prompt + completion
    tokens per request of its own mix); otherwise it counts tokens. ``plan_options`` are
    plan_gpus' other keyword arguments (utilization target, safety factor, schedule rules,
    peak factors, gpus_per_replica …). The frame gains SLO_PLAN_COLUMNS: an hour at an
    unmeasured mix is sized at the low edge of its answer's range (``basis`` interpolated or
    extrapolated), and an hour whose mix is below one token, beyond the context or more than
    4× beyond the measured range is sized at the nearest mix that is not (``mix_adjusted``;
    the mix columns show the mix sized) — unless production hours are near its mix and the
    lab's model meets the SLO there.

    ``production``: the running fleet's hours (ages in hours before the plan is made). Each
    hour's answer is the lab's with the hours near its mix and younger than ``max_age_hours``
    folded in (:func:`capacity.measured.slo_fleet.with_production`); the hour keeps the lab's
    hedge (an unmeasured mix sized at the same share of the learned answer as its low edge was
    of the lab's) unless production narrowed the range above it (then at the learned range's
    low edge: what production sustained), and ``production_hours`` counts the hours its
    capacity rests on.
    """
    prompts = np.asarray(prompt_tokens, dtype=float)
    completions = np.asarray(completion_tokens, dtype=float)
    if prompts.shape != (len(forecast),) or completions.shape != (len(forecast),):
        raise InvalidParameterError("an SLO plan needs one prompt/completion mix per forecast hour")
    if "tokens_per_request" in plan_options:
        raise InvalidParameterError("an SLO plan takes tokens per request from each hour's mix")
    if not (np.isfinite(prompts).all() and np.isfinite(completions).all()):
        raise InvalidParameterError("an SLO plan needs a finite prompt/completion mix every hour")
    # an hour's odd mix (below one token, beyond the context, far beyond the measured range)
    # is sized at the nearest sane one rather than refusing the plan
    asked = np.stack([prompts, completions])
    prompts, completions = model.sane_mix(np.maximum(prompts, 0.0), np.maximum(completions, 0.0))
    learned = _Learned(model, slo, production, max_age_hours)
    # a mix production served near is sized as asked (its hours are the evidence there) where
    # the lab's model meets the SLO at it
    seen = learned.seen(prompts, completions)
    if seen.any():
        seen &= model.tokens_per_s_per_gpu(prompts, completions, slo) > 0
    reach_prompts, reach_completions = slo_range.within_reach(model, prompts, completions)
    prompts = np.where(seen, prompts, reach_prompts)
    completions = np.where(seen, completions, reach_completions)
    adjusted = (np.abs(np.stack([prompts, completions]) - asked) > 1e-9 * asked).any(axis=0)
    hours = pd.to_datetime(forecast["ds"], utc=True).reset_index(drop=True)
    per_gpu = slo_capacity_by_hour(
        model, slo, prompt_tokens=prompts, completion_tokens=completions, hours=hours
    )
    per_gpu, basis, near = _at_low_edge(learned, prompts, completions, per_gpu)
    sized = forecast
    if of_requests and band in forecast.columns:
        sized = forecast.copy()
        values = pd.to_numeric(sized[band], errors="coerce").to_numpy(dtype=float)
        sized[band] = values * (prompts + completions)
    plan = plan_gpus(sized, per_gpu_tokens_per_s=per_gpu, band=band, **plan_options)
    frame = plan.frame.copy()
    frame["prompt_tokens_per_request"] = prompts
    frame["completion_tokens_per_request"] = completions
    frame["requests_per_s_per_replica"] = per_gpu * plan.gpus_per_replica / (prompts + completions)
    frame["per_gpu_tokens_per_s"] = per_gpu
    frame["basis"] = basis
    frame["mix_adjusted"] = adjusted
    frame["production_hours"] = near
    return replace(plan, frame=frame)


class _Learned:
    """The lab's answer and the learned one at each distinct mix of a plan, read once per mix
    (a plan's 24 hours, a replay's many, share a few mixes)."""

    def __init__(
        self,
        model: SloModel,
        slo: SloTarget,
        production: Sequence[ProductionHour],
        max_age_hours: float,
    ) -> None:
        self.model, self.slo, self.max_age_hours = model, slo, max_age_hours
        self.production = [hour for hour in production if hour.age_hours <= max_age_hours]
        # what the lab's model expects at each hour depends on the hour alone: read once
        self.expected = dict(
            zip(self.production, expected_p95(model, self.production), strict=True)
        )
        self._answers: dict[tuple[float, float], tuple[SloCapacity, SloCapacity]] = {}

    def seen(self, prompts: np.ndarray, completions: np.ndarray) -> np.ndarray:
        """Per mix: whether any production hour is near it (each token count within
        ``MIX_FACTOR``)."""
        if not self.production:
            return np.zeros(len(prompts), dtype=bool)
        limit = math.log(MIX_FACTOR) + 1e-12
        served = np.log([[h.prompt_tokens, h.completion_tokens] for h in self.production])
        asked = np.log(np.stack([prompts, completions], axis=1))
        apart = np.abs(asked[:, None, :] - served[None, :, :]).max(axis=2)
        return np.asarray((apart <= limit).any(axis=1))

    def at(self, prompt: float, completion: float) -> tuple[SloCapacity, SloCapacity]:
        """(the lab's answer, the learned one) at the mix (the lab's when no hour is given)."""
        key = (prompt, completion)
        if key not in self._answers:
            lab = self.model.capacity(
                prompt_tokens=prompt,
                completion_tokens=completion,
                slo=self.slo,
                allow_extrapolation=True,
            )
            learned = lab
            if self.production:
                learned = with_production(
                    lab,
                    self.production,
                    self.slo,
                    ceiling_requests_per_s=self.model.ceilings.requests_per_s(prompt, completion),
                    max_age_hours=self.max_age_hours,
                    model=self.model,
                    expected=self.expected,
                )
            self._answers[key] = (lab, learned)
        return self._answers[key]


def sized_tokens_per_s_per_gpu(
    model: SloModel, slo: SloTarget, prompt_tokens: np.ndarray, completion_tokens: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What a plan without production hours sizes each mix at, by :func:`plan_gpus_at_slo`'s
    rule: the mix made servable and brought within reach of the measured range, then the
    per-GPU tokens/s at the low edge of its answer's range (a measured mix: its knee).
    Returns (prompt tokens, completion tokens, per-GPU tokens/s) of the mixes sized; 0.0
    tokens/s where the SLO cannot be met. The plan replay and band auto's calibration size
    their past plans with it, so they replay the rule the live plan uses."""
    prompts, completions = model.sane_mix(
        np.maximum(np.asarray(prompt_tokens, dtype=float), 0.0),
        np.maximum(np.asarray(completion_tokens, dtype=float), 0.0),
    )
    prompts, completions = slo_range.within_reach(model, prompts, completions)
    per_gpu = np.asarray(model.tokens_per_s_per_gpu(prompts, completions, slo), dtype=float)
    met = per_gpu > 0
    sized = per_gpu.copy()
    if met.any():
        learned = _Learned(model, slo, (), MAX_AGE_HOURS)
        sized[met], _, _ = _at_low_edge(learned, prompts[met], completions[met], per_gpu[met])
    return prompts, completions, sized


def _at_low_edge(
    learned: _Learned, prompts: np.ndarray, completions: np.ndarray, per_gpu: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each hour's per-GPU tokens/s at the low edge of its answer's range (a measured mix: its
    knee) scaled by what production changed in the answer, the hour's basis (measured,
    interpolated or extrapolated) and the production hours its capacity rests on."""
    low = per_gpu.copy()
    basis = np.empty(len(per_gpu), dtype=object)
    near = np.zeros(len(per_gpu), dtype=int)
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        answer, fleet = learned.at(float(prompt), float(completion))
        basis[i] = answer.basis
        near[i] = fleet.production_hours
        if answer.requests_per_s_per_replica <= 0:
            continue
        share = 1.0
        if answer.basis != "measured":
            share = answer.requests_per_s_per_replica_low / answer.requests_per_s_per_replica
        sized = fleet.requests_per_s_per_replica * share
        if fleet.production_hours:  # a range production narrowed: never below its low edge
            sized = max(sized, min(fleet.requests_per_s_per_replica_low, sized / share))
        low[i] = per_gpu[i] * sized / answer.requests_per_s_per_replica
    return low, basis, near


def slo_plan_notes(frame: pd.DataFrame) -> list[str]:
    """What an SLO plan's frame says an operator should know: hours sized at an extrapolated
    mix, and hours whose mix was adjusted to a sane one."""
    notes = []
    total = len(frame)
    extrapolated = frame[frame["basis"] == "extrapolated"]
    if len(extrapolated):
        first = extrapolated.iloc[0]
        when = f"{pd.Timestamp(first['hour']):%Y-%m-%d %H:00}"
        notes.append(
            f"{count(len(extrapolated), 'hour')} of {total} sized at a mix outside the load "
            f"test's measured range (extrapolated; first {when} UTC at "
            f"{first['prompt_tokens_per_request']:.4g} prompt / "
            f"{first['completion_tokens_per_request']:.4g} completion tokens), at the low edge "
            "of the model's range: measure such a mix to rely on it"
        )
    adjusted = frame[frame["mix_adjusted"].astype(bool)]
    if len(adjusted):
        notes.append(
            f"{count(len(adjusted), 'hour')} of {total} had a forecast mix below one token, "
            "beyond the model's context or more than 4x beyond the measured range (first "
            f"{pd.Timestamp(adjusted.iloc[0]['hour']):%Y-%m-%d %H:00} UTC), sized at the "
            "nearest mix that is not"
        )
    return notes
