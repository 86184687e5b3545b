"""``gpucast pool plan NAME``: the pool's plan — every member's own GPU plan placed on the
pool's nodes — as a table per hour and per member, or the API's JSON (``--json``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.cli.shared import add_plan_parameters, open_db, plan_params, whole_number
from app.common.words import count


def register_plan(pool_sub: Any) -> None:
    from app.common.options import POOL_PLAN_HOURS as DEFAULT_PLAN_HOURS
    from app.common.options import POOL_PLAN_HOURS_MAX as MAX_PLAN_HOURS

    plan = pool_sub.add_parser(
        "plan",
        help="the pool's hourly plan: nodes, placement, reserved vs elastic, cost, grants",
        description="Every member's GPU plan (as `gpucast plan` serves it, with these "
        "parameters) packed onto the pool's nodes: per hour nodes, fragmentation, reserved / "
        "on-demand / spot nodes, cost and migrations; under the pool's quota, per member the "
        "GPUs granted by priority, the shortfall and, per throttled hour, the gateway rate "
        "limits: tokens/s (the grant) and requests/s at that hour's tokens per request.",
    )
    plan.add_argument("name", help="pool name")
    plan.add_argument(
        "--hours",
        type=whole_number,
        default=DEFAULT_PLAN_HOURS,
        help=f"plan hours, 1..{MAX_PLAN_HOURS} (default {DEFAULT_PLAN_HOURS})",
    )
    plan.add_argument("--json", action="store_true", help="print the API's JSON")
    add_plan_parameters(plan)
    plan.set_defaults(handler=cmd_pool_plan)


def cmd_pool_plan(args: argparse.Namespace) -> int:
    from app import pools
    from app.pools.plan import check_hours

    params = plan_params(args)
    check_hours(args.hours)
    database = open_db(args)
    try:
        with database.transaction() as session:
            result = pools.pool_plan(session, name=args.name, params=params, hours=args.hours)
            body = result.as_dict()
    finally:
        database.dispose()
    if args.json:
        print(json.dumps(body, default=_json_default, allow_nan=False))
    else:
        print("\n".join(pool_plan_lines(body)))
    return 0


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(type(value).__name__)


def _usd(value: float) -> str:
    return f"${value:,.0f}"


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _rate_limit_lines(hours: list[dict[str, Any]]) -> list[str]:
    """One line per throttled member-hour: the gateway's limits in tokens/s (the grant, safe
    at any gateway that counts tokens) and in requests/s at that hour's tokens per request."""
    rows = [(hour["hour"], m) for hour in hours for m in hour["members"] if m["throttled"]]
    if not rows:
        return []
    width = max(len("member"), *(len(m["member"]) for _, m in rows))
    lines = [
        "",
        "rate limits (throttled hours; enforce tokens/s where the gateway counts tokens):",
        f"  {'hour (UTC)':<17} {'member':<{width}} {'granted':>7} {'tokens/s':>12} "
        f"{'tokens/req':>10} {'req/s':>10}",
    ]
    for moment, m in rows:
        lines.append(
            f"  {moment.strftime('%Y-%m-%d %H:%M'):<17} {m['member']:<{width}} "
            f"{m['granted_gpus']:>7} {m['rate_limit_tokens_per_s']:>12,.0f} "
            f"{_number(m['tokens_per_request'], ',.0f'):>10} "
            f"{_number(m['rate_limit_rps'], ',.2f'):>10}"
        )
    return lines


def pool_plan_lines(body: dict[str, Any]) -> list[str]:
    """The pool plan as text: a summary, one line per hour, the members' grants where the
    pool is short, the rate limits of every throttled member-hour, migrations and unplanned
    members."""
    hours = body["hours"]
    reservations = body["reservations"]
    quota = body["quota_nodes"]
    lines = [
        f"pool {body['pool']}: {count(len(body['members']), 'member')}, "
        f"{count(body['gpus_per_node'], 'GPU')} per node, quota "
        f"{quota if quota is not None else 'none'}; "
        f"{len(hours)} h from {hours[0]['hour'].isoformat()}"
        + (
            f" — ONLY {len(hours)} OF THE {body['hours_asked']} HOURS ASKED (see notes)"
            if len(hours) < body["hours_asked"]
            else ""
        ),
        f"peak {count(body['peak_nodes'], 'node')}, {count(body['node_hours'], 'node-hour')}, "
        f"cost {_usd(body['total_cost_usd'])}; reserved "
        f"{count(reservations['pooled_reserved_nodes'], 'node')} "
        f"pooled vs {reservations['per_service_reserved_nodes']} reserved per service "
        f"({_usd(reservations['pooled_cost_usd'])} vs "
        f"{_usd(reservations['per_service_cost_usd'])})",
        "",
        f"{'hour (UTC)':<17} {'nodes':>5} {'bound':>5} {'idle':>4} {'res':>4} {'od':>4} "
        f"{'spot':>4} {'cost':>8} {'short':>5}  queued",
    ]
    for hour in hours:
        lines.append(
            f"{hour['hour'].strftime('%Y-%m-%d %H:%M'):<17} {hour['nodes']:>5} "
            f"{hour['lower_bound']:>5} {hour['fragmentation_gpus']:>4} {hour['reserved_nodes']:>4} "
            f"{hour['on_demand_nodes']:>4} {hour['spot_nodes']:>4} {_usd(hour['cost_usd']):>8} "
            f"{hour['short_gpus']:>5}  {','.join(hour['queued_classes']) or '-'}"
        )
    lines += ["", "members:"]
    for member in body["members"]:
        rows = [m for hour in hours for m in hour["members"] if m["member"] == member["member"]]
        throttled = [m for m in rows if m["throttled"]]
        spot = ", spot ok" if member["spot_ok"] else ""
        text = (
            f"  {member['member']} ({member['priority']}, "
            f"{count(member['gpus_per_replica'], 'GPU')} per replica{spot}): peak "
            f"{count(max(m['demand_gpus'] for m in rows), 'GPU')}"
        )
        if throttled:
            worst = max(throttled, key=lambda m: m["shortfall_gpus"])
            text += (
                f"; throttled {len(throttled)} h, worst short "
                f"{count(worst['shortfall_gpus'], 'GPU')}, "
                f"rate limit {worst['rate_limit_tokens_per_s']:,.0f} tokens/s"
            )
        if member.get("tokens_per_request_source"):
            text += f"; tokens per request: {member['tokens_per_request_source']}"
        if member.get("stale"):
            text += "; its forecast is stale"
        lines.append(text)
    lines += _rate_limit_lines(hours)
    migrations = [(hour["hour"], text) for hour in hours for text in hour["migrations"]]
    if migrations:
        lines += ["", "migrations:"]
        lines += [f"  {moment.strftime('%Y-%m-%d %H:%M')}: {text}" for moment, text in migrations]
    if body["unplanned"]:
        lines += ["", "not planned:"]
        lines += [f"  {item['member']}: {item['reason']}" for item in body["unplanned"]]
    if body.get("notes"):
        lines += ["", "notes:"]
        lines += [f"  {note}" for note in body["notes"]]
    return lines
