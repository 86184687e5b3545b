"""Targets of shared GPU pools: nodes, cost and shortfall per plan hour, and annotations for
the migrations that free a node and the hours the pool throttles its members.

Each target plans the pools in ``payload.pool`` (every stored pool without one) as
``GET /v1/pools/{name}/plan`` does, with the same plan parameters as the series plan targets
and ``hours`` (24). A pool none of whose members can be planned yet (no forecast) answers an
empty result, as a series without a forecast does; an unknown pool is a 404 naming the pools.
A pool's names end in :data:`~app.grafana.plan_targets.STALE_SUFFIX` when a member's plan is
stale.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from app import pools
from app.common.names import echo
from app.common.words import count
from app.errors import ConflictError, InputError, NotFoundError
from app.grafana.plan_targets import ANNOTATION_COLUMNS, STALE_SUFFIX, plan_params
from app.grafana.protocol import (
    GrafanaInputError,
    QueryContext,
    choice,
    epoch_ms,
    flag,
    in_range,
    integer,
    table,
    text_list,
    timeseries,
)
from app.pools.plan import DEFAULT_PLAN_HOURS, MAX_PLAN_HOURS

SHORTFALL_PER = ("member", "total")
HOUR = pd.Timedelta(hours=1)


def pool_plans(ctx: QueryContext, payload: dict[str, Any]) -> list[pools.PoolPlanResult]:
    """The plan of every pool the payload names (every stored pool without a name), skipping
    pools none of whose members can be planned yet."""
    params = plan_params(payload)
    hours = integer(payload, "hours", DEFAULT_PLAN_HOURS, low=1, high=MAX_PLAN_HOURS)
    names = text_list(payload, "pool") or [p.name for p in pools.list_pools(ctx.session)]
    out = []
    for name in dict.fromkeys(names):
        try:
            result = pools.pool_plan(
                ctx.session, name=name, params=params, hours=hours, cache=ctx.plan_cache
            )
        except NotFoundError as exc:
            stored = ", ".join(p.name for p in pools.list_pools(ctx.session)) or "none yet"
            raise NotFoundError(f"pool {echo(name)} not found; pools: {stored}") from exc
        except ConflictError:  # no member has a forecast yet: nothing to chart
            continue
        except InputError as exc:
            raise GrafanaInputError(str(exc)) from exc
        out.append(result)
    return out


def legend_name(result: pools.PoolPlanResult, what: str) -> str:
    """``"{pool} {what}"``, ending in STALE_SUFFIX when a member's plan is stale."""
    stale = STALE_SUFFIX if _stale(result) else ""
    return f"{result.pool.name} {what}{stale}"


def _stale(result: pools.PoolPlanResult) -> bool:
    return any(plan.is_stale() for plan in result.member_plans.values())


