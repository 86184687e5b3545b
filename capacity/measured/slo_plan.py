"""A GPU plan sized to a latency SLO: each hour's per-GPU throughput is the SLO capacity at
that hour's prompt/completion mix (:class:`capacity.measured.slo.SloModel`), then the user's
formula.

The formula is unchanged — gpus = ceil(tokens/s ÷ (per-GPU tokens/s × utilization target) ×
safety factor) — only the per-GPU tokens/s becomes the measured capacity within the SLO at
the hour's own mix, so a mix that turns decode-heavy at equal requests grows the plan by the
ratio of the SLO capacities (requests/s per replica), not by the ratio of token counts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from capacity.errors import InvalidParameterError, SloUnreachableError
from capacity.measured.slo import SloModel, SloTarget
from capacity.sizing.conversion import GPUPlan, plan_gpus

#: Columns an SLO plan adds to the plan frame, per hour.
SLO_PLAN_COLUMNS = (
    "prompt_tokens_per_request",
    "completion_tokens_per_request",
    "requests_per_s_per_replica",
    "per_gpu_tokens_per_s",
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
    prompts = np.asarray(prompt_tokens, dtype=float)
    completions = np.asarray(completion_tokens, dtype=float)
    per_gpu = model.tokens_per_s_per_gpu(prompts, completions, slo)
    missed = np.flatnonzero(per_gpu <= 0)
    if missed.size:
        first = int(missed[0])
        try:
            model.capacity(
                prompt_tokens=float(prompts[first]),
                completion_tokens=float(completions[first]),
                slo=slo,
            )
        except SloUnreachableError as exc:
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
    **plan_options: Any,
) -> GPUPlan:
    """:func:`capacity.plan_gpus` with each hour's per-GPU tokens/s the SLO capacity at that
    hour's mix (``prompt_tokens`` and ``completion_tokens`` per request, one per forecast row).

    ``of_requests``: the forecast counts requests (each hour carries prompt + completion
    tokens per request of its own mix); otherwise it counts tokens. ``plan_options`` are
    plan_gpus' other keyword arguments (utilization target, safety factor, schedule rules,
    peak factors, gpus_per_replica …). The frame gains SLO_PLAN_COLUMNS.
    """
    prompts = np.asarray(prompt_tokens, dtype=float)
    completions = np.asarray(completion_tokens, dtype=float)
    if prompts.shape != (len(forecast),) or completions.shape != (len(forecast),):
        raise InvalidParameterError("an SLO plan needs one prompt/completion mix per forecast hour")
    if "tokens_per_request" in plan_options:
        raise InvalidParameterError("an SLO plan takes tokens per request from each hour's mix")
    hours = pd.to_datetime(forecast["ds"], utc=True).reset_index(drop=True)
    per_gpu = slo_capacity_by_hour(
        model, slo, prompt_tokens=prompts, completion_tokens=completions, hours=hours
    )
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
    return replace(plan, frame=frame)
