"""The SLO capacity of a load-test profile at any prompt/completion mix (``GET
/v1/gpu-profiles/{name}/slo-capacity``, ``gpucast profile capacity``).

Fitting the serving-cost model to a table takes about half a second, so fitted models are kept
per stored table (its row id and import time: a re-import writes a new row) and replica size.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.common.names import echo
from app.common.words import count
from app.db import repository
from app.db.models import GpuProfile, GpuProfileLoadTest
from app.errors import NotFoundError
from app.profiles.deployments import Slo
from app.profiles.loadtests import stored_table
from app.profiles.observations import stored_observations
from app.profiles.problems import require_usable_figures, unusable

MODEL_CACHE_SIZE = 32
MAX_TOKENS_PER_REQUEST = 10_000_000
# production hours older than this no longer count: the fleet may have changed since
PRODUCTION_WINDOW = timedelta(days=14)

_models: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_lock = threading.Lock()


def profile_ceilings(profile: GpuProfile, row: GpuProfileLoadTest) -> Any:
    """The ``capacity.ServingCeilings`` of a replica of the profile: its own figures where
    given, else the catalog's for its model and GPU names (the table's names when the profile's
    are not known)."""
    import capacity

    return capacity.ServingCeilings.known(
        gpus=profile.gpus_per_replica,
        gpu=capacity.gpu_by_name(profile.gpu_type) or capacity.gpu_by_name(row.gpu_type),
        model=capacity.model_by_name(profile.model) or capacity.model_by_name(row.model),
        precision=row.precision,
        parameters=profile.parameters,
        context_tokens=profile.context_length_tokens,
        peak_tflops=profile.peak_tflops,
        memory_bandwidth_gb_per_s=profile.memory_bandwidth_gb_per_s,
    )


def fitted_model(row: GpuProfileLoadTest, *, gpus_per_replica: int, ceilings: Any = None) -> Any:
    """The ``capacity.SloModel`` of a stored table (fitted once per table, replica size and
    ceilings)."""
    import capacity

    key = (row.id, row.created_at, gpus_per_replica, ceilings)
    with _lock:
        if key in _models:
            _models.move_to_end(key)
            return _models[key]
    table = capacity.LoadTestTable.from_records(row.records, **row.meta)
    model = capacity.fit_slo_model(table, gpus_per_replica=gpus_per_replica, ceilings=ceilings)
    with _lock:
        _models[key] = model
        while len(_models) > MODEL_CACHE_SIZE:
            _models.popitem(last=False)
    return model


def profile_slo_capacity(
    session: Session,
    *,
    name: str,
    prompt_tokens: float,
    completion_tokens: float,
    slo: Slo,
    allow_extrapolation: bool = False,
    allow_switch: str = "allow_extrapolation=true",
) -> dict[str, Any]:
    """What one replica of profile ``name`` sustains within ``slo`` at the mix, and how the
    figure was obtained. NotFoundError for an unknown profile or one without a load test;
    ``capacity.SloUnreachableError`` (a 422) when the mix misses the SLO at the lowest load;
    ``capacity.ExtrapolationError`` for a mix far beyond the measured range, naming
    ``allow_switch`` (how the caller's surface asks for the answer anyway)."""
    import capacity

    profile = repository.get_gpu_profile(session, name=name)
    row = stored_table(session, profile_id=profile.id)
    if row is None:
        raise NotFoundError(
            f"GPU profile {echo(name)} has no load-test table (one tokens/s figure only); "
            "import one with 'gpucast profile import' or PUT /v1/gpu-profiles/{name}/loadtest"
        )
    require_usable_figures(profile)
    try:
        model = fitted_model(
            row,
            gpus_per_replica=profile.gpus_per_replica,
            ceilings=profile_ceilings(profile, row),
        )
    except capacity.LoadTestFormatError as exc:
        raise unusable(profile.name, f"its load test: {exc}") from exc
    target = capacity.SloTarget(slo.ttft_p95_s, slo.tpot_p95_s)
    try:
        answer = model.capacity(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            slo=target,
            allow_extrapolation=allow_extrapolation,
        )
    except capacity.ExtrapolationError as exc:
        raise capacity.ExtrapolationError(f"{exc} ({allow_switch})") from None
    sensitivity = capacity.limit_sensitivity(model, answer, target)
    answer = capacity.with_production(
        answer,
        production_hours(session, profile_id=profile.id),
        target,
        ceiling_requests_per_s=model.ceilings.requests_per_s(
            answer.prompt_tokens, answer.completion_tokens
        ),
        max_age_hours=PRODUCTION_WINDOW.total_seconds() / 3600.0,
        model=model,
    )
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
        "requests_per_s_per_replica_low": answer.requests_per_s_per_replica_low,
        "requests_per_s_per_replica_high": answer.requests_per_s_per_replica_high,
        "basis": answer.basis,
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
        "production_hours": answer.production_hours,
    }


