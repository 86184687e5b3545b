"""The core conversion: an hourly load forecast becomes GPUs and replicas per hour.

Sizing order: forecast band → × peak factor (busy minutes of the hour) → the user's formula
(÷ per-GPU tokens/s × utilization target, × safety factor, ceil, whole replicas) → the
schedule rules (scale up one cold start ahead, scale down only after the hold, min/max).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from capacity._checks import require_fraction, require_int, require_positive
from capacity.errors import InvalidParameterError
from capacity.sizing.peaks import PeakFactors
from capacity.sizing.rounding import round_up_counts, round_up_to_multiple
from capacity.sizing.schedule import Schedule, ScheduleRules, execute_schedule

#: Forecast columns a plan can be sized on: the point forecast, the upper ends of the 80 % and
#: 95 % intervals, and the stored quantiles 0.5 … 0.99.
PLAN_BANDS = ("yhat", "hi_80", "hi_95", "q50", "q60", "q70", "q80", "q90", "q95", "q99")
FORECAST_UNITS = ("per_hour", "per_s")
PLAN_COLUMNS = (
    "hour",
    "load_tokens_per_s",
    "peak_factor",
    "sized_tokens_per_s",
    "raw_gpus",
    "gpus",
    "replicas",
    "short_gpus",
    "expected_utilization",
    "peak_utilization",
)


@dataclass(frozen=True)
class GPUPlan:
    """An hourly GPU plan: what the formula asks for and the schedule a fleet executes.

    frame has one row per forecast hour (columns PLAN_COLUMNS): ``hour`` (UTC),
    ``load_tokens_per_s`` (the forecast band's mean load), ``peak_factor`` and
    ``sized_tokens_per_s`` (load x factor, what the GPUs must carry in the busy minutes),
    ``raw_gpus`` (the formula, unconstrained), ``gpus`` / ``replicas`` (the executed schedule),
    ``short_gpus`` (raw GPUs the quota cut), ``expected_utilization`` (mean load / capacity) and
    ``peak_utilization`` (sized load / capacity). gpu_hours are those of the executed timeline,
    cold-start lead included; peak_gpus is the executed peak.
    """

    frame: pd.DataFrame
    peak_gpus: int
    gpu_hours: float
    band: str
    per_gpu_tokens_per_s: float
    gpus_per_replica: int
    rules: ScheduleRules = ScheduleRules()
    peak_factors: PeakFactors = PeakFactors.none()
    raw_gpu_hours: float = 0.0

    @property
    def peak_replicas(self) -> int:
        return self.peak_gpus // self.gpus_per_replica

    @property
    def short_hours(self) -> pd.DataFrame:
        """Hours the quota leaves short: hour, raw_gpus, gpus, short_gpus."""
        frame = self.frame
        return frame.loc[frame["short_gpus"] > 0, ["hour", "raw_gpus", "gpus", "short_gpus"]]

    def schedule(self) -> Schedule:
        """The executed schedule again (for its timeline)."""
        return execute_schedule(
            self.frame["raw_gpus"].to_numpy(),
            gpus_per_replica=self.gpus_per_replica,
            rules=self.rules,
        )


def gpus_for_load(
    tokens_per_s: np.ndarray | float,
    per_gpu_tokens_per_s: float | np.ndarray,
    *,
    utilization_target: float = 0.75,
    safety_factor: float = 1.2,
    min_gpus: int = 1,
    gpus_per_replica: int = 1,
) -> np.ndarray:
    """GPUs for each load value (tokens/s): the user's formula, rounded up to whole replicas.

    gpus = max(min_gpus, ceil(tokens_per_s / (per_gpu_tokens_per_s x utilization_target)
    x safety_factor)), then rounded up to a multiple of gpus_per_replica. Returns int64 array.
    min_gpus is at least 1: a fleet that serves a model never has zero GPUs.
    per_gpu_tokens_per_s may be one figure or one per load value (an SLO plan sizes each hour
    with the capacity at that hour's prompt/completion mix).
    """
    per_gpu = _per_gpu_capacity(per_gpu_tokens_per_s)
    target = require_fraction("utilization_target", utilization_target)
    safety = require_positive("safety_factor", safety_factor)
    if safety < 1:
        raise InvalidParameterError(
            f"safety_factor must be >= 1 (it adds headroom), got {safety_factor!r}"
        )
    floor = require_int("min_gpus", min_gpus, minimum=1)
    per_replica = require_int("gpus_per_replica", gpus_per_replica, minimum=1)
    load = np.atleast_1d(np.asarray(tokens_per_s, dtype=float))
    if np.isnan(load).any():
        raise InvalidParameterError("load (tokens/s) contains NaN; fill or drop those hours first")
    if np.isinf(load).any() or (load < 0).any():
        raise InvalidParameterError("load (tokens/s) must be finite and >= 0")
    # A tiny rate times a small target can underflow to 0 and an overflow gives inf: both
    # become inf here, which round_up_counts rejects with a message naming the parameters.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        raw = round_up_counts(load / (per_gpu * target) * safety)
    return round_up_to_multiple(np.maximum(raw, floor), per_replica)


def _per_gpu_capacity(value: float | np.ndarray) -> float | np.ndarray:
    if np.ndim(value) == 0:
        return require_positive("per_gpu_tokens_per_s", value)  # type: ignore[arg-type]
    figures = np.asarray(value, dtype=float)
    if not (np.isfinite(figures).all() and (figures > 0).all()):
        raise InvalidParameterError("per_gpu_tokens_per_s must be finite and > 0 in every hour")
    return figures


def _load_tokens_per_s(
    forecast: pd.DataFrame, band: str, tokens_per_request: float | None, forecast_unit: str
) -> np.ndarray:
    if band not in PLAN_BANDS:
        raise InvalidParameterError(f"band must be one of {PLAN_BANDS}, got {band!r}")
    if forecast_unit not in FORECAST_UNITS:
        raise InvalidParameterError(
            f"forecast_unit must be one of {FORECAST_UNITS}, got {forecast_unit!r}"
        )
    missing = {"ds", band} - set(forecast.columns)
    if missing:
        raise InvalidParameterError(f"forecast is missing column(s) {sorted(missing)}")
    values = pd.to_numeric(forecast[band], errors="coerce").to_numpy(dtype=float)
    if np.isnan(values).any():
        raise InvalidParameterError(f"forecast column {band!r} has NaN or non-numeric values")
    # A point forecast may dip slightly below zero; negative load means no load.
    values = np.clip(values, 0.0, None)
    if forecast_unit == "per_hour":
        values = values / 3600.0
    if tokens_per_request is not None:
        values = values * require_positive("tokens_per_request", tokens_per_request)
    return values


def plan_gpus(
    forecast: pd.DataFrame,
    *,
    per_gpu_tokens_per_s: float | np.ndarray,
    band: str = "yhat",
    utilization_target: float = 0.75,
    safety_factor: float = 1.2,
    min_gpus: int = 1,
    max_gpus: int | None = None,
    cold_start_s: int = 300,
    scale_down_hold_s: int = 1800,
    gpus_per_replica: int = 1,
    tokens_per_request: float | None = None,
    forecast_unit: str = "per_hour",
    peak_factors: PeakFactors | None = None,
) -> GPUPlan:
    """Turn an hourly forecast frame (ds, yhat, lo_80, hi_80, lo_95, hi_95) into a GPU plan.

    The ``band`` column (one of ``PLAN_BANDS``) drives the plan. Without
    tokens_per_request the forecast is of tokens; with it, the forecast is of requests and is
    multiplied by tokens_per_request (prompt + completion tokens per request). forecast_unit
    says how the forecast counts: "per_hour" (counts in the hour, as stored in observations;
    divided by 3600) or "per_s" (rates). peak_factors (default: none, factor 1) multiply each
    hour's load before the conversion. The schedule rules (min_gpus >= 1, max_gpus,
    cold_start_s, scale_down_hold_s; see capacity.sizing.schedule) turn the formula's ``raw_gpus``
    into the executed ``gpus``; gpu_hours are the executed timeline's. per_gpu_tokens_per_s
    is one figure, or one per forecast hour (the SLO capacity at each hour's mix; the plan's
    ``per_gpu_tokens_per_s`` is then the figure of the hour with the highest sized load).
    """
    rules = ScheduleRules(
        cold_start_s=cold_start_s,
        scale_down_hold_s=scale_down_hold_s,
        min_gpus=min_gpus,
        max_gpus=max_gpus,
    )
    load = _load_tokens_per_s(forecast, band, tokens_per_request, forecast_unit)
    if len(load) == 0:
        raise InvalidParameterError("forecast has no rows")
    hours = pd.to_datetime(forecast["ds"], utc=True).reset_index(drop=True)
    _require_consecutive(hours)
    factors = peak_factors or PeakFactors.none()
    factor = factors.for_hours(hours)
    sized = load * factor
    per_gpu = _per_gpu_capacity(per_gpu_tokens_per_s)
    if np.ndim(per_gpu) and np.shape(per_gpu) != load.shape:
        raise InvalidParameterError("per_gpu_tokens_per_s needs one figure per forecast hour")
    raw = gpus_for_load(
        sized,
        per_gpu,
        utilization_target=utilization_target,
        safety_factor=safety_factor,
        min_gpus=min_gpus,
        gpus_per_replica=gpus_per_replica,
    )
    schedule = execute_schedule(raw, gpus_per_replica=gpus_per_replica, rules=rules)
    gpus = schedule.gpus
    capacity = gpus * per_gpu
    frame = pd.DataFrame(
        {
            "hour": hours,
            "load_tokens_per_s": load,
            "peak_factor": factor,
            "sized_tokens_per_s": sized,
            "raw_gpus": schedule.raw_gpus,
            "gpus": gpus,
            "replicas": gpus // int(gpus_per_replica),
            "short_gpus": schedule.short_gpus,
            "expected_utilization": np.divide(
                load, capacity, out=np.zeros_like(load), where=capacity > 0
            ),
            "peak_utilization": np.divide(
                sized, capacity, out=np.zeros_like(sized), where=capacity > 0
            ),
        }
    )
    return GPUPlan(
        frame=frame,
        peak_gpus=int(gpus.max()),
        gpu_hours=schedule.gpu_hours,
        band=band,
        per_gpu_tokens_per_s=float(
            per_gpu if np.ndim(per_gpu) == 0 else np.asarray(per_gpu)[int(np.argmax(sized))]
        ),
        gpus_per_replica=int(gpus_per_replica),
        rules=rules,
        peak_factors=factors,
        raw_gpu_hours=float(schedule.raw_gpus.sum()),
    )


def _require_consecutive(hours: pd.Series) -> None:
    steps = hours.diff().dropna()
    if (steps != pd.Timedelta(hours=1)).any():
        raise InvalidParameterError(
            "forecast hours must be consecutive whole hours (the schedule rules run hour by hour)"
        )


def tokens_per_request_from_history(
    requests: pd.Series | np.ndarray,
    tokens: pd.Series | np.ndarray,
) -> float:
    """Measured tokens per request: total tokens / total requests over the hours where both exist.

    Summing before dividing weights busy hours more than quiet ones, which is what sizing needs.
    """
    req = np.asarray(requests, dtype=float)
    tok = np.asarray(tokens, dtype=float)
    if req.shape != tok.shape:
        raise InvalidParameterError("requests and tokens must have the same length")
    valid = ~(np.isnan(req) | np.isnan(tok))
    total_requests = req[valid].sum()
    if total_requests <= 0:
        raise InvalidParameterError("history has no requests to measure tokens per request from")
    return float(tok[valid].sum() / total_requests)
