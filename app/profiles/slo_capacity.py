"""The SLO capacity of a load-test profile at any prompt/completion mix (``GET
/v1/gpu-profiles/{name}/slo-capacity``, ``gpucast profile capacity``).

Fitting the serving-cost model to a table takes about half a second, so fitted models are kept
per stored table (its row id and import time: a re-import writes a new row) and replica size.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.common.names import echo
from app.db import repository
from app.db.models import GpuProfileLoadTest
from app.errors import NotFoundError
from app.profiles.deployments import Slo
from app.profiles.loadtests import stored_table

MODEL_CACHE_SIZE = 32
MAX_TOKENS_PER_REQUEST = 10_000_000

_models: OrderedDict[tuple[int, datetime, int], Any] = OrderedDict()
_lock = threading.Lock()


def fitted_model(row: GpuProfileLoadTest, *, gpus_per_replica: int) -> Any:
    """The ``capacity.SloModel`` of a stored table (fitted once per table and replica size)."""
    import capacity

    key = (row.id, row.created_at, gpus_per_replica)
    with _lock:
        if key in _models:
            _models.move_to_end(key)
            return _models[key]
    table = capacity.LoadTestTable.from_records(row.records, **row.meta)
    model = capacity.fit_slo_model(table, gpus_per_replica=gpus_per_replica)
    with _lock:
        _models[key] = model
        while len(_models) > MODEL_CACHE_SIZE:
            _models.popitem(last=False)
    return model


def profile_slo_capacity(
    session: Session, *, name: str, prompt_tokens: float, completion_tokens: float, slo: Slo
) -> dict[str, Any]:
    """What one replica of profile ``name`` sustains within ``slo`` at the mix, and how the
    figure was obtained. NotFoundError for an unknown profile or one without a load test;
    ``capacity.SloUnreachableError`` (a 422) when the mix misses the SLO at the lowest load."""
    import capacity

    profile = repository.get_gpu_profile(session, name=name)
    row = stored_table(session, profile_id=profile.id)
    if row is None:
        raise NotFoundError(
            f"GPU profile {echo(name)} has no load-test table (one tokens/s figure only); "
            "import one with 'gpucast profile import' or PUT /v1/gpu-profiles/{name}/loadtest"
        )
    model = fitted_model(row, gpus_per_replica=profile.gpus_per_replica)
    target = capacity.SloTarget(slo.ttft_p95_s, slo.tpot_p95_s)
    answer = model.capacity(
        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, slo=target
    )
    sensitivity = capacity.limit_sensitivity(model, answer, target)
    note = answer.note
    if sensitivity is not None and sensitivity.flat:
        note += (
            f"; the p95 {answer.binding.upper()} limit sits on a flat stretch of the latency "
            f"curve: 5 % tighter or looser moves this capacity to "
            f"{sensitivity.tighter_requests_per_s:.3g}–"
            f"{sensitivity.looser_requests_per_s:.3g} requests/s, so small latency errors "
            "weigh heavily here — measure this mix to rely on it"
        )
    return {
        "profile": profile.name,
        "gpus_per_replica": profile.gpus_per_replica,
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "ttft_p95_s": slo.ttft_p95_s,
        "tpot_p95_s": slo.tpot_p95_s,
        "requests_per_s_per_replica": answer.requests_per_s_per_replica,
        "tokens_per_s_per_replica": answer.tokens_per_s_per_replica,
        "tokens_per_s_per_gpu": answer.tokens_per_s_per_gpu,
        "concurrency": answer.concurrency,
        "binding": answer.binding,
        "method": answer.method,
        "note": note,
        "sensitivity": None
        if sensitivity is None
        else {
            "limit": sensitivity.limit,
            "tighter_requests_per_s": sensitivity.tighter_requests_per_s,
            "looser_requests_per_s": sensitivity.looser_requests_per_s,
            "flat": sensitivity.flat,
        },
        "measured_mixes": len(model.table.mixes()),
    }