def pool_nodes(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Nodes per plan hour; ``lower_bound: true`` adds ceil(GPUs ÷ GPUs per node) and
    ``reserved: true`` the reserved nodes (the rest runs on demand or on spot)."""
    columns = [("nodes", "nodes")]
    columns += [("lower_bound", "lower bound nodes")] if flag(payload, "lower_bound") else []
    columns += [("reserved_nodes", "reserved nodes")] if flag(payload, "reserved") else []
    out = []
    for result in pool_plans(ctx, payload):
        frame = in_range(result.plan.hours, "hour", ctx)
        for column, what in columns:
            out.append(timeseries(legend_name(result, what), frame, "hour", column))
    return out


def pool_cost(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """USD per plan hour of the pool's nodes (reserved, on demand and spot; sums to the
    plan's ``total_cost_usd`` over the plan's hours)."""
    out = []
    for result in pool_plans(ctx, payload):
        frame = in_range(result.plan.hours, "hour", ctx)
        out.append(timeseries(legend_name(result, "cost usd/h"), frame, "hour", "cost_usd"))
    return out


def pool_shortfall(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """GPUs short of each member's plan per hour (``per: total``: the pool's sum); non-zero
    only in hours the quota throttles."""
    per = choice(payload, "per", SHORTFALL_PER, "member")
    out = []
    for result in pool_plans(ctx, payload):
        if per == "total":
            frame = in_range(result.plan.hours, "hour", ctx)
            out.append(
                timeseries(legend_name(result, "shortfall gpus"), frame, "hour", "short_gpus")
            )
            continue
        members = in_range(result.plan.members, "hour", ctx)
        for spec in result.plan.members_spec:
            frame = members[members["member"] == spec.name]
            name = legend_name(result, f"{spec.name} shortfall gpus")
            out.append(timeseries(name, frame, "hour", "shortfall_gpus"))
    return out


def pool_migrations(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Annotations: every migration that frees a node, at the hour it is done; the text is
    the migration itself (``move 2 replicas of chat from node 3 to node 1, frees 1 node``)."""
    rows = []
    for result in pool_plans(ctx, payload):
        pool = result.pool.name
        tags = f"migration,{pool}" + (",stale" if _stale(result) else "")
        for hour, migrations in zip(result.plan.hours["hour"], result.plan.migrations, strict=True):
            for migration in migrations:
                noun = "node" if migration.frees_nodes == 1 else "nodes"
                title = f"{pool}: migration frees {migration.frees_nodes} {noun}"
                stamp = epoch_ms(hour)
                rows.append([stamp, stamp, title, migration.describe(), tags])
    return [table(ANNOTATION_COLUMNS, _overlapping(ctx, rows))]


def pool_throttled(ctx: QueryContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Annotations: every hour the pool's quota cannot carry every member's plan, as a region
    over the hour naming the classes queued and each member short: GPUs short and the gateway
    rate limits it gets — tokens/s (the grant) and requests/s at the hour's tokens per
    request (``rate limit 2,500 tokens/s (2 req/s at 1,250 tokens per request)``)."""
    rows = []
    for result in pool_plans(ctx, payload):
        members = result.plan.members
        for hour in result.plan.hours[result.plan.hours["throttled"]].itertuples(index=False):
            short = members[(members["hour"] == hour.hour) & members["throttled"]]
            rows.append(_throttled_row(result, hour, short))
    return [table(ANNOTATION_COLUMNS, _overlapping(ctx, rows))]


def _throttled_row(result: pools.PoolPlanResult, hour: Any, short: pd.DataFrame) -> list[Any]:
    pool = result.pool.name
    queued = ", ".join(hour.queued_classes)
    members = "; ".join(
        f"{row.member} ({row.priority}) {count(int(row.shortfall_gpus), 'GPU')} short, "
        f"{_limits(row)}"
        for row in short.itertuples(index=False)
    )
    quota = result.pool.quota_nodes
    text = (
        f"{pool}: {int(hour.short_gpus)} of {count(int(hour.demand_gpus), 'GPU')} not granted "
        "under the "
        f"quota of {quota} {'node' if quota == 1 else 'nodes'}; queued: {queued}; {members}"
    )
    tags = ",".join(
        ["throttled", pool, *hour.queued_classes] + (["stale"] if _stale(result) else [])
    )
    start = pd.Timestamp(hour.hour)
    return [
        epoch_ms(start),
        epoch_ms(start + HOUR),
        f"{pool} throttled: {queued} queued",
        text,
        tags,
    ]


def _limits(row: Any) -> str:
    """A throttled member's gateway rate limits; requests/s only where its tokens per request
    are known."""
    text = f"rate limit {row.rate_limit_tokens_per_s:,.0f} tokens/s"
    if pd.isna(row.rate_limit_rps):
        return text
    return (
        f"{text} ({row.rate_limit_rps:,.4g} req/s at {row.tokens_per_request:,.0f} tokens per "
        "request)"
    )


def _overlapping(ctx: QueryContext, rows: list[list[Any]]) -> list[list[Any]]:
    start, end = epoch_ms(ctx.start), epoch_ms(ctx.end)
    return sorted((r for r in rows if r[0] <= end and r[1] >= start), key=lambda r: r[0])
