"""The overview page's pool cards: one per stored shared pool, with the figures of its plan
(``GET /v1/pools/{name}/plan`` under the default plan parameters).

A card shows the pool's nodes this hour and at the plan's peak, the lower bound and the idle
GPUs, reserved against elastic (on-demand, spot) nodes, the plan's cost, the hours throttled
under the quota with the classes queued, the migrations that free a node and, per member, its
priority, the GPUs its plan wants this hour, the GPUs granted and short and, when throttled,
its gateway rate limits: tokens/s (the grant) and requests/s with the hour's tokens per
request it divides by. Members without a forecast are listed as not planned; a member plan
older than 36 h marks the card stale, as on the series cards.

Like the series cards, the pool cards never replay and never calibrate band auto: members are
sized on their stored band auto choice, or on :data:`~app.plans.calibration.FALLBACK_BAND`
until one is stored (:class:`app.pools.plan.StoredBands`), and the card names them.
"""

from __future__ import annotations

import shlex
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any

import pandas as pd
from sqlalchemy.orm import Session

import capacity
from app import plans, pools
from app.common.words import count
from app.errors import ConflictError, InputError, NotFoundError
from app.plans.calibration import FALLBACK_BAND
from app.pools.plan import StoredBands
from app.views.chart_data import STALE_NOTE

__all__ = ["POOL_STYLE", "PoolSummary", "load_pool_summaries", "pool_card"]

POOL_STYLE = """
.pool-card { border-top: 4px solid #2563eb; }
.pool-card table { border-collapse: collapse; margin-top: 10px; width: 100%; }
.pool-card th, .pool-card td { text-align: right; padding: 3px 8px;
                               border-bottom: 1px solid var(--line); }
.pool-card th:first-child, .pool-card td:first-child,
.pool-card th:nth-child(2), .pool-card td:nth-child(2),
.pool-card th:nth-child(3), .pool-card td:nth-child(3) { text-align: left; }
.pool-card th { color: var(--muted); font-weight: normal; }
.pool-card td:first-child { word-break: break-all; }
.pool-card tr.throttled td { background: #fef3c7; }
.pool-card ul { margin: 0; padding-left: 18px; }
"""
MAX_MIGRATIONS_SHOWN = 5


@dataclass(frozen=True)
class PoolSummary:
    """A stored pool with its plan, or why it has none."""

    name: str
    members: tuple[pools.StoredMember, ...]
    result: pools.PoolPlanResult | None
    note: str | None = None  # why there is no plan (no member has a forecast yet, …)
    pending: tuple[str, ...] = ()  # band auto members sized on FALLBACK_BAND, not calibrated


def load_pool_summaries(
    session: Session,
    *,
    params: plans.PlanParams | None = None,
    plan_cache: plans.PlanCache | None = None,
) -> tuple[PoolSummary, ...]:
    """The plan of every stored pool, read without calibrating band auto."""
    params = params or plans.PlanParams()
    out = []
    for pool in pools.list_pools(session):
        bands = StoredBands(session, params)
        try:
            result = pools.pool_plan(
                session,
                name=pool.name,
                params=params,
                cache=plan_cache,
                member_params=bands,
            )
        except (ConflictError, InputError, NotFoundError, capacity.CapacityError) as exc:
            # no member has a forecast yet (the REST 409), or the members cannot be placed
            out.append(PoolSummary(pool.name, pool.members, None, note=str(exc)))
            continue
        planned = tuple(name for name in bands.pending if name in result.member_plans)
        out.append(PoolSummary(pool.name, pool.members, result, pending=planned))
    return tuple(out)


# -- HTML (every user string is escaped) ------------------------------------------------------


def pool_card(summary: PoolSummary, now: datetime) -> str:
    """One pool's card."""
    name = escape(summary.name)
    result = summary.result
    if result is None:
        rows = [("members", _member_names(summary.members))]
        rows.append(("plan", f'<span class="note">{escape(summary.note or "no plan")}</span>'))
        return _section(name, "card pool-card", rows, "")
    stale = sorted(n for n, p in result.member_plans.items() if p.is_stale(now))
    hour = result.current_hour(now)
    rows = [
        ("nodes", _nodes(result, hour)),
        ("fleet", _fleet(result.pool)),
        ("lower bound", _lower_bound(result, hour)),
        ("fragmentation", _fragmentation(result, hour)),
        ("reserved vs elastic", _reserved(result, hour)),
        ("cost", _cost(result)),
        ("throttled", _throttled(result, hour)),
        ("migrations", _migrations(result)),
    ]
    if stale:
        names = ", ".join(escape(n) for n in stale)
        rows.append(("forecasts", f'<span class="stale">{escape(STALE_NOTE)}: {names}</span>'))
    if summary.pending:
        rows.append(("band", _pending(summary)))
    if result.unplanned:
        rows.append(("not planned", _unplanned(result)))
    classes = "card pool-card stale-plan" if stale else "card pool-card"
    return _section(name, classes, rows, _members_table(result, hour, stale))


