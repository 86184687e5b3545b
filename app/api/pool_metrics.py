"""Shared pools in ``/metrics``: the figures of every stored pool's plan, as
``GET /v1/pools/{name}/plan`` serves it under the default plan parameters, read at scrape time.

Per pool (label ``pool``): ``gpucast_pool_planned`` (1, or 0 while no member can be planned —
the REST 409), ``gpucast_pool_unplanned_members`` (every member when the pool has no plan),
``gpucast_pool_plan_stale`` (1 when a member's forecast is older than 36 h) and
``gpucast_pool_uncalibrated_members`` (band auto members sized on hi_80 until their choice is
stored). For planned pools: this hour's ``gpucast_pool_nodes``,
``gpucast_pool_lower_bound_nodes``, ``gpucast_pool_fragmentation_gpus``,
``gpucast_pool_on_demand_nodes`` and ``gpucast_pool_spot_nodes`` (absent when the current hour
is outside the plan, e.g. a stale plan); over the plan ``gpucast_pool_peak_nodes``,
``gpucast_pool_reserved_nodes``, ``gpucast_pool_cost_usd`` (the plan's total),
``gpucast_pool_plan_hours``, ``gpucast_pool_throttled_hours`` and ``gpucast_pool_migrations``.
Per member this hour (labels ``pool``, ``member`` = the series, ``priority``):
``gpucast_pool_member_granted_gpus`` and ``gpucast_pool_member_shortfall_gpus``; and, only
while the member is throttled (absent: no limit to apply), its gateway rate limits with labels
``pool, member``: ``gpucast_pool_member_rate_limit_tokens_per_s`` (the grant in tokens/s, safe
at any gateway that counts tokens), ``gpucast_pool_member_rate_limit_rps`` (that ÷ the hour's
tokens per request) and ``gpucast_pool_member_tokens_per_request`` (the hour's figure it
divides by; :mod:`app.pools.per_request`) — the last two absent when the member's tokens per
request are not known.

A scrape never calibrates band auto or replays: members are sized on their stored choice, or
on hi_80 until one is stored (:class:`app.pools.plan.StoredBands`), as on the overview page.
A pool that cannot be planned is reported as such and never fails the scrape.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily, Metric

from app import pools
from app.db import Database
from app.errors import ConflictError, InputError, NotFoundError
from app.plans import PlanCache, PlanParams
from app.pools.plan import StoredBands

__all__ = ["pool_metrics"]

logger = logging.getLogger(__name__)

POOL = ["pool"]
MEMBER = ["pool", "member", "priority"]
# name -> (help, labels); the families a scrape yields, in this order.
GAUGES = {
    "planned": ("1 when the pool has a plan, 0 while none of its members can be planned", POOL),
    "unplanned_members": ("Members without a plan (no forecast, or not covering the hours)", POOL),
    "uncalibrated_members": (
        "Band auto members sized on hi_80 because their choice is not stored yet",
        POOL,
    ),
    "plan_stale": ("1 when a member's forecast was trained more than 36 h ago", POOL),
    "plan_hours": ("Hours the pool plan covers", POOL),
    "nodes": ("Nodes the pool plan holds this hour", POOL),
    "lower_bound_nodes": ("GPUs used this hour / GPUs per node, rounded up", POOL),
    "fragmentation_gpus": ("Idle GPUs on the pool's nodes this hour", POOL),
    "on_demand_nodes": ("Elastic nodes bought on demand this hour", POOL),
    "spot_nodes": ("Elastic nodes bought on spot this hour", POOL),
    "peak_nodes": ("Most nodes the pool plan holds in an hour", POOL),
    "reserved_nodes": ("Nodes the pool plan reserves (the count of the cheapest timeline)", POOL),
    "cost_usd": ("USD of the pool's nodes over the plan's hours", POOL),
    "throttled_hours": ("Plan hours the quota cannot carry every member's plan", POOL),
    "migrations": ("Migrations in the plan that free a node", POOL),
    "member_granted_gpus": ("GPUs granted to the member this hour", MEMBER),
    "member_shortfall_gpus": ("GPUs the member's plan is short this hour", MEMBER),
    "member_rate_limit_tokens_per_s": (
        "Gateway rate limit (tokens/s, the grant) of a member throttled this hour",
        ["pool", "member"],
    ),
    "member_rate_limit_rps": (
        "Gateway rate limit (requests/s: the grant / this hour's tokens per request) of a member "
        "throttled this hour",
        ["pool", "member"],
    ),
    "member_tokens_per_request": (
        "This hour's tokens per request the requests/s limit of a throttled member divides by",
        ["pool", "member"],
    ),
}


def pool_metrics(database: Database, *, cache: PlanCache | None, now: datetime) -> Iterator[Metric]:
    """The pool gauges (module text); each pool is planned in a transaction of its own."""
    families = {
        name: GaugeMetricFamily(f"gpucast_pool_{name}", text, labels=labels)
        for name, (text, labels) in GAUGES.items()
    }
    try:
        with database.transaction() as session:
            stored = pools.list_pools(session)
    except Exception:  # a scrape must not fail because the database is down
        logger.warning("listing pools for /metrics failed", exc_info=True)
        return
    for pool in stored:
        try:
            with database.read_transaction() as session:
                bands = StoredBands(session, PlanParams())
                result = pools.pool_plan(
                    session,
                    name=pool.name,
                    params=PlanParams(),
                    cache=cache,
                    member_params=bands,
                )
        except NotFoundError:  # deleted since the list was read
            continue
        except (ConflictError, InputError):  # no member can be planned yet
            _not_planned(families, pool)
            continue
        except Exception:  # one pool's failure must not fail the scrape
            logger.warning("planning pool %r for /metrics failed", pool.name, exc_info=True)
            _not_planned(families, pool)
            continue
        pending = [name for name in bands.pending if name in result.member_plans]
        _planned(families, result, pending, now)
    yield from families.values()


def _not_planned(families: dict[str, GaugeMetricFamily], pool: pools.StoredPool) -> None:
    families["planned"].add_metric([pool.name], 0)
    families["unplanned_members"].add_metric([pool.name], len(pool.members))


def _planned(
    families: dict[str, GaugeMetricFamily],
    result: pools.PoolPlanResult,
    pending: list[str],
    now: datetime,
) -> None:
    name, plan = result.pool.name, result.plan
    stale = any(member.is_stale(now) for member in result.member_plans.values())
    totals = {
        "planned": 1,
        "unplanned_members": len(result.unplanned),
        "uncalibrated_members": len(pending),
        "plan_stale": int(stale),
        "plan_hours": len(plan.hours),
        "peak_nodes": int(plan.hours["nodes"].max()),
        "reserved_nodes": plan.reservations.pooled_reserved_nodes,
        "cost_usd": plan.total_cost_usd,
        "throttled_hours": plan.throttled_hours,
        "migrations": sum(len(items) for items in plan.migrations),
    }
    for family, value in totals.items():
        families[family].add_metric([name], value)
    hour = result.current_hour(now)
    if hour is None:
        return
    for family, column in (
        ("nodes", "nodes"),
        ("lower_bound_nodes", "lower_bound"),
        ("fragmentation_gpus", "fragmentation_gpus"),
        ("on_demand_nodes", "on_demand_nodes"),
        ("spot_nodes", "spot_nodes"),
    ):
        families[family].add_metric([name], float(hour[column]))
    members = plan.members[plan.members["hour"] == hour["hour"]]
    for row in members.itertuples(index=False):
        labels = [name, str(row.member), str(row.priority)]
        families["member_granted_gpus"].add_metric(labels, float(row.granted_gpus))
        families["member_shortfall_gpus"].add_metric(labels, float(row.shortfall_gpus))
        if not row.throttled:
            continue
        limits = {
            "member_rate_limit_tokens_per_s": float(row.rate_limit_tokens_per_s),
            "member_rate_limit_rps": float(row.rate_limit_rps),
            "member_tokens_per_request": float(row.tokens_per_request),
        }
        for family, value in limits.items():
            if not math.isnan(value):  # NaN: no tokens per request
                families[family].add_metric([name, str(row.member)], value)
