"""GPU profiles: what one GPU delivers for one model, and its price."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import ReadAuth, SessionDep, WriteAuth
from app.api.schemas import GpuProfileBase, GpuProfileCreate, GpuProfileOut
from app.db import repository
from app.profiles.loadtest_import import check_stored_replica_size

router = APIRouter(prefix="/v1/gpu-profiles", tags=["gpu-profiles"])


@router.post("", status_code=201, dependencies=[WriteAuth], responses={409: {}})
def create_profile(body: GpuProfileCreate, session: SessionDep) -> GpuProfileOut:
    profile = repository.create_gpu_profile(session, **body.model_dump())
    return GpuProfileOut.model_validate(profile)


@router.get("", dependencies=[ReadAuth])
def list_profiles(session: SessionDep) -> list[GpuProfileOut]:
    return [GpuProfileOut.model_validate(p) for p in repository.list_gpu_profiles(session)]


@router.get("/{name}", dependencies=[ReadAuth], responses={404: {}})
def get_profile(name: str, session: SessionDep) -> GpuProfileOut:
    return GpuProfileOut.model_validate(repository.get_gpu_profile(session, name=name))


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
    return GpuProfileOut.model_validate(profile)


@router.delete("/{name}", status_code=204, dependencies=[WriteAuth], responses={404: {}, 409: {}})
def delete_profile(name: str, session: SessionDep) -> Response:
    """Delete the profile; 409 naming the series it serves while any series is deployed on it."""
    repository.delete_gpu_profile(session, name=name)
    return Response(status_code=204)
