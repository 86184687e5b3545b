"""Shared GPU pools: create, list, read, replace, delete.

Two routers, as for series (pool names may hold '/'): ``collection`` carries the collection
and every sub-resource of one pool (``/{name:path}/…``), ``item`` the ``/{name:path}`` routes,
which would swallow those sub-resources. ``item`` is included after ``collection``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, TypeAdapter

from app import pools
from app.api.deps import ReadAuth, SessionDep, WriteAuth
from app.api.plan_query import PlanQuery
from app.pools.plan import DEFAULT_PLAN_HOURS, MAX_PLAN_HOURS

collection = APIRouter(prefix="/v1/pools", tags=["pools"])
_JSON: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
item = APIRouter(prefix="/v1/pools", tags=["pools"])


class NodePricesOut(BaseModel):
    on_demand_usd_per_hour: float
    reserved_usd_per_hour: float | None
    spot_usd_per_hour: float | None


class PoolMemberOut(BaseModel):
    series: str
    profile: str
    priority: str
    spot_ok: bool
    gpus_per_replica: int
    tokens_per_s_per_gpu: float


class PoolOut(BaseModel):
    """A pool with its members and, for each, the GPU profile figures a plan packs by."""

    name: str
    gpu_type: str | None
    gpus_per_node: int
    node_prices: NodePricesOut
    quota_nodes: int | None
    spot_interruption: float
    members: list[PoolMemberOut]
    created_at: datetime
    updated_at: datetime


def pool_out(pool: pools.StoredPool) -> PoolOut:
    return PoolOut.model_validate(pools.as_dict(pool))


@collection.post("", status_code=201, dependencies=[WriteAuth], responses={409: {}, 422: {}})
def create_pool(body: pools.PoolCreate, session: SessionDep) -> PoolOut:
    """Create a pool. Every member's series and GPU profile must exist, each profile's
    replica must fit on one node (and be of the pool's GPU type, when it has one)."""
    return pool_out(pools.create_pool(session, name=body.name, fields=body))


@collection.get("", dependencies=[ReadAuth])
def list_pools(session: SessionDep) -> list[PoolOut]:
    return [pool_out(pool) for pool in pools.list_pools(session)]


# Sub-resources of one pool go here, on `collection`, above the item routes.


@collection.get(
    "/{name:path}/plan", dependencies=[ReadAuth], responses={404: {}, 409: {}, 422: {}, 429: {}}
)
def pool_plan(
    name: str,
    request: Request,
    session: SessionDep,
    params: PlanQuery,
    hours: Annotated[
        int, Query(ge=1, le=MAX_PLAN_HOURS, description="plan hours, from the first forecast hour")
    ] = DEFAULT_PLAN_HOURS,
) -> Response:
    """The pool's plan: every member's own GPU plan (its capacity plan with these parameters)
    placed on the pool's nodes. Per hour: nodes (and the lower bound), the placement,
    fragmentation, reserved / on-demand / spot nodes, cost, migrations that free a node and,
    per member, GPUs granted, shortfall and the gateway rate limits — ``rate_limit_tokens_per_s``
    (the grant) and ``rate_limit_rps`` (÷ the hour's ``tokens_per_request``; per member,
    ``tokens_per_request_source`` says how those were found) — under a quota capacity goes to
    critical, then standard, then batch. Members that cannot be planned yet are listed under
    ``unplanned``; 409 when none can."""
    result = pools.pool_plan(
        session,
        name=name,
        params=params,
        hours=hours,
        cache=getattr(request.app.state, "plan_cache", None),
    )
    return Response(_JSON.dump_json(result.as_dict()), media_type="application/json")


@item.get("/{name:path}", dependencies=[ReadAuth], responses={404: {}})
def get_pool(name: str, session: SessionDep) -> PoolOut:
    return pool_out(pools.get_pool(session, name=name))


@item.put("/{name:path}", dependencies=[WriteAuth], responses={404: {}, 422: {}})
def replace_pool(name: str, body: pools.PoolFields, session: SessionDep) -> PoolOut:
    """Replace every setting and the whole member list of a pool (same rules as creating
    one); 404 for an unknown pool."""
    return pool_out(pools.replace_pool(session, name=name, fields=body))


@item.delete("/{name:path}", status_code=204, dependencies=[WriteAuth], responses={404: {}})
def delete_pool(name: str, session: SessionDep) -> Response:
    """Delete a pool and its member list (the series and GPU profiles stay)."""
    pools.delete_pool(session, name=name)
    return Response(status_code=204)
