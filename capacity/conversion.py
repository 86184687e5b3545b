"""The core conversion: an hourly load forecast becomes GPUs and replicas per hour."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from capacity._checks import require_fraction, require_int, require_positive
from capacity.errors import InvalidParameterError
from capacity.rounding import round_up_counts, round_up_to_multiple

PLAN_BANDS = ("yhat", "hi_80", "hi_95")
FORECAST_UNITS = ("per_hour", "per_s")
PLAN_COLUMNS = ("hour", "load_tokens_per_s", "gpus", "replicas", "expected_utilization")


@dataclass(frozen=True)
class GPUPlan:
    """An hourly GPU plan.

    frame has one row per forecast hour with columns ``hour`` (UTC timestamp),
    ``load_tokens_per_s`` (the load the plan was sized for), ``gpus``, ``replicas`` (int) and
    ``expected_utilization`` (load / (gpus x per-GPU tokens/s), a share in [0, 1]).
    """

    frame: pd.DataFrame
    peak_gpus: int
    gpu_hours: float
    band: str
    per_gpu_tokens_per_s: float
    gpus_per_replica: int

    @property
    def peak_replicas(self) -> int:
        return self.peak_gpus // self.gpus_per_replica


def gpus_for_load(
    tokens_per_s: np.ndarray | float,
    per_gpu_tokens_per_s: float,
    *,
    utilization_target: float = 0.75,
    safety_factor: float = 1.2,
    min_gpus: int = 1,
    gpus_per_replica: int = 1,
) -> np.ndarray:
    """GPUs for each load value (tokens/s): the user's formula, rounded up to whole replicas.

    gpus = max(min_gpus, ceil(tokens_per_s / (per_gpu_tokens_per_s x utilization_target)
    x safety_factor)), then rounded up to a multiple of gpus_per_replica. Returns int64 array.
    """
    per_gpu = require_positive("per_gpu_tokens_per_s", per_gpu_tokens_per_s)
    target = require_fraction("utilization_target", utilization_target)
    safety = require_positive("safety_factor", safety_factor)
    if safety < 1:
        raise InvalidParameterError(
            f"safety_factor must be >= 1 (it adds headroom), got {safety_factor!r}"
        )
    floor = require_int("min_gpus", min_gpus, minimum=0)
    per_replica = require_int("gpus_per_replica", gpus_per_replica, minimum=1)
    load = np.atleast_1d(np.asarray(tokens_per_s, dtype=float))
    if np.isnan(load).any():
        raise InvalidParameterError("load (tokens/s) contains NaN; fill or drop those hours first")
    if np.isinf(load).any() or (load < 0).any():
        raise InvalidParameterError("load (tokens/s) must be finite and >= 0")
    with np.errstate(over="ignore"):  # an overflow gives inf, which round_up_counts rejects
        raw = round_up_counts(load / (per_gpu * target) * safety)
    return round_up_to_multiple(np.maximum(raw, floor), per_replica)


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
    per_gpu_tokens_per_s: float,
    band: str = "yhat",
    utilization_target: float = 0.75,
    safety_factor: float = 1.2,
    min_gpus: int = 1,
    gpus_per_replica: int = 1,
    tokens_per_request: float | None = None,
    forecast_unit: str = "per_hour",
) -> GPUPlan:
    """Turn an hourly forecast frame (ds, yhat, lo_80, hi_80, lo_95, hi_95) into a GPU plan.

    The ``band`` column ("yhat", "hi_80" or "hi_95") drives the plan. Without
    tokens_per_request the forecast is of tokens; with it, the forecast is of requests and is
    multiplied by tokens_per_request (prompt + completion tokens per request). forecast_unit
    says how the forecast counts: "per_hour" (counts in the hour, as stored in observations;
    divided by 3600) or "per_s" (rates). Each hour is one GPU-hour per planned GPU.
    """
    load = _load_tokens_per_s(forecast, band, tokens_per_request, forecast_unit)
    if len(load) == 0:
        raise InvalidParameterError("forecast has no rows")
    gpus = gpus_for_load(
        load,
        per_gpu_tokens_per_s,
        utilization_target=utilization_target,
        safety_factor=safety_factor,
        min_gpus=min_gpus,
        gpus_per_replica=gpus_per_replica,
    )
    capacity = gpus * float(per_gpu_tokens_per_s)
    utilization = np.divide(load, capacity, out=np.zeros_like(load), where=capacity > 0)
    frame = pd.DataFrame(
        {
            "hour": pd.to_datetime(forecast["ds"], utc=True).reset_index(drop=True),
            "load_tokens_per_s": load,
            "gpus": gpus,
            "replicas": gpus // int(gpus_per_replica),
            "expected_utilization": utilization,
        }
    )
    return GPUPlan(
        frame=frame,
        peak_gpus=int(gpus.max()),
        gpu_hours=float(gpus.sum()),
        band=band,
        per_gpu_tokens_per_s=float(per_gpu_tokens_per_s),
        gpus_per_replica=int(gpus_per_replica),
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
