"""The hourly plans gpucast would have served at past hours: the forecast in force at each
moment (:func:`hourly_forecasts`), what turns its rows into GPUs (:class:`Sizing`, at the SLO
capacity of the mix known then: :func:`sized_at_known_mix`) and the decisions the live plan's
steps make of them (:func:`band_decisions`), with the reactive trigger the deployment runs
beside them (:func:`backstop`).

Band auto's calibration (:mod:`app.plans.calibration`) and the plan replay
(:mod:`app.plans.replay`) both build their past plans here, so they size exactly as the live
plan does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

import capacity
from app.plans.params import PlanParams
from app.plans.sizing import ProfileFigures
from app.plans.slo_sizing import SloSizing, known_mix_capacity

#: The hourly refresh runs a few minutes past the hour (``gpucast schedule --hourly-minute``):
#: a plan built from the hours before ``t`` is served from ``t + REFRESH_LAG``.
REFRESH_LAG = pd.Timedelta(minutes=5)


@dataclass(frozen=True)
class FittedState:
    """A nightly fit's refresh state and the moment it became available."""

    available_at: pd.Timestamp
    state: dict[str, Any]


def hourly_forecasts(
    fits: Sequence[FittedState],
    y: pd.Series,
    moments: pd.DatetimeIndex,
    *,
    horizon: int = 24,
) -> dict[str, np.ndarray]:
    """The refreshed forecast in force at every moment (hour start): from the newest fit
    available by then (the earliest fit for moments before any), on the hours of ``y`` before
    the moment. Returns column arrays (n moments x horizon) as forecasting.refresh_many."""
    from forecasting.refresh import refresh_many

    if not fits:
        raise ValueError("hourly_forecasts needs at least one fitted state")
    ordered = sorted(fits, key=lambda f: f.available_at)
    at = np.array([f.available_at.value for f in ordered])
    owner = np.clip(np.searchsorted(at, moments.asi8, side="right") - 1, 0, None)
    out: dict[str, np.ndarray] = {}
    for index in np.unique(owner):
        rows = np.flatnonzero(owner == index)
        part = refresh_many(ordered[index].state, y, moments[rows], horizon=horizon)
        for key, values in part.items():
            if key not in out:
                shape = (len(moments), *values.shape[1:])
                out[key] = np.empty(shape, dtype=values.dtype)
            out[key][rows] = values
    return out


def reactive_spec(params: PlanParams, target: float) -> capacity.ReactiveSpec:
    """A reactive trigger at ``target`` as the deployment's HPA reads it: with the tolerance
    the ScaledObject writes for both triggers (``params.held_hpa_tolerance``: 0 by default)."""
    return capacity.ReactiveSpec(target_utilization=target, tolerance=params.held_hpa_tolerance)


def backstop(params: PlanParams) -> capacity.ReactiveSpec | None:
    """The reactive trigger a plan with these parameters is deployed with (KEDA's second
    trigger, on the observed load at the plan's utilization target, with the HPA's tolerance
    the plan trigger has), or None."""
    if not params.reactive_backstop:
        return None
    return reactive_spec(params, params.utilization_target)


@dataclass(frozen=True)
class Sizing:
    """What turns a forecast row into executed GPUs: the profile, the plan parameters, the
    tokens per request (None when the forecast is of tokens), the peak factors and, for a plan
    at a latency SLO, the per-GPU tokens/s within the SLO at the mix known when the plan was
    made (None: the profile's one number)."""

    profile: ProfileFigures
    params: PlanParams
    tokens_per_request: float | None
    peak_factors: capacity.PeakFactors
    per_gpu_tokens_per_s: float | None = None

    @property
    def capacity_per_gpu(self) -> float:
        """The per-GPU tokens/s the plan divides by."""
        if self.per_gpu_tokens_per_s is None:
            return self.profile.tokens_per_s_per_gpu
        return self.per_gpu_tokens_per_s

    def factors(self, first_hour: pd.Timestamp, hours: int) -> np.ndarray:
        """The peak factor of each of ``hours`` hours from ``first_hour`` (by UTC hour)."""
        by_hour = np.asarray(self.peak_factors.by_hour, dtype=float)
        return by_hour[(first_hour.hour + np.arange(hours)) % 24]