def lab_expectations(
    session: Session, *, profile: GpuProfile, hours: list[Any]
) -> list[tuple[float, float] | None] | None:
    """The load-test model's (p95 TTFT, p95 TPOT) at each checked hour's load and mix (None
    for an hour without requests or near the model's saturation); None without a table."""
    import capacity

    row = stored_table(session, profile_id=profile.id)
    if row is None:
        return None
    try:
        model = fitted_model(
            row, gpus_per_replica=profile.gpus_per_replica, ceilings=profile_ceilings(profile, row)
        )
    except capacity.CapacityError:  # no expectation from a table the model cannot fit
        return None
    production = [_production_hour(hour, age_hours=0.0) for hour in hours]
    known = [hour for hour in production if hour is not None]
    expected = iter(capacity.expected_p95(model, known))
    return [None if hour is None else next(expected) for hour in production]


def _production_hour(stored: Any, *, age_hours: float) -> Any:
    import capacity

    return capacity.ProductionHour.from_totals(
        replicas=stored.replicas,
        requests=stored.requests,
        prompt_tokens=stored.prompt_tokens,
        completion_tokens=stored.completion_tokens,
        ttft_p95_s=stored.ttft_p95_s,
        tpot_p95_s=stored.tpot_p95_s,
        age_hours=age_hours,
    )


def production_hours(
    session: Session, *, profile_id: int, now: datetime | None = None
) -> list[Any]:
    """The profile's stored production hours of the last 14 days as
    ``capacity.ProductionHour`` values (hours without requests left out)."""
    now = now or datetime.now(UTC)
    start = now - PRODUCTION_WINDOW
    hours = []
    for stored in stored_observations(session, profile_id=profile_id, start=start):
        hour = _production_hour(stored, age_hours=(now - stored.hour).total_seconds() / 3600.0)
        if hour is not None:
            hours.append(hour)
    return hours


def answer_text(answer: dict[str, Any]) -> str:
    """The answer as ``gpucast profile capacity`` prints it."""
    # the note says how the figure was found (and, within the measured range, that it is a
    # lower bound); the method is named once
    binding = {
        "ttft": "p95 TTFT binds; ",
        "tpot": "p95 TPOT binds; ",
        "measured range": "",
        "physics": "the physical ceiling binds; ",
    }[answer["binding"]]
    note = str(answer["note"])
    how = note if note.startswith(answer["method"]) else f"{answer['method']}: {note}"
    return "\n".join(
        [
            f"{answer['profile']} at {answer['prompt_tokens']:g} prompt / "
            f"{answer['completion_tokens']:g} completion tokens, p95 TTFT ≤ "
            f"{answer['ttft_p95_s']:g} s, p95 TPOT ≤ {answer['tpot_p95_s']:g} s:",
            f"  {answer['requests_per_s_per_replica']:.4g} requests/s per replica "
            f"(range {answer['requests_per_s_per_replica_low']:.4g}–"
            f"{answer['requests_per_s_per_replica_high']:.4g}) "
            f"({count(answer['gpus_per_replica'], 'GPU')}), {answer['tokens_per_s_per_gpu']:,.0f} "
            "tokens/s per GPU",
            f"  {binding}{how}",
            f"  {count(answer['production_hours'], 'production hour')} of the last 14 days "
            "near this mix",
        ]
    )
