"""The deployment of one series: the GPU profile (and p95 latency SLO) that serves it, which
every plan surface uses when it is not given a profile; and its serving source, from which the
hourly cycle measures the profile's production hours."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app import sources
from app.api.deployment_schemas import DeploymentIn, DeploymentOut
from app.api.deps import ReadAuth, SessionDep, WriteAuth
from app.api.routes.loadtests import CREATE_RACE
from app.api.serving_schemas import ServingSourceIn, ServingSourceOut
from app.plans.deployment import deploy
from app.profiles import deployments

router = APIRouter(prefix="/v1/series", tags=["deployments"])


@router.put(
    "/{name:path}/deployment",
    dependencies=[WriteAuth],
    responses={404: {}, 409: {"description": CREATE_RACE}, 422: {}},
)
def put_deployment(name: str, body: DeploymentIn, session: SessionDep) -> DeploymentOut:
    """Serve this series with a GPU profile (and a p95 TTFT/TPOT SLO), replacing what served
    it. Capacity, desired-replicas, KEDA, Grafana, the overview, accuracy and pools then plan
    it without ``profile=``; an explicit ``profile=`` still overrides the profile.

    An SLO on a profile without a load-test table (it cannot apply one), or one the profile
    misses even at the lowest load at the series' mixes, is a 422 naming the limit, and
    nothing is stored."""
    slo = deployments.slo_of(body.ttft_p95_s, body.tpot_p95_s)
    deployment = deploy(session, series_name=name, profile_name=body.profile, slo=slo)
    return DeploymentOut.model_validate(deployment.as_dict())


@router.get("/{name:path}/deployment", dependencies=[ReadAuth], responses={404: {}})
def get_deployment(name: str, session: SessionDep) -> DeploymentOut:
    """The series' deployment; 404 when the series or its deployment does not exist."""
    deployment = deployments.get_deployment(session, series_name=name)
    return DeploymentOut.model_validate(deployment.as_dict())


@router.delete(
    "/{name:path}/deployment", status_code=204, dependencies=[WriteAuth], responses={404: {}}
)
def delete_deployment(name: str, session: SessionDep) -> Response:
    """Clear the series' deployment (the series and the profile stay)."""
    deployments.clear_deployment(session, series_name=name)
    return Response(status_code=204)


@router.put(
    "/{name:path}/serving-source",
    dependencies=[WriteAuth],
    responses={404: {"description": "no such series, or it has no deployment"}, 422: {}},
)
def put_serving_source(name: str, body: ServingSourceIn, session: SessionDep) -> ServingSourceOut:
    """Measure the deployed series' fleet from Prometheus: every hourly cycle stores the closed
    hours its profile lacks as production hours (p95 TTFT and TPOT from the engine's
    histograms, tokens and requests from its counters, the average replica count). Names left
    out take the engine preset's. Replaces any previous serving source; the bearer token is
    write-only: send it with every PUT."""
    source = sources.set_serving_source(session, series_name=name, spec=body.spec())
    return ServingSourceOut.model_validate(sources.describe_serving(name, source))


@router.get("/{name:path}/serving-source", dependencies=[ReadAuth], responses={404: {}})
def get_serving_source(name: str, session: SessionDep) -> ServingSourceOut:
    """The serving source, its PromQL and import state; the URL's password and the token
    redacted."""
    source = sources.get_serving_source(session, series_name=name)
    return ServingSourceOut.model_validate(sources.describe_serving(name, source))


@router.delete(
    "/{name:path}/serving-source", status_code=204, dependencies=[WriteAuth], responses={404: {}}
)
def delete_serving_source(name: str, session: SessionDep) -> Response:
    """Stop measuring the deployment (the production hours stored stay)."""
    sources.delete_serving_source(session, series_name=name)
    return Response(status_code=204)