def band_decisions(
    forecasts: dict[str, np.ndarray],
    moments: pd.DatetimeIndex,
    band: str,
    sizing: Sizing | Sequence[Sizing],
    *,
    lag: pd.Timedelta = REFRESH_LAG,
    headroom: float = 1.0,
) -> list[capacity.PlanDecision]:
    """One plan decision per moment from the ``band`` column, served from moment + lag: the
    band x ``headroom`` x tokens per request x the peak factors, the user's formula (on each
    sizing's per-GPU tokens/s), the schedule rules — the live plan's steps (capacity.plan_gpus),
    on all moments at once. ``sizing`` may differ per moment (a sequence as long as
    ``moments``)."""
    values = np.asarray(forecasts[band], dtype=float)
    rows = sizing if isinstance(sizing, Sequence) else [sizing] * len(moments)
    horizon = values.shape[1]
    scale = np.array([(r.tokens_per_request or 1.0) / 3600.0 for r in rows])
    factors = np.stack([r.factors(m, horizon) for r, m in zip(rows, moments, strict=True)])
    sized = values * scale[:, None] * factors * headroom
    per_gpu = np.repeat([r.capacity_per_gpu for r in rows], horizon)
    first = rows[0]
    raw = capacity.gpus_for_load(
        sized.ravel(),
        per_gpu,
        utilization_target=first.params.utilization_target,
        safety_factor=first.params.sizing_safety_factor,
        min_gpus=first.params.min_gpus,
        gpus_per_replica=first.profile.gpus_per_replica,
    ).reshape(sized.shape)
    # the load each hour was sized for, in GPUs at 100 % of the line (the expected fleet's base)
    load_gpus = sized / per_gpu.reshape(sized.shape)
    rules = first.params.rules()
    decisions = []
    for row, moment in enumerate(moments):
        schedule = capacity.execute_schedule(
            raw[row], gpus_per_replica=first.profile.gpus_per_replica, rules=rules
        )
        decisions.append(
            capacity.PlanDecision(
                at=moment + lag, start=moment, gpus=schedule.gpus, load_gpus=load_gpus[row]
            )
        )
    return decisions


def sized_at_known_mix(
    sizings: Sequence[Sizing],
    moments: pd.DatetimeIndex,
    sizing: SloSizing,
    history: pd.DataFrame,
    *,
    of_requests: bool,
) -> tuple[list[Sizing], list[str]]:
    """Each moment's sizing at the SLO capacity of the mix known then (known_mix_capacity):
    a requests forecast carries that mix's tokens per request. A moment with no known mix, or
    one the SLO cannot be met at, keeps the profile's one number; the notes say how many."""
    known = known_mix_capacity(sizing, history, moments)
    out, unknown, unreachable = [], 0, 0
    for row, base in enumerate(sizings):
        per_gpu = float(known.per_gpu_tokens_per_s[row])
        if not np.isfinite(per_gpu):
            if np.isfinite(known.prompt_tokens[row]):
                unreachable += 1
            else:
                unknown += 1
            out.append(base)
            continue
        per_request = float(known.tokens_per_request[row]) if of_requests else None
        out.append(replace(base, per_gpu_tokens_per_s=per_gpu, tokens_per_request=per_request))
    notes = []
    if unknown:
        notes.append(
            f"{unknown} of {len(out)} hourly plans were made before any stored hour held a "
            "prompt/completion mix: sized at the profile's tokens/s per GPU"
        )
    if unreachable:
        notes.append(
            f"at the mix known for {unreachable} of {len(out)} hourly plans the SLO cannot be "
            "met at any load: those plans are sized at the profile's tokens/s per GPU"
        )
    return out, notes


__all__ = [
    "REFRESH_LAG",
    "FittedState",
    "Sizing",
    "backstop",
    "band_decisions",
    "hourly_forecasts",
    "reactive_spec",
    "sized_at_known_mix",
]
