"""Carry the fitted model's misfit at measured mixes over to nearby mixes.

At every measured mix the model's log error of throughput, p95 TTFT and p95 TPOT is known as a
function of load. At another mix the model's curves are corrected by a weighted mean of those
errors (interpolated over log load), weighted by closeness in log prompt and log completion
tokens: ``w = exp(−d² / 2ℓ²)`` with ℓ = ln 4 (a mix within about 4× in both counts is near),
shrunk towards no correction by a prior weight of 0.5, so the correction fades out away from
the measurements and approaches the measured curve next to a measured mix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from capacity.measured.serving_model import Curves, Observations, ServingModel

LENGTH_SCALE = math.log(4.0)
PRIOR_WEIGHT = 0.5


@dataclass(frozen=True)
class MixResiduals:
    prompt: float
    completion: float
    log_in_flight: np.ndarray
    log_errors: np.ndarray  # shape (3, levels): throughput, p95 TTFT, p95 TPOT


@dataclass(frozen=True)
class ResidualCorrection:
    mixes: tuple[MixResiduals, ...]

    @classmethod
    def fit(cls, model: ServingModel, obs: Observations) -> ResidualCorrection:
        curves = model.curves(obs.prompt, obs.completion, obs.in_flight)
        mixes = []
        for prompt, completion in sorted(set(zip(obs.prompt, obs.completion, strict=True))):
            rows = np.flatnonzero((obs.prompt == prompt) & (obs.completion == completion))
            rows = rows[np.argsort(obs.in_flight[rows])]
            errors = np.array(
                [
                    np.log(obs.requests_per_s[rows] / curves.requests_per_s[rows]),
                    np.log(obs.ttft_p95_s[rows] / curves.ttft_p95_s[rows]),
                    np.log(obs.tpot_p95_s[rows] / curves.tpot_p95_s[rows]),
                ]
            )
            mixes.append(
                MixResiduals(
                    float(prompt),
                    float(completion),
                    np.log(obs.in_flight[rows]),
                    np.nan_to_num(errors),
                )
            )
        return cls(tuple(mixes))

    def apply(
        self, prompt: float, completion: float, in_flight: np.ndarray, curves: Curves
    ) -> Curves:
        """The curves at (prompt, completion) over ``in_flight``, corrected."""
        log_in_flight = np.log(in_flight)
        total = np.zeros((3, in_flight.size))
        weight_sum = 0.0
        for mix in self.mixes:
            distance2 = (
                math.log(prompt / mix.prompt) ** 2 + math.log(completion / mix.completion) ** 2
            )
            weight = math.exp(-distance2 / (2.0 * LENGTH_SCALE**2))
            weight_sum += weight
            for k in range(3):
                total[k] += weight * np.interp(log_in_flight, mix.log_in_flight, mix.log_errors[k])
        factor = np.exp(total / (PRIOR_WEIGHT + weight_sum))
        return Curves(
            requests_per_s=curves.requests_per_s * factor[0],
            ttft_p95_s=curves.ttft_p95_s * factor[1],
            ttft_mean_s=curves.ttft_mean_s,
            tpot_p95_s=curves.tpot_p95_s * factor[2],
            tpot_mean_s=curves.tpot_mean_s,
        )
