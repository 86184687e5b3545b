"""GPU profiles: what one GPU delivers for one model, and its price."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import ReadAuth, SessionDep, WriteAuth
from app.api.profile_schemas import GpuProfileOut
from app.api.schemas import GpuProfileBase, GpuProfileCreate
from app.db import repository
from app.db.models import GpuProfile, GpuProfileLoadTest
from app.profiles.loadtest_import import check_stored_replica_size
from app.profiles.loadtests import stored_table, stored_tables
from app.profiles.problems import NUMBER_FIELDS, profile_problem, usable_number

router = APIRouter(prefix="/v1/gpu-profiles", tags=["gpu-profiles"])


def profile_out(profile: GpuProfile, row: GpuProfileLoadTest | None) -> GpuProfileOut:
    """The profile as read back: unusable stored figures as null, its problem named."""
    figures = {
        field: value if usable_number(value := getattr(profile, field), field) else None
        for field in NUMBER_FIELDS
    }
    return GpuProfileOut(
        name=profile.name,
        gpu_type=profile.gpu_type,
        model=profile.model,
        problem=profile_problem(profile, row),
        **figures,
    )


@router.post("", status_code=201, dependencies=[WriteAuth], responses={409: {}})
def create_profile(body: GpuProfileCreate, session: SessionDep) -> GpuProfileOut:
    profile = repository.create_gpu_profile(session, **body.model_dump())
    return profile_out(profile, None)


@router.get("", dependencies=[ReadAuth])
def list_profiles(session: SessionDep) -> list[GpuProfileOut]:
    """Every profile; one stored with values gpucast cannot use is listed with its ``problem``."""
    tables = stored_tables(session)
    return [profile_out(p, tables.get(p.id)) for p in repository.list_gpu_profiles(session)]


@router.get("/{name}", dependencies=[ReadAuth], responses={404: {}})
def get_profile(name: str, session: SessionDep) -> GpuProfileOut:
    profile = repository.get_gpu_profile(session, name=name)
    return profile_out(profile, stored_table(session, profile_id=profile.id))


@router.put("/{name}", dependencies=[WriteAuth], responses={404: {}})
def replace_profile(name: str, body: GpuProfileBase, session: SessionDep) -> GpuProfileOut:
    """Replace the profile's figures; a load-test profile keeps its table, so its
    gpus_per_replica must stay the table's tensor-parallel degree (422 otherwise)."""
    check_stored_replica_size(
        session,
        profile=repository.get_gpu_profile(session, name=name),
        gpus_per_replica=body.gpus_per_replica,
    )
    profile = repository.update_gpu_profile(session, name=name, **body.model_dump())
    return profile_out(profile, stored_table(session, profile_id=profile.id))


@router.delete("/{name}", status_code=204, dependencies=[WriteAuth], responses={404: {}, 409: {}})
def delete_profile(name: str, session: SessionDep) -> Response:
    """Delete the profile; 409 naming the series it serves while any series is deployed on it."""
    repository.delete_gpu_profile(session, name=name)
    return Response(status_code=204)
