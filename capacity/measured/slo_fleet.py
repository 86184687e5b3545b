"""SLO capacity that learns from the running fleet: production hours folded into a lab answer.

A production hour served ``L`` requests/s per replica at a mix, with p95 TTFT and TPOT as
served. Near the answer's mix (prompt and completion tokens per request each within
``MIX_FACTOR`` of it) and younger than ``MAX_AGE_HOURS``, it is evidence of the kind a
measured row is, read the same way :func:`capacity.measured.loadtest.measured_knee` reads a
table: hours sorted by load are scanned from the lowest; the first that broke either limit ends
the scan.

- **Bracketed** (hours within the SLO below the first that broke it): the production knee lies
  between the highest such hour ``M`` and the breaking one ``U``, read by linear interpolation
  of the binding latency, as a measured knee is. It is the answer; the range is ``[M, U]``.
- **Only within the SLO** (the fleet never reached the limit): the capacity is at least the
  highest load observed, ``M``. The answer is the lab's, raised to ``M`` when the lab said
  less; an hour that did not push latency to the limit cannot show where the knee is, so
  low-load hours never raise the answer above what they observed. The range's low edge is
  raised to ``M``.
- **Only breaking it** (even the lowest observed load broke the SLO): the capacity is below
  that load ``U``; the answer is the lab's, lowered to ``U ÷ s`` when the lab said more (``s``:
  how far the binding p95 was over its limit, > 1). The range's high edge is at most ``U``.
  Given the lab's model, an answer below what each latency, convex in load, allows under the
  hours is raised to the earlier limit's floor
  (:func:`capacity.measured.slo_fleet_bounds.knee_at_least`).

Given the lab's model, the lab's answer is first lowered where production ran slower than the
model expects at the hours' loads (:func:`slower_than_the_lab`; when every hour met the SLO, at
the highest judged one alone, the nearest the knee). Answers never exceed the
replica's physical ceiling. ``production_hours`` counts the hours near
the mix that were used.

The weighting: every hour near the mix in the window counts alike, until the fleet changes.
When ``SHIFT_COUNT`` of the newest ``SHIFT_HOURS`` hours the model judges served a p95 over
``SHIFT_FACTOR`` times what the older judged hours did at their load (served ÷ the model's
expected p95, the older hours' ratios read at the same load — so a lab off at the mix from the
start, or off more at high load than at low, is not a change), the hours before the oldest of
those no longer count (:func:`since_the_change`): a fleet 30 % slower since a deploy is read
from the hours since, not diluted by two weeks of hours before it. A change is looked for only
where there are ``SHIFT_HOURS`` older judged hours to compare with, and only at loads within
theirs.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from capacity._words import count
from capacity.errors import SloUnreachableError
from capacity.measured.production_hour import ProductionHour
from capacity.measured.slo import SloCapacity, SloModel, SloTarget
from capacity.measured.slo_fleet_bounds import KneeFloor, knee_at_least

MIX_FACTOR = 1.5
MAX_AGE_HOURS = 14 * 24.0
JUDGED_SHARE = 0.8
SLOWER_BY = 1.1
RATIO_STEP = 0.02
SHIFT_HOURS = 6
SHIFT_COUNT = 3
SHIFT_FACTOR = 1.2
SHIFT_MARGIN = 1.1

_Expected = tuple[float, float] | None

EXPECTED_CACHE_SIZE = 50_000
# what each fitted model expects at each (load, prompt, completion), for as long as the model
# lives (keyed by the model object: a re-fitted table is a new model)
_expected: weakref.WeakKeyDictionary[Any, dict[tuple[float, float, float], _Expected]] = (
    weakref.WeakKeyDictionary()
)
_expected_lock = threading.Lock()


def near_hours(
    hours: Sequence[ProductionHour],
    *,
    prompt_tokens: float,
    completion_tokens: float,
    mix_factor: float = MIX_FACTOR,
    max_age_hours: float = MAX_AGE_HOURS,
) -> list[ProductionHour]:
    """The hours near the mix (each token count within ``mix_factor``) and young enough."""
    limit = math.log(mix_factor) + 1e-12
    return [
        hour
        for hour in hours
        if hour.age_hours <= max_age_hours
        and abs(math.log(hour.prompt_tokens / prompt_tokens)) <= limit
        and abs(math.log(hour.completion_tokens / completion_tokens)) <= limit
    ]


def with_production(
    answer: SloCapacity,
    hours: Sequence[ProductionHour],
    slo: SloTarget,
    *,
    ceiling_requests_per_s: float = math.inf,
    mix_factor: float = MIX_FACTOR,
    max_age_hours: float = MAX_AGE_HOURS,
    model: SloModel | None = None,
    expected: Mapping[ProductionHour, _Expected] | None = None,
) -> SloCapacity:
    """``answer`` (the lab's, at its mix) with the production hours near its mix folded in (see
    the module's doc); unchanged but for ``production_hours = 0`` when none is near. With the
    lab's ``model``, production slower than the model expects at the hours' loads lowers the
    lab's answer first (:func:`slower_than_the_lab`). ``expected``: :func:`expected_p95` of
    the model at each of ``hours``, when already read (a plan asks at many mixes)."""
    near = sorted(
        near_hours(
            hours,
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            mix_factor=mix_factor,
            max_age_hours=max_age_hours,
        ),
        key=lambda hour: hour.requests_per_s_per_replica,
    )
    if not near:
        return replace(answer, production_hours=0)
    changed = ""
    if model is not None:
        before = len(near)
        at = [expected[h] for h in near] if expected is not None else expected_p95(model, near)
        near, at = since_the_change(near, at)
        if len(near) < before:
            changed = f"; the fleet changed: {count(before - len(near), 'older hour')} left out"
    broke = next((i for i, hour in enumerate(near) if hour.over(slo) > 1.0), None)
    lab = answer
    if model is not None:
        judged = [(h, e) for h, e in zip(near, at, strict=True) if e]
        if broke is None and judged:  # the highest hour the model judges: nearest the knee
            judged = judged[-1:]
        lab = slower_than_the_lab(
            answer, [h for h, _ in judged], slo, model, expected=[e for _, e in judged]
        )
    if broke is None:
        learned = _at_least(lab, near[-1])
    elif broke == 0:
        learned = _below(lab, near[0], slo)
        if model is not None:
            floor = knee_at_least(near, slo, model, answer.prompt_tokens, answer.completion_tokens)
            learned = _raised_below(learned, floor, near[0], slo)
    else:
        learned = _bracketed(lab, near[broke - 1], near[broke], slo)
    value = min(learned.requests_per_s_per_replica, ceiling_requests_per_s)
    if value < learned.requests_per_s_per_replica:
        learned = replace(learned, binding="physics")
    low = min(learned.requests_per_s_per_replica_low, value)
    high = min(max(learned.requests_per_s_per_replica_high, value), ceiling_requests_per_s)
    scale = value / answer.requests_per_s_per_replica
    return replace(
        learned,
        requests_per_s_per_replica=value,
        tokens_per_s_per_replica=answer.tokens_per_s_per_replica * scale,
        tokens_per_s_per_gpu=answer.tokens_per_s_per_gpu * scale,
        requests_per_s_per_replica_low=low,
        requests_per_s_per_replica_high=max(high, value),
        concurrency=None if scale != 1.0 else answer.concurrency,
        production_hours=len(near),
        note=f"{learned.note} ({count(len(near), 'production hour')} near this mix{changed})",
    )


def since_the_change(
    near: Sequence[ProductionHour], expected: Sequence[_Expected]
) -> tuple[list[ProductionHour], list[_Expected]]:
    """The hours (and the model's expectations at them, one per hour) since the fleet last
    changed, in their order: all of them unless ``SHIFT_COUNT`` of the newest ``SHIFT_HOURS``
    judged hours ran over ``SHIFT_FACTOR`` times slower than the older judged hours did at
    their load (served ÷ expected p95, the older hours' read linearly in log load; a newest
    hour outside the older hours' loads, by more than ``SHIFT_MARGIN``, is not compared); then
    those no older than the oldest such hour. No change without ``SHIFT_HOURS`` older judged
    hours."""
    judged = sorted(
        ((h, e) for h, e in zip(near, expected, strict=True) if e), key=lambda p: p[0].age_hours
    )
    ratios = np.array([max(h.ttft_p95_s / e[0], h.tpot_p95_s / e[1]) for h, e in judged])
    loads = np.log([max(h.requests_per_s_per_replica, 1e-12) for h, _ in judged])
    if len(ratios) < 2 * SHIFT_HOURS:
        return list(near), list(expected)
    newest, old_loads = loads[:SHIFT_HOURS], loads[SHIFT_HOURS:]
    order = np.argsort(old_loads, kind="stable")
    base = np.interp(newest, old_loads[order], ratios[SHIFT_HOURS:][order])
    margin = math.log(SHIFT_MARGIN)
    inside = (newest >= old_loads.min() - margin) & (newest <= old_loads.max() + margin)
    slow = np.flatnonzero(inside & (ratios[:SHIFT_HOURS] > SHIFT_FACTOR * base)).tolist()
    if len(slow) < SHIFT_COUNT:
        return list(near), list(expected)
    since = judged[slow[-1]][0].age_hours
    kept = [i for i, hour in enumerate(near) if hour.age_hours <= since]
    return [near[i] for i in kept], [expected[i] for i in kept]


def slower_than_the_lab(
    answer: SloCapacity,
    near: Sequence[ProductionHour],
    slo: SloTarget,
    model: SloModel,
    *,
    expected: Sequence[_Expected] | None = None,
) -> SloCapacity:
    """The lab's answer lowered when production ran slower than the lab's model expects: the
    median of served ÷ expected p95 over the hours the model judges, per limit; above
    ``SLOWER_BY`` the model's capacity at the SLO tightened by that factor (a latency curve
    scaled up by r crosses a limit where the model's own crosses the limit ÷ r; r rounded up
    to ``RATIO_STEP``). Never raises.
    ``expected``: :func:`expected_p95` at ``near`` when already read."""
    if expected is None:
        expected = expected_p95(model, near)
    pairs = [(h, e) for h, e in zip(near, expected, strict=True) if e]
    if not pairs:
        return answer
    ratios = [float(np.median([h.ttft_p95_s / e[0] for h, e in pairs]))]
    ratios.append(float(np.median([h.tpot_p95_s / e[1] for h, e in pairs])))
    if max(ratios) <= SLOWER_BY:
        return answer
    # in steps of RATIO_STEP, rounded up: a median that moves by a hair from one hour to the
    # next reuses the model's answer at the tightened SLO (each new SLO builds an envelope)
    ratios = [math.ceil(ratio / RATIO_STEP - 1e-9) * RATIO_STEP for ratio in ratios]
    tighter = SloTarget(slo.ttft_p95_s / max(ratios[0], 1.0), slo.tpot_p95_s / max(ratios[1], 1.0))
    try:
        corrected = model.capacity(
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            slo=tighter,
            allow_extrapolation=True,
            with_range=False,
        ).requests_per_s_per_replica
    except SloUnreachableError:
        return answer
    if corrected >= answer.requests_per_s_per_replica:
        return answer
    return replace(
        answer,
        requests_per_s_per_replica=corrected,
        requests_per_s_per_replica_low=min(answer.requests_per_s_per_replica_low, corrected),
        note=f"{answer.note}; lowered to {corrected:.3g}: production's p95 TTFT and TPOT ran "
        f"{ratios[0]:.2f}x and {ratios[1]:.2f}x what the lab's model expects at their loads",
    )


def _at_least(answer: SloCapacity, highest: ProductionHour) -> SloCapacity:
    load = highest.requests_per_s_per_replica
    if answer.requests_per_s_per_replica >= load:
        return replace(
            answer,
            requests_per_s_per_replica_low=max(answer.requests_per_s_per_replica_low, load),
            note=f"{answer.note}; production met the SLO up to {load:.3g} requests/s per replica",
        )
    return replace(
        answer,
        requests_per_s_per_replica=load,
        requests_per_s_per_replica_low=load,
        requests_per_s_per_replica_high=max(answer.requests_per_s_per_replica_high, load),
        binding="measured range",
        note=f"raised to what production sustained within the SLO ({load:.3g} requests/s per "
        f"replica, above the lab's {answer.requests_per_s_per_replica:.3g}): the capacity is at "
        "least this",
    )


def _below(answer: SloCapacity, lowest: ProductionHour, slo: SloTarget) -> SloCapacity:
    load, over = lowest.requests_per_s_per_replica, lowest.over(slo)
    binding = _binding(lowest, slo)
    if answer.requests_per_s_per_replica <= load / over:
        return replace(
            answer,
            requests_per_s_per_replica_high=min(answer.requests_per_s_per_replica_high, load),
            note=f"{answer.note}; production broke the SLO at {load:.3g} requests/s per replica",
        )
    value = load / over
    return replace(
        answer,
        requests_per_s_per_replica=value,
        requests_per_s_per_replica_low=min(answer.requests_per_s_per_replica_low, value),
        requests_per_s_per_replica_high=load,
        binding=binding,
        note=f"lowered: production broke the p95 {binding.upper()} limit at {load:.3g} "
        f"requests/s per replica ({over:.2f}x the limit), below the lab's "
        f"{answer.requests_per_s_per_replica:.3g}",
    )


def _raised_below(
    answer: SloCapacity, floor: KneeFloor | None, lowest: ProductionHour, slo: SloTarget
) -> SloCapacity:
    """``answer`` raised to ``floor``, the least the knee below the lowest hour that broke the
    SLO can be (:func:`capacity.measured.slo_fleet_bounds.knee_at_least`), when it says less."""
    if floor is None or floor.requests_per_s_per_replica <= answer.requests_per_s_per_replica:
        return answer
    value, broke = floor.requests_per_s_per_replica, floor.broke
    limit = f"{floor.binding}_p95_s"
    return replace(
        answer,
        requests_per_s_per_replica=value,
        requests_per_s_per_replica_high=lowest.requests_per_s_per_replica,
        binding=floor.binding,
        note=f"raised: production broke the p95 {floor.binding.upper()} limit at "
        f"{broke.requests_per_s_per_replica:.3g} requests/s per replica "
        f"({getattr(broke, limit) / getattr(slo, limit):.2f}x the limit), and a latency convex "
        f"in load up to that puts the knee at {value:.3g} or beyond (the lab said "
        f"{answer.requests_per_s_per_replica:.3g})",
    )


def _bracketed(
    answer: SloCapacity, met: ProductionHour, broke: ProductionHour, slo: SloTarget
) -> SloCapacity:
    fractions = {
        limit: (target - low) / (high - low)
        for limit, low, high, target in (
            ("ttft", met.ttft_p95_s, broke.ttft_p95_s, slo.ttft_p95_s),
            ("tpot", met.tpot_p95_s, broke.tpot_p95_s, slo.tpot_p95_s),
        )
        if high > target
    }
    binding = min(fractions, key=lambda limit: fractions[limit])
    low_load, high_load = met.requests_per_s_per_replica, broke.requests_per_s_per_replica
    knee = low_load + fractions[binding] * (high_load - low_load)
    return replace(
        answer,
        requests_per_s_per_replica=knee,
        requests_per_s_per_replica_low=low_load,
        requests_per_s_per_replica_high=high_load,
        binding=binding,
        note=f"production knee: the fleet met the SLO at {low_load:.3g} and broke the p95 "
        f"{binding.upper()} limit at {high_load:.3g} requests/s per replica (the lab said "
        f"{answer.requests_per_s_per_replica:.3g})",
    )


def _binding(hour: ProductionHour, slo: SloTarget) -> str:
    ttft_over = hour.ttft_p95_s / slo.ttft_p95_s
    return "ttft" if ttft_over >= hour.tpot_p95_s / slo.tpot_p95_s else "tpot"


def expected_p95(
    model: SloModel, hours: Sequence[ProductionHour]
) -> list[tuple[float, float] | None]:
    """The lab model's p95 TTFT and TPOT (seconds) at each hour's load and mix: its latency
    curves read at the hour's requests/s per replica (linear between the grid's loads). None
    for an hour above ``JUDGED_SHARE`` of the highest rate the model gives a replica at that
    mix: near saturation latency moves with a hair of load, and no expectation holds there.

    Kept per model and (load, mix): a plan refreshed every hour reads the model's curves for
    the new hours only, not for two weeks of them again."""
    keys = [
        (hour.requests_per_s_per_replica, hour.prompt_tokens, hour.completion_tokens)
        for hour in hours
    ]
    with _expected_lock:
        known = _expected.setdefault(model, {})
        if len(known) > EXPECTED_CACHE_SIZE:
            known.clear()
        found = {key: known[key] for key in keys if key in known}
    missing = sorted(set(keys) - set(found))
    if missing:
        read = dict(zip(missing, _expected_p95(model, missing), strict=True))
        with _expected_lock:
            known.update(read)
        found |= read
    return [found[key] for key in keys]


def _expected_p95(
    model: SloModel, keys: Sequence[tuple[float, float, float]]
) -> list[tuple[float, float] | None]:
    prompts = np.array([key[1] for key in keys])
    completions = np.array([key[2] for key in keys])
    expected: list[tuple[float, float] | None] = []
    # the model's curves over its own load grid (the family's internals: one mix per row)
    for (load, _, _), curves in zip(keys, model.curves_at(prompts, completions), strict=True):
        rate = np.maximum.accumulate(curves.requests_per_s)
        if load > JUDGED_SHARE * rate[-1]:
            expected.append(None)
            continue
        expected.append(
            (
                float(np.interp(load, rate, curves.ttft_p95_s)),
                float(np.interp(load, rate, curves.tpot_p95_s)),
            )
        )
    return expected