def _section(name: str, classes: str, rows: list[tuple[str, str]], table: str) -> str:
    details = "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows)
    return (
        f'<section class="{classes}" data-pool="{name}"><h2>pool {name}</h2>'
        f"<dl>{details}</dl>{table}</section>"
    )


def _member_names(members: tuple[pools.StoredMember, ...]) -> str:
    if not members:
        return '<span class="note">none</span>'
    return ", ".join(f"{escape(m.series)} ({m.priority})" for m in members)


def _utc(moment: Any) -> str:
    stamp = pd.Timestamp(moment)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return f"{stamp:%Y-%m-%d %H:%M} UTC"


def _span(result: pools.PoolPlanResult) -> str:
    hours = result.plan.hours["hour"]
    return f"{len(hours)} h from {_utc(hours.iloc[0])}"


def _nodes(result: pools.PoolPlanResult, hour: pd.Series | None) -> str:
    peak = int(result.plan.hours["nodes"].max())
    tail = f"peak {peak} over the plan's {_span(result)}"
    if hour is None:
        return f'<span class="stale">now is outside the plan</span>; {tail}'
    nodes, wanted = int(hour["nodes"]), int(hour["demand_nodes"])
    gpus = nodes * result.pool.gpus_per_node
    over = f", the plans would need {wanted} without the quota" if wanted > nodes else ""
    return (
        f'<span class="peak">{count(nodes, "node")} now</span> '
        f"({int(hour['gpus_used'])} of {count(gpus, 'GPU')} used{over}); {tail}"
    )


def _fleet(pool: pools.StoredPool) -> str:
    gpu = f" {escape(pool.gpu_type)}" if pool.gpu_type else ""
    quota = "no quota"
    if pool.quota_nodes is not None:
        quota = f"quota {count(pool.quota_nodes, 'node')}"
    prices = [f"${pool.on_demand_usd_per_hour:,.2f} on demand"]
    for price, option in (
        (pool.reserved_usd_per_hour, "reserved"),
        (pool.spot_usd_per_hour, "spot"),
    ):
        prices += [f"${price:,.2f} {option}"] if price is not None else []
    gpus = count(pool.gpus_per_node, f"{gpu.strip()} GPU".strip())
    return f"{gpus} per node, {quota}; per node-hour {', '.join(prices)}"


def _lower_bound(result: pools.PoolPlanResult, hour: pd.Series | None) -> str:
    peak = int(result.plan.hours["lower_bound"].max())
    bound = int(hour["lower_bound"]) if hour is not None else 0
    now = f"{count(bound, 'node')} now, " if hour is not None else ""
    return f"{now}peak {peak} (GPUs used ÷ {result.pool.gpus_per_node} per node, rounded up)"


def _fragmentation(result: pools.PoolPlanResult, hour: pd.Series | None) -> str:
    most = int(result.plan.hours["fragmentation_gpus"].max())
    now = f"{int(hour['fragmentation_gpus'])} idle GPUs now, " if hour is not None else ""
    return f"{now}at most {most} in an hour"


def _reserved(result: pools.PoolPlanResult, hour: pd.Series | None) -> str:
    frame = result.plan.hours
    reserved = result.plan.reservations.pooled_reserved_nodes
    now = (
        f"; elastic now {int(hour['on_demand_nodes'])} on demand, {int(hour['spot_nodes'])} spot"
        if hour is not None
        else ""
    )
    return (
        f"{count(reserved, 'reserved node')}{now}; over the plan "
        f"{int(frame['on_demand_nodes'].sum())} on-demand and {int(frame['spot_nodes'].sum())} "
        "spot node-hours"
    )


def _cost(result: pools.PoolPlanResult) -> str:
    plan = result.plan
    apart = plan.reservations.per_service_cost_usd
    return (
        f'<span class="peak">${plan.total_cost_usd:,.2f}</span> for the plan\'s '
        f"{len(plan.hours)} h ({int(plan.hours['nodes'].sum())} node-hours); each member on "
        f"nodes of its own: ${apart:,.2f}"
    )


