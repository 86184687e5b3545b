"""A GPU profile's measured load test: upload it (creating or replacing the profile), read it
back, and ask the SLO capacity it gives at any prompt/completion mix."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from app.api.deployment_schemas import PROFILE_NAME_PATTERN
from app.api.deps import ReadAuth, SessionDep, WriteAuth
from app.api.loadtest_schemas import (
    LoadTestImport,
    LoadTestOut,
    ProfileWithLoadTest,
    SloCapacityOut,
)
from app.common.names import echo
from app.errors import NotFoundError
from app.profiles.deployments import MAX_SLO_S, Slo
from app.profiles.loadtest_import import (
    PHYSICS_FIELDS,
    ProfileFields,
    SetupChoice,
    import_profile,
)
from app.profiles.loadtests import profile_view, stored_table, table_summary
from app.profiles.slo_capacity import MAX_TOKENS_PER_REQUEST, profile_slo_capacity

router = APIRouter(prefix="/v1/gpu-profiles", tags=["gpu-profiles"])

ProfileName = Annotated[str, Path(min_length=1, max_length=100, pattern=PROFILE_NAME_PATTERN)]


def _tokens(what: str) -> object:
    return Query(
        ge=1, le=MAX_TOKENS_PER_REQUEST, allow_inf_nan=False, description=f"{what} per request"
    )


CREATE_RACE = (
    "another request created this name at the same moment; nothing of this one was stored: "
    "send it again, it then replaces"
)


def _limit(what: str) -> object:
    return Query(gt=0, le=MAX_SLO_S, allow_inf_nan=False, description=f"p95 {what}, seconds")


@router.put(
    "/{name}/loadtest",
    dependencies=[WriteAuth],
    responses={
        201: {"model": ProfileWithLoadTest, "description": "profile created"},
        409: {"description": CREATE_RACE},
        422: {"description": "a file refused (file, row and column named); nothing stored"},
    },
)
def put_loadtest(
    name: ProfileName, body: LoadTestImport, session: SessionDep, response: Response
) -> ProfileWithLoadTest:
    """Create profile ``name`` from a measured load test, or replace its figures and table.

    The files are one format: a load-test CSV (the schema of NVIDIA NIM / vLLM published
    tables: ``isl, osl, concurrency | request_rate, request_throughput_rps, ttft_p95_s,
    itl_p95_s …``), `vllm bench serve --save-result` JSON files (one per request rate),
    genai-perf profile exports, a guidellm benchmarks report (JSON or YAML), inference-perf
    stage reports or genai-bench run files with their experiment_metadata.json. A CSV holding
    several setups needs ``tensor_parallel`` / ``precision`` to pick one. A GPU count,
    tensor-parallel degree or model the files state must agree with ``gpus_per_replica``,
    ``tensor_parallel`` and ``model`` (422 naming both); without ``gpus_per_replica`` or
    ``model`` the files' are taken. The profile's ``tokens_per_s_per_gpu`` becomes the median over
    the measured mixes of the highest measured tokens/s per GPU.

    Two PUTs creating the same new name at once: one creates it, the other is a 409 (on
    PostgreSQL; SQLite runs them one after the other); sent again, it replaces."""
    fields = ProfileFields(
        gpu_type=body.gpu_type,
        model=body.model,
        gpus_per_replica=body.gpus_per_replica,
        usd_per_hour_on_demand=body.usd_per_hour_on_demand,
        usd_per_hour_reserved=body.usd_per_hour_reserved,
        usd_per_hour_spot=body.usd_per_hour_spot,
        **{name: getattr(body, name) for name in PHYSICS_FIELDS},
    )
    profile, row, created = import_profile(
        session,
        name=name,
        fields=fields,
        files=[(f.name, f.content) for f in body.files],
        choice=SetupChoice(tensor_parallel=body.tensor_parallel, precision=body.precision),
        replace=True,
    )
    response.status_code = 201 if created else 200
    return ProfileWithLoadTest.model_validate(profile_view(profile, row))


@router.get("/{name}/loadtest", dependencies=[ReadAuth], responses={404: {}})
def get_loadtest(name: ProfileName, session: SessionDep) -> LoadTestOut:
    """The profile's stored table: its setup, where it came from, and every row (latencies in
    seconds; TPOT is the ITL where the tool reported no TPOT). 404 for a one-number profile."""
    from app.db import repository

    profile = repository.get_gpu_profile(session, name=name)
    row = stored_table(session, profile_id=profile.id)
    if row is None:
        raise NotFoundError(f"GPU profile {echo(name)} has no load-test table")
    return LoadTestOut.model_validate(
        table_summary(row) | {"profile": profile.name, "records": row.records}
    )


@router.get(
    "/{name}/slo-capacity",
    dependencies=[ReadAuth],
    responses={
        404: {"description": "unknown profile, or a profile without a load-test table"},
        422: {"description": "the mix misses the SLO even at the lowest load (limit named)"},
    },
)
def get_slo_capacity(
    name: ProfileName,
    session: SessionDep,
    prompt_tokens: Annotated[float, _tokens("prompt tokens")],
    completion_tokens: Annotated[float, _tokens("completion tokens")],
    ttft_p95_s: Annotated[float, _limit("time to first token")],
    tpot_p95_s: Annotated[float, _limit("time per output token")],
    allow_extrapolation: Annotated[
        bool,
        Query(
            description="answer a mix more than 4x beyond the measured prompt or completion "
            "range (refused with a 422 naming that range otherwise)"
        ),
    ] = False,
) -> SloCapacityOut:
    """The largest request rate one replica sustains with p95 TTFT ≤ ``ttft_p95_s`` and p95
    TPOT ≤ ``tpot_p95_s`` at this prompt/completion mix: at a measured mix the measured knee,
    elsewhere the serving-cost model fitted to the table (``method`` says which:
    measured / interpolated / extrapolated), and the limit that binds."""
    answer = profile_slo_capacity(
        session,
        name=name,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        slo=Slo(ttft_p95_s=ttft_p95_s, tpot_p95_s=tpot_p95_s),
        allow_extrapolation=allow_extrapolation,
    )
    return SloCapacityOut.model_validate(answer)
