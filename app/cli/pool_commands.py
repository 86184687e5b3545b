"""``gpucast pool``: create, list, show, replace and delete shared GPU pools.

A pool is given by flags or by a file (JSON or YAML) with the body of ``POST /v1/pools``; both
are validated by the same rules as the API (:mod:`app.pools.spec`) before the database is
opened, and written in one transaction: a bad member leaves nothing written.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from app.cli.shared import open_db
from app.common.names import check_json_depth, echo, parse_json
from app.common.options import POOL_GPUS_PER_NODE as DEFAULT_GPUS_PER_NODE
from app.common.options import POOL_PRIORITIES as PRIORITIES
from app.common.options import POOL_SPOT_INTERRUPTION as DEFAULT_SPOT_INTERRUPTION
from app.errors import InputError

if TYPE_CHECKING:
    from app.pools import StoredPool
    from app.pools.spec import PoolFields

MEMBER_FORMAT = "SERIES:PROFILE[:PRIORITY[:spot]]"
# Flag of each body field, for messages about flags; (dest, body path, type).
FLAGS = (
    ("node_price", ("node_prices", "on_demand_usd_per_hour"), float),
    ("reserved_price", ("node_prices", "reserved_usd_per_hour"), float),
    ("spot_price", ("node_prices", "spot_usd_per_hour"), float),
    ("gpus_per_node", ("gpus_per_node",), int),
    ("quota", ("quota_nodes",), int),
    ("gpu_type", ("gpu_type",), str),
    ("spot_interruption", ("spot_interruption",), float),
)


def register(sub: Any) -> None:
    pool = sub.add_parser(
        "pool",
        help="shared GPU pools: several series packed onto one fleet of nodes",
        description="A pool is a fleet of identical nodes (GPUs per node, node prices, an "
        "optional quota) and its members: series, each with a GPU profile and a priority class.",
    )
    pool_sub = pool.add_subparsers(dest="pool_command", required=True, metavar="ACTION")
    _register_write(pool_sub, "create", cmd_pool_create, "create a pool")
    _register_write(pool_sub, "update", cmd_pool_update, "replace a pool's settings and members")
    listing = pool_sub.add_parser("list", help="list pools")
    listing.set_defaults(handler=cmd_pool_list)
    show = pool_sub.add_parser("show", help="a pool's settings and members")
    show.add_argument("name", help="pool name")
    show.add_argument("--json", action="store_true", help="print the API's JSON")
    show.set_defaults(handler=cmd_pool_show)
    delete = pool_sub.add_parser("delete", help="delete a pool (its series and profiles stay)")
    delete.add_argument("name", help="pool name")
    delete.set_defaults(handler=cmd_pool_delete)
    from app.cli.pool_plan_commands import register_plan

    register_plan(pool_sub)


def _register_write(
    pool_sub: Any, action: str, handler: Callable[[argparse.Namespace], int], help_text: str
) -> None:
    parser = pool_sub.add_parser(
        action,
        help=help_text,
        description=f"{help_text.capitalize()}, from flags or from --file (JSON or YAML with the "
        "body of POST /v1/pools). Every member's series and GPU profile must exist."
        + (" The pool is replaced whole: give every member again." if action == "update" else ""),
    )
    parser.add_argument("name", help="pool name")
    parser.add_argument("--file", help="JSON or YAML file with the pool (the REST body)")
    parser.add_argument("--node-price", metavar="USD", help="on-demand USD per node-hour")
    parser.add_argument("--reserved-price", metavar="USD", help="reserved USD per node-hour")
    parser.add_argument("--spot-price", metavar="USD", help="spot USD per node-hour")
    parser.add_argument(
        "--gpus-per-node",
        metavar="N",
        help=f"GPUs per node, 1..64 (default {DEFAULT_GPUS_PER_NODE})",
    )
    parser.add_argument("--quota", metavar="NODES", help="most nodes the pool may hold")
    parser.add_argument("--gpu-type", metavar="T", help="every member's profile must be of it")
    parser.add_argument(
        "--spot-interruption",
        metavar="SHARE",
        help="share of spot node-hours lost to interruption, in [0, 1) "
        f"(default {DEFAULT_SPOT_INTERRUPTION:g})",
    )
    parser.add_argument(
        "--member",
        action="append",
        default=[],
        metavar=MEMBER_FORMAT,
        help=f"repeatable; PRIORITY is one of {', '.join(PRIORITIES)} (default standard), "
        "'spot' marks a member that tolerates spot; a SERIES with ':' needs the PRIORITY",
    )
    parser.set_defaults(handler=handler)


def cmd_pool_create(args: argparse.Namespace) -> int:
    from app import pools

    fields = _fields(args)
    pools.validate_pool_name(args.name)
    database = open_db(args)
    try:
        with database.transaction() as session:
            pool = pools.create_pool(session, name=args.name, fields=fields)
    finally:
        database.dispose()
    print(f"pool {args.name} created with {_count(len(pool.members), 'member')}")
    print("\n".join(_lines(pool)))
    return 0


def cmd_pool_update(args: argparse.Namespace) -> int:
    from app import pools

    fields = _fields(args)
    database = open_db(args)
    try:
        with database.transaction() as session:
            pool = pools.replace_pool(session, name=args.name, fields=fields)
    finally:
        database.dispose()
    print(f"pool {args.name} replaced; it has {_count(len(pool.members), 'member')}")
    print("\n".join(_lines(pool)))
    return 0


def cmd_pool_list(args: argparse.Namespace) -> int:
    from app import pools

    database = open_db(args)
    try:
        with database.transaction() as session:
            stored = pools.list_pools(session)
    finally:
        database.dispose()
    if not stored:
        print(
            f"no pools yet; create one with 'gpucast pool create NAME --node-price USD "
            f"--member {MEMBER_FORMAT}'"
        )
        return 0
    width = max(len("POOL"), *(len(p.name) for p in stored))
    print(f"{'POOL':<{width}}  {'GPU TYPE':<12}  GPUS/NODE  NODE USD/H  QUOTA  MEMBERS")
    for p in stored:
        quota = "-" if p.quota_nodes is None else str(p.quota_nodes)
        print(
            f"{p.name:<{width}}  {p.gpu_type or '-':<12}  {p.gpus_per_node:>9}  "
            f"{p.on_demand_usd_per_hour:>10.2f}  {quota:>5}  {len(p.members):>7}"
        )
    return 0


def cmd_pool_show(args: argparse.Namespace) -> int:
    from app import pools

    database = open_db(args)
    try:
        with database.transaction() as session:
            pool = pools.get_pool(session, name=args.name)
    finally:
        database.dispose()
    if args.json:
        print(json.dumps(pools.as_dict(pool), default=_json_default, allow_nan=False))
    else:
        print("\n".join(_lines(pool)))
    return 0


def cmd_pool_delete(args: argparse.Namespace) -> int:
    from app import pools

    database = open_db(args)
    try:
        with database.transaction() as session:
            pools.delete_pool(session, name=args.name)
    finally:
        database.dispose()
    print(f"pool {args.name} deleted; its series and GPU profiles stay")
    return 0


# -- input ------------------------------------------------------------------------------------


def _fields(args: argparse.Namespace) -> PoolFields:
    """The pool the flags or the file describe, validated (one-line InputError otherwise)."""
    given = [f"--{dest.replace('_', '-')}" for dest, _, _ in FLAGS if getattr(args, dest)]
    if args.file is not None:
        if given or args.member:
            raise InputError(f"--file describes the whole pool; drop {(given or ['--member'])[0]}")
        data = _read_file(args.file, name=args.name)
        return _validate(data, where=lambda loc: f"{args.file}: {_path(loc)}")
    if args.node_price is None:
        raise InputError(
            f"give --node-price USD (on-demand USD per node-hour) and --member {MEMBER_FORMAT} "
            "options, or --file"
        )
    body: dict[str, Any] = {"node_prices": {}}
    for dest, path, kind in FLAGS:
        text = getattr(args, dest)
        if text is not None:
            target = body["node_prices"] if path[0] == "node_prices" else body
            target[path[-1]] = _convert(text, kind, flag=f"--{dest.replace('_', '-')}")
    body["members"] = [_parse_member(text) for text in args.member]
    return _validate(body, where=lambda loc: _flag_of(loc, args.member))


def _convert(text: str, kind: type, *, flag: str) -> Any:
    if kind is str:
        return text
    try:
        return kind(text)
    except ValueError:
        noun = "a whole number" if kind is int else "a number"
        raise InputError(f"{flag} must be {noun}, not {echo(text)}") from None


def _parse_member(text: str) -> dict[str, Any]:
    """``SERIES:PROFILE[:PRIORITY[:spot]]``. Series names may hold ':' and profile names may
    not, so fields are read from the right: a last field ``spot`` is the flag, then with three
    fields or more the last is the priority."""
    parts = text.split(":")
    member: dict[str, Any] = {}
    if len(parts) > 2 and parts[-1] == "spot":
        member["spot_ok"] = True
        parts.pop()
    if len(parts) > 2:
        member["priority"] = parts.pop()
    if len(parts) < 2 or not all(parts):
        raise InputError(f"--member {echo(text)}: use {MEMBER_FORMAT}")
    member["profile"] = parts.pop()
    member["series"] = ":".join(parts)
    return member


def _read_file(text: str, *, name: str) -> dict[str, Any]:
    """The pool body in a JSON (``.json``) or YAML file; a ``name`` in it must be ``name``."""
    path = Path(text)
    if not path.exists():
        raise InputError(f"file not found: {text}")
    if path.is_dir():
        raise InputError(f"{text} is a directory, not a file")
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{text} is not UTF-8 text (byte {exc.start})") from None
    data = (
        parse_json(content, what=text)
        if path.suffix.lower() == ".json"
        else _parse_yaml(content, text)
    )
    if not isinstance(data, dict):
        raise InputError(f"{text}: expected an object with the pool's fields, not {_kind(data)}")
    named = data.pop("name", None)
    if named is not None and named != name:
        raise InputError(f"{text} describes pool {echo(named)}, not {echo(name)}")
    return data


def _parse_yaml(content: str, text: str) -> Any:
    import yaml

    check_json_depth(content, what=text)  # brackets nest in YAML's flow style alike
    try:
        return yaml.safe_load(content)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or type(exc).__name__
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InputError(f"{text}: not valid YAML: {problem}{at}") from None
    except RecursionError:
        raise InputError(f"{text}: nests too deeply") from None
    except ValueError as exc:  # a scalar its constructor refuses: 2026-13-01, 5,000 digits
        raise InputError(f"{text}: not readable YAML ({str(exc).split(';')[0]})") from None


def _kind(data: Any) -> str:
    return "nothing" if data is None else f"a {type(data).__name__}"


def _validate(body: dict[str, Any], *, where: Callable[[tuple[Any, ...]], str]) -> PoolFields:
    from app.pools.spec import PoolFields

    try:
        return PoolFields.model_validate(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        more = exc.error_count() - 1
        tail = f" (and {_count(more, 'more problem')})" if more else ""
        raise InputError(f"{where(tuple(error['loc']))}: {error['msg']}{tail}") from None


def _path(loc: tuple[Any, ...]) -> str:
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    return text.lstrip(".") or "body"


def _flag_of(loc: tuple[Any, ...], members: list[str]) -> str:
    if len(loc) >= 2 and loc[0] == "members" and isinstance(loc[1], int):
        detail = f" ({_path(loc[2:])})" if len(loc) > 2 else ""
        return f"--member {echo(members[loc[1]])}{detail}"
    for dest, path, _ in FLAGS:
        if loc[: len(path)] == path:
            return f"--{dest.replace('_', '-')}"
    return _path(loc)


# -- output -----------------------------------------------------------------------------------


def _lines(pool: StoredPool) -> list[str]:
    """A pool as text: its settings, then one row per member."""

    def usd(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    settings = {
        "pool": pool.name,
        "gpu_type": pool.gpu_type or "- (any)",
        "gpus_per_node": pool.gpus_per_node,
        "node USD/h": f"on-demand {usd(pool.on_demand_usd_per_hour)}, reserved "
        f"{usd(pool.reserved_usd_per_hour)}, spot {usd(pool.spot_usd_per_hour)}",
        "quota_nodes": "-" if pool.quota_nodes is None else pool.quota_nodes,
        "spot_interruption": f"{pool.spot_interruption:g}",
        "created_at": f"{pool.created_at:%Y-%m-%d %H:%M:%S}Z",
        "updated_at": f"{pool.updated_at:%Y-%m-%d %H:%M:%S}Z",
    }
    width = max(len(key) for key in settings)
    lines = [f"  {key:<{width}}  {value}" for key, value in settings.items()]
    if not pool.members:
        return [*lines, "  no members"]
    rows = [
        (
            m.series,
            m.profile,
            m.priority,
            "yes" if m.spot_ok else "no",
            str(m.gpus_per_replica),
            f"{m.tokens_per_s_per_gpu:g}",
        )
        for m in pool.members
    ]
    header = ("SERIES", "PROFILE", "PRIORITY", "SPOT", "GPUS/REPLICA", "TOKENS/S/GPU")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append(
            "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        )
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