def _throttled(result: pools.PoolPlanResult, hour: pd.Series | None) -> str:
    plan = result.plan
    if plan.throttled_hours == 0:
        return "no hour" if result.pool.quota_nodes is not None else "no hour (no quota)"
    queued = Counter(c for classes in plan.hours["queued_classes"] for c in classes)
    classes = ", ".join(f"{cls} {count} h" for cls, count in queued.items())
    now = ""
    if hour is not None:
        queued_now = ", ".join(hour["queued_classes"])
        short = f" ({count(int(hour['short_gpus']), 'GPU')} short)" if queued_now else ""
        now = f"; now: {queued_now} queued{short}" if queued_now else "; now: none queued"
    quota = result.pool.quota_nodes
    return (
        f'<span class="stale">{plan.throttled_hours} of {len(plan.hours)} h</span> under the '
        f"quota of {count(quota or 0, 'node')}; queued: {classes}{now}"
    )


def _migrations(result: pools.PoolPlanResult) -> str:
    items = [
        f"{_utc(hour)}: {escape(migration.describe())}"
        for hour, migrations in zip(result.plan.hours["hour"], result.plan.migrations, strict=True)
        for migration in migrations
    ]
    if not items:
        return "none"
    shown = "".join(f"<li>{item}</li>" for item in items[:MAX_MIGRATIONS_SHOWN])
    more = len(items) - MAX_MIGRATIONS_SHOWN
    shown += f'<li class="note">and {more} more</li>' if more > 0 else ""
    return f"{len(items)}, each freeing a node<ul>{shown}</ul>"


def _pending(summary: PoolSummary) -> str:
    names = ", ".join(escape(n) for n in summary.pending)
    command = f"gpucast pool plan {shlex.quote(summary.name)}"
    return (
        f'auto → {FALLBACK_BAND} for {names}: <span class="stale">not yet calibrated for their '
        f"nightly run; sized on {FALLBACK_BAND} meanwhile</span> "
        f'<span class="note">(<code>{escape(command)}</code> or any band auto plan read '
        "calibrates them)</span>"
    )


def _unplanned(result: pools.PoolPlanResult) -> str:
    items = "".join(
        f"<li><b>{escape(item['member'])}</b>: {escape(item['reason'])}</li>"
        for item in result.unplanned
    )
    return f"<ul>{items}</ul>"


def _members_table(result: pools.PoolPlanResult, hour: pd.Series | None, stale: list[str]) -> str:
    members = result.plan.members
    now = members[members["hour"] == hour["hour"]] if hour is not None else members.iloc[:0]
    head = (
        "<tr><th>member</th><th>priority</th><th>profile</th><th>plan now</th>"
        "<th>granted</th><th>short</th><th>rate limit tokens/s</th><th>tokens per request</th>"
        "<th>rate limit req/s</th><th>throttled</th><th>band</th></tr>"
    )
    rows = []
    for spec in result.plan.members_spec:
        own = members[members["member"] == spec.name]
        row = now[now["member"] == spec.name]
        current = row.iloc[0] if not row.empty else None
        rows.append(_member_row(result, spec, current, int(own["throttled"].sum()), stale))
    return f'<table class="members"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _member_row(
    result: pools.PoolPlanResult,
    spec: capacity.PoolMember,
    current: pd.Series | None,
    throttled_hours: int,
    stale: list[str],
) -> str:
    name = spec.name
    plan = result.member_plans[name]
    marker = ' <span class="stale">stale</span>' if name in stale else ""
    if current is None:
        figures = ["-"] * 6
        throttled = False
    else:
        throttled = bool(current["throttled"])
        figures = [
            count(int(current["demand_gpus"]), "GPU"),
            f"{int(current['granted_gpus'])}",
            f"{int(current['shortfall_gpus'])}",
            *_limits(current, throttled),
        ]
    cells = [
        f"{escape(name)}{marker}",
        escape(spec.priority),
        escape(plan.profile),
        *figures,
        f"{throttled_hours} h",
        escape(plan.plan.band),
    ]
    classes = ' class="throttled"' if throttled else ""
    body = "".join(f"<td>{cell}</td>" for cell in cells)
    return f'<tr data-member="{escape(name)}"{classes}>{body}</tr>'


def _limits(current: pd.Series, throttled: bool) -> list[str]:
    """Rate limit tokens/s, the hour's tokens per request and rate limit req/s of a throttled
    member ("-" where there is no limit to apply or the figure is not known)."""
    if not throttled:
        return ["-", "-", "-"]
    per_request, rps = current["tokens_per_request"], current["rate_limit_rps"]
    return [
        f"{current['rate_limit_tokens_per_s']:,.0f} tokens/s",
        "-" if pd.isna(per_request) else f"{per_request:,.0f}",
        "-" if pd.isna(rps) else f"{rps:,.1f} req/s",
    ]
