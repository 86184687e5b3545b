"""``gpucast profile``: GPU profiles — one tokens/s figure (``create``) or a measured load-test
table (``import``) — listed, shown, deleted, and the SLO capacity of a load-test profile at
any prompt/completion mix (``capacity``)."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from pydantic import ValidationError

from app.cli import profile_observe_commands
from app.cli.shared import (
    PHYSICS_FLAGS,
    add_physics_arguments,
    add_slo_arguments,
    number,
    open_db,
    physics_values,
    slo_from,
)
from app.common.words import count
from app.errors import ConflictError, InputError

EXIT_CODES = "Exit codes: 0 ok, 2 bad input or unknown profile, 3 database unavailable."
PRICE_FLAGS = (
    ("usd_per_hour_on_demand", "on-demand USD per GPU-hour"),
    ("usd_per_hour_reserved", "reserved (committed) USD per GPU-hour"),
    ("usd_per_hour_spot", "spot USD per GPU-hour"),
)


def register(sub: Any) -> None:
    profile = sub.add_parser(
        "profile",
        help="GPU profiles: one tokens/s figure or a measured load-test table",
        description="What one GPU delivers for one model, and what it costs. " + EXIT_CODES,
    )
    profile_sub = profile.add_subparsers(dest="profile_command", required=True, metavar="ACTION")
    create = profile_sub.add_parser(
        "create",
        help="create a profile from one tokens/s-per-GPU figure",
        description="A plain profile: plans divide the load by --tokens-per-s-per-gpu. "
        + EXIT_CODES,
    )
    _add_profile_fields(create)
    create.add_argument(
        "--tokens-per-s-per-gpu", required=True, metavar="X", help="tokens/s one GPU delivers"
    )
    create.set_defaults(handler=cmd_profile_create)
    _register_import(profile_sub)
    _register_capacity(profile_sub)
    profile_observe_commands.register(profile_sub)
    listing = profile_sub.add_parser("list", help="list profiles")
    listing.set_defaults(handler=cmd_profile_list)
    show = profile_sub.add_parser(
        "show",
        help="a profile's figures and load-test table",
        description="The profile's figures and prices; for a load-test profile, the table's "
        "setup and every measured row (mix, load, throughput, TTFT and TPOT percentiles). "
        "--json prints the API's answer: the table's summary (its rows: GET "
        "/v1/gpu-profiles/{name}/loadtest). " + EXIT_CODES,
    )
    show.add_argument("name", help="profile name")
    show.add_argument("--json", action="store_true", help="print the API's JSON")
    show.set_defaults(handler=cmd_profile_show)
    delete = profile_sub.add_parser(
        "delete", help="delete a profile (refused while a deployment or pool uses it)"
    )
    delete.add_argument("name", help="profile name")
    delete.set_defaults(handler=cmd_profile_delete)


def _register_import(profile_sub: Any) -> None:
    load = profile_sub.add_parser(
        "import",
        help="create a profile from a measured load test (CSV, vllm bench serve, genai-perf, "
        "guidellm, inference-perf or genai-bench)",
        description="A profile measured by a load test: a load-test CSV (the schema of "
        "published NIM/vLLM tables), `vllm bench serve --save-result` files (one per rate), "
        "genai-perf exports, a guidellm report (JSON or YAML), inference-perf stage reports or "
        "genai-bench runs (and experiment_metadata.json). A GPU count or model the files state "
        "must agree with the flags, and is taken when --gpus-per-replica or --model is absent. "
        "A bad file is refused naming file, row and column; nothing is stored. " + EXIT_CODES,
    )
    load.add_argument("files", nargs="+", metavar="FILE", help="load-test file(s), one format")
    _add_profile_fields(load, from_files=True)
    load.add_argument("--tp", metavar="N", help="take this TP degree of a CSV holding several")
    load.add_argument("--precision", metavar="P", help="take this precision of such a CSV")
    load.add_argument(
        "--replace", action="store_true", help="overwrite a profile of that name and its table"
    )
    load.set_defaults(handler=cmd_profile_import)


def _register_capacity(profile_sub: Any) -> None:
    capacity = profile_sub.add_parser(
        "capacity",
        usage="gpucast profile capacity [-h] --prompt-tokens P --completion-tokens C "
        "--ttft-p95-s S --tpot-p95-s S [--allow-extrapolation] [--json] name",
        help="SLO capacity of a load-test profile at a prompt/completion mix",
        description="The largest request rate one replica sustains within a p95 TTFT and TPOT "
        "SLO at a mix: the measured knee at a measured mix, else the serving-cost model fitted "
        "to the table (interpolated or extrapolated, as the answer says), with the range it is "
        "expected in. A mix more than 4x beyond the measured range is refused unless "
        "--allow-extrapolation. " + EXIT_CODES,
    )
    capacity.add_argument("name", help="profile name")
    capacity.add_argument("--prompt-tokens", required=True, metavar="P", help="per request")
    capacity.add_argument("--completion-tokens", required=True, metavar="C", help="per request")
    add_slo_arguments(capacity, required=True)
    capacity.add_argument(
        "--allow-extrapolation",
        action="store_true",
        help="answer a mix more than 4x beyond the measured range (refused otherwise)",
    )
    capacity.add_argument("--json", action="store_true", help="print the API's JSON")
    capacity.set_defaults(handler=cmd_profile_capacity)


def _add_profile_fields(parser: argparse.ArgumentParser, *, from_files: bool = False) -> None:
    """The profile's flags; ``from_files`` (an import): --model and --gpus-per-replica default
    to what the load-test files state."""
    parser.add_argument("--name", required=True, help="profile name (letters, digits, ._-)")
    parser.add_argument("--gpu-type", required=True, metavar="T", help="GPU type, e.g. H100-80G")
    parser.add_argument("--model", required=not from_files, metavar="M", help="e.g. llama-70b")
    parser.add_argument("--gpus-per-replica", metavar="N", help="GPUs (tensor-parallel degree)")
    for dest, text in PRICE_FLAGS:
        parser.add_argument(f"--{dest.replace('_', '-')}", metavar="X", help=text)
    add_physics_arguments(parser)


def profile_body(args: argparse.Namespace, *, tokens_per_s_per_gpu: float | None) -> Any:
    """The profile the flags describe, validated as ``POST /v1/gpu-profiles`` validates it."""
    from app.api.schemas import GpuProfileCreate

    body: dict[str, Any] = {
        "name": args.name,
        "gpu_type": args.gpu_type,
        "model": args.model,
        "tokens_per_s_per_gpu": tokens_per_s_per_gpu,
    }
    if args.gpus_per_replica is not None:
        body["gpus_per_replica"] = number(args.gpus_per_replica, "--gpus-per-replica", whole=True)
    for dest, _ in PRICE_FLAGS:
        body[dest] = number(getattr(args, dest), f"--{dest.replace('_', '-')}")
    body.update(physics_values(args))
    try:
        return GpuProfileCreate.model_validate(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = str(error["loc"][0]) if error["loc"] else ""
        flag = PHYSICS_FLAGS.get(loc, "--" + loc.replace("_", "-")) if loc else "profile"
        raise InputError(f"{flag}: {error['msg']}") from None


def cmd_profile_create(args: argparse.Namespace) -> int:
    from app.db import repository

    rate = number(args.tokens_per_s_per_gpu, "--tokens-per-s-per-gpu")
    body = profile_body(args, tokens_per_s_per_gpu=rate)
    database = open_db(args)
    try:
        with database.transaction() as session:
            profile = repository.create_gpu_profile(session, **body.model_dump())
            shown = _lines(profile, None)
    finally:
        database.dispose()
    print(f"GPU profile {args.name} created")
    print("\n".join(shown))
    return 0


def cmd_profile_import(args: argparse.Namespace) -> int:
    import capacity
    from app.profiles.loadtest_import import ProfileFields, SetupChoice, import_profile

    # The tokens/s figure comes from the table (and the model and replica size, when not
    # given, from the files); placeholders let the other fields be validated exactly as
    # POST /v1/gpu-profiles validates them.
    given = args.model is not None
    named = argparse.Namespace(**{**vars(args), "model": args.model if given else "model"})
    body = profile_body(named, tokens_per_s_per_gpu=1.0)
    absent = {key: None for key in ("model", "gpus_per_replica") if getattr(args, key) is None}
    fields = ProfileFields(
        **{**body.model_dump(exclude={"name", "tokens_per_s_per_gpu"}), **absent}
    )
    choice = SetupChoice(
        tensor_parallel=number(args.tp, "--tp", whole=True),
        precision=args.precision,
    )
    files = [(path, _read_text(path)) for path in args.files]
    database = open_db(args)
    try:
        with database.transaction() as session:
            try:
                profile, row, created = import_profile(
                    session,
                    name=args.name,
                    fields=fields,
                    files=files,
                    choice=choice,
                    replace=args.replace,
                    setup_flags="--tp and --precision",
                )
            except capacity.CapacityError as exc:
                raise InputError(str(exc)) from None
            except ConflictError as exc:
                raise ConflictError(f"{exc}; pass --replace to overwrite it") from None
            shown = _lines(profile, row)
            notes = list(row.meta.get("notes") or [])
    finally:
        database.dispose()
    print(f"GPU profile {args.name} {'imported' if created else 'replaced'}")
    print("\n".join(shown))
    for note in notes:
        print(f"  note: {note}")
    return 0


def cmd_profile_capacity(args: argparse.Namespace) -> int:
    import capacity
    from app.profiles.slo_capacity import answer_text, profile_slo_capacity

    prompt = _tokens(args.prompt_tokens, "--prompt-tokens")
    completion = _tokens(args.completion_tokens, "--completion-tokens")
    slo = slo_from(args)
    if slo is None:
        raise InputError("an SLO is needed: give --ttft-p95-s and --tpot-p95-s")
    database = open_db(args)
    try:
        with database.transaction() as session:
            try:
                answer = profile_slo_capacity(
                    session,
                    name=args.name,
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    slo=slo,
                    allow_extrapolation=args.allow_extrapolation,
                    allow_switch="--allow-extrapolation",
                )
            except capacity.CapacityError as exc:
                raise InputError(str(exc)) from None
    finally:
        database.dispose()
    if args.json:
        print(json.dumps(answer, allow_nan=False))
        return 0
    print(answer_text(answer))
    return 0


def _tokens(text: str, flag: str) -> float:
    from app.profiles.slo_capacity import MAX_TOKENS_PER_REQUEST as MAX_TOKENS

    value = number(text, flag)
    if not (math.isfinite(value) and 1 <= value <= MAX_TOKENS):
        raise InputError(f"{flag} must be tokens per request in [1, {MAX_TOKENS:,}], not {text}")
    return float(value)


def _read_text(path: str) -> str:
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def cmd_profile_list(args: argparse.Namespace) -> int:
    from app.db import repository
    from app.profiles.loadtests import stored_tables

    database = open_db(args)
    try:
        with database.transaction() as session:
            listed = repository.list_gpu_profiles(session)
            tables = stored_tables(session)
    finally:
        database.dispose()
    if not listed:
        print("no GPU profiles yet; 'gpucast profile create' or 'gpucast profile import'")
        return 0
    width = max(len("PROFILE"), *(len(p.name) for p in listed))
    print(f"{'PROFILE':<{width}}  {'GPU TYPE':<16}  GPUS  TOKENS/S/GPU  USD/GPU-H  LOAD TEST")
    for p in listed:
        price = "-" if p.usd_per_hour_on_demand is None else f"{p.usd_per_hour_on_demand:.2f}"
        table = tables.get(p.id)
        measured = count(len(table.records), "row") if table is not None else "-"
        print(
            f"{p.name:<{width}}  {p.gpu_type[:16]:<16}  {p.gpus_per_replica:>4}  "
            f"{p.tokens_per_s_per_gpu:>12,.0f}  {price:>9}  {measured}"
        )
    return 0


def cmd_profile_show(args: argparse.Namespace) -> int:
    from app.db import repository
    from app.profiles.loadtests import profile_view, stored_table

    database = open_db(args)
    try:
        with database.transaction() as session:
            profile = repository.get_gpu_profile(session, name=args.name)
            table = stored_table(session, profile_id=profile.id)
            view = profile_view(profile, table)
            shown = _lines(profile, table)
    finally:
        database.dispose()
    if args.json:
        print(json.dumps(view, default=_json_default, allow_nan=False))
    else:
        print("\n".join(shown))
    return 0


def cmd_profile_delete(args: argparse.Namespace) -> int:
    from app.db import repository

    database = open_db(args)
    try:
        with database.transaction() as session:
            repository.delete_gpu_profile(session, name=args.name)
    finally:
        database.dispose()
    print(f"GPU profile {args.name} deleted")
    return 0


def _lines(profile: Any, table: Any) -> list[str]:
    from app.profiles.loadtests import table_summary

    rows: list[tuple[str, Any]] = [
        ("name", profile.name),
        ("gpu type", profile.gpu_type),
        ("model", profile.model),
        ("gpus per replica", profile.gpus_per_replica),
        ("tokens/s per GPU", f"{profile.tokens_per_s_per_gpu:,.1f}"),
    ]
    rows += [(dest.replace("_", " "), getattr(profile, dest)) for dest, _ in PRICE_FLAGS]
    if table is not None:
        summary = table_summary(table)
        mixes = count(len(summary["mixes"]), "mix", "mixes")
        rows.append(("load test", f"{count(summary['rows'], 'row')} at {mixes}"))
        rows += [
            (f"  {key}", summary[key])
            for key in ("model", "gpu_type", "tensor_parallel", "precision")
        ]
        rows.append(("  sources", ", ".join(summary["sources"]) or None))
    width = max(len(label) for label, _ in rows)
    lines = [f"  {label:<{width}}  {'-' if value is None else value}" for label, value in rows]
    return lines + (_measured_rows(table.records) if table is not None else [])


# The measured rows as ``profile show`` prints them: (column, header, format).
MEASURED = (
    ("prompt_tokens", "PROMPT", "{:,.0f}"),
    ("completion_tokens", "COMPLETION", "{:,.0f}"),
    ("concurrency", "CONCURRENCY", "{:g}"),
    ("request_rate", "RATE/S", "{:g}"),
    ("request_throughput_rps", "REQ/S", "{:.4g}"),
    ("ttft_p50_s", "TTFT P50", "{:.4g}"),
    ("ttft_p95_s", "TTFT P95", "{:.4g}"),
    ("ttft_p99_s", "TTFT P99", "{:.4g}"),
    ("ttft_mean_s", "TTFT MEAN", "{:.4g}"),
    ("tpot_p50_s", "TPOT P50", "{:.4g}"),
    ("tpot_p95_s", "TPOT P95", "{:.4g}"),
    ("tpot_p99_s", "TPOT P99", "{:.4g}"),
    ("tpot_mean_s", "TPOT MEAN", "{:.4g}"),
)


def _measured_rows(records: list[dict[str, Any]]) -> list[str]:
    """The load test's rows as a table (latencies in seconds), columns without any value left
    out."""
    shown = [c for c in MEASURED if any(r.get(c[0]) is not None for r in records)]
    cells = [
        ["-" if r.get(key) is None else fmt.format(r[key]) for key, _, fmt in shown]
        for r in records
    ]
    widths = [
        max(len(head), *(len(row[i]) for row in cells)) for i, (_, head, _) in enumerate(shown)
    ]
    lines = ["", f"  measured rows ({count(len(records), 'row')}; latencies in seconds):"]
    lines.append("  " + "  ".join(h.rjust(w) for (_, h, _), w in zip(shown, widths, strict=True)))
    lines += [
        "  " + "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells
    ]
    return lines


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(type(value).__name__)
