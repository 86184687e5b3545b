"""The surface through the measured knees: next to a measured mix the model's answer meets
that mix's knee, without a jump.

At each measured mix m (and SLO) the model's own answer differs from the measured knee by
``r_m = knee ÷ model``. Any other mix x is answered ``model(x) × exp(Σ w_m ln r_m ÷ max(1, Σ w_m))``
with ``w_m = exp(−d² ÷ 2ℓ²)``, d the distance of x from m in log prompt and log completion
tokens and ℓ = ANCHOR_LENGTH: within 1 % of m the weight is 1 and the answer is the knee
times the model's own change over that 1 %; at 2× from m the weight is 0.14, and the measured
mixes of a table (2× to 10× apart) barely touch each other. The factor is smooth in the mix,
so the surface stays continuous.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from capacity.errors import SloUnreachableError

SloModel = Any  # capacity.measured.slo's SloModel and SloTarget (that module imports this one)
SloTarget = Any

ANCHOR_LENGTH = 0.35


def measured_knees(model: SloModel, slo: SloTarget) -> list[tuple[float, float, float]]:
    """(prompt, completion, requests/s) of each measured mix whose knee meets the SLO."""
    knees = []
    for prompt, completion in model.table.mixes():
        try:
            knee = model.capacity(prompt_tokens=prompt, completion_tokens=completion, slo=slo)
        except SloUnreachableError:
            continue
        if knee.requests_per_s_per_replica > 0:
            knees.append((prompt, completion, knee.requests_per_s_per_replica))
    return knees


def knee_log_ratios(model: SloModel, slo: SloTarget) -> list[tuple[float, float, float]]:
    """(prompt, completion, ln(knee ÷ model)) at each measured mix where both answer."""
    ratios = []
    for prompt, completion, knee in measured_knees(model, slo):
        found = model.modelled(np.array([prompt]), np.array([completion]), slo)[0]
        if found is None or found[0] <= 0:
            continue
        ratios.append((prompt, completion, math.log(knee / found[0])))
    return ratios


def anchor(model: SloModel, prompt: float, completion: float, slo: SloTarget) -> float:
    """The factor that carries the measured knees' misfit to the mix (1 far from them)."""
    if slo not in model.anchors_by_slo:
        model.anchors_by_slo[slo] = knee_log_ratios(model, slo)
    total = weights = 0.0
    for p, c, log_ratio in model.anchors_by_slo[slo]:
        distance2 = math.log(prompt / p) ** 2 + math.log(completion / c) ** 2
        weight = math.exp(-distance2 / (2.0 * ANCHOR_LENGTH**2))
        total += weight * log_ratio
        weights += weight
    return math.exp(total / max(1.0, weights))
