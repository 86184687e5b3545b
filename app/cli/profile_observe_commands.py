"""``gpucast profile observe``: production hours of the fleet a GPU profile serves, from a CSV
or JSON file (the fields of ``POST /v1/gpu-profiles/{name}/observations``)."""

from __future__ import annotations

import argparse
import csv
import io
from typing import Any

from app.cli.shared import open_db
from app.common.names import parse_json
from app.errors import InputError

EXIT_CODES = "Exit codes: 0 ok, 2 bad input or unknown profile, 3 database unavailable."


def register(profile_sub: Any) -> None:
    observe = profile_sub.add_parser(
        "observe",
        help="store production hours of the fleet a profile serves (CSV or JSON)",
        description="Production hours of the profile's fleet, one row per hour: hour (its "
        "start, ISO 8601), replicas, requests, prompt_tokens, completion_tokens (totals of the "
        "hour across the replicas), ttft_p95_s, tpot_p95_s (as served). A CSV with these "
        "columns, or a JSON list of such objects. An hour stored before is replaced; a bad row "
        "is refused with its row and field, and nothing is stored. " + EXIT_CODES,
    )
    observe.add_argument("name", help="profile name")
    observe.add_argument("file", metavar="FILE", help="CSV or JSON file (.json: JSON)")
    observe.set_defaults(handler=cmd_profile_observe)


def read_rows(path: str) -> tuple[list[Any], bool]:
    """The file's rows as objects, and whether their values are text (a CSV's cells)."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if path.lower().endswith(".json") or text.lstrip().startswith("["):
        return parse_json(text, what=path), False
    reader = csv.DictReader(io.StringIO(text))
    rows: list[Any] = []
    try:
        header = reader.fieldnames or []
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:  # a dict keeps the last copy: which one was meant is not known
            raise InputError(f"{path}: column {repeated[0]!r} appears more than once")
        for row in reader:
            if None in row:
                raise InputError(f"{path}: row {len(rows) + 1} has more cells than columns")
            rows.append(dict(row))
    except csv.Error as exc:
        raise InputError(f"{path}: not a CSV file ({exc})") from None
    return rows, True


def cmd_profile_observe(args: argparse.Namespace) -> int:
    from app.db import repository
    from app.profiles.observations import store_observations, validated_rows
    from app.profiles.slo_capacity import lab_expectations

    rows, text_values = read_rows(args.file)
    try:
        hours = validated_rows(rows, text_values=text_values)
    except InputError as exc:
        raise InputError(f"{args.file}: {exc}") from None
    database = open_db(args)
    try:
        with database.read_transaction() as session:  # the fit outside the write lock
            profile = repository.get_gpu_profile(session, name=args.name)
            expected = lab_expectations(session, profile=profile, hours=hours)
        with database.transaction() as session:
            profile = repository.get_gpu_profile(session, name=args.name)
            written = store_observations(session, profile=profile, hours=hours, expected=expected)
    finally:
        database.dispose()
    first, last = min(h.hour for h in hours), max(h.hour for h in hours)
    print(
        f"{written} production hour(s) of GPU profile {args.name} stored "
        f"({first:%Y-%m-%d %H:%M} – {last:%Y-%m-%d %H:%M} UTC); an hour stored before was replaced"
    )
    return 0
