"""Import a measured load test as a GPU profile: read the files (CSV, ``vllm bench serve``,
genai-perf, guidellm, inference-perf or genai-bench), check them against the profile's figures
(a GPU count or model the files state must agree with the caller's; an absent replica size or
model is the files'), and store the profile and its table in the caller's transaction — all of it or
nothing.

A load-test profile still carries one ``tokens_per_s_per_gpu`` figure (what a plan without a
latency SLO divides by): the median, over the measured mixes, of the highest token throughput
(prompt + completion tokens per second) measured at that mix, per GPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.common.names import check_json_depth, check_text, echo
from app.db import repository
from app.db.models import GpuProfile, GpuProfileLoadTest
from app.errors import InputError
from app.profiles.loadtests import store_table, stored_table

SETUP_TEXT_LIMITS = {"model": 200, "gpu_type": 100, "precision": 100, "engine": 200}
PRICE_FIELDS = ("usd_per_hour_on_demand", "usd_per_hour_reserved", "usd_per_hour_spot")


@dataclass(frozen=True)
class ProfileFields:
    """What the operator says about the profile besides the files."""

    gpu_type: str
    #: None (both): the model / the GPU count or tensor-parallel degree the files state
    model: str | None
    gpus_per_replica: int | None
    usd_per_hour_on_demand: float | None = None
    usd_per_hour_reserved: float | None = None
    usd_per_hour_spot: float | None = None
    parameters: float | None = None
    context_length_tokens: int | None = None
    peak_tflops: float | None = None
    memory_bandwidth_gb_per_s: float | None = None


#: A profile's figures for the physical ceilings of its SLO capacity (null: the catalog's).
PHYSICS_FIELDS = ("parameters", "context_length_tokens", "peak_tflops", "memory_bandwidth_gb_per_s")


@dataclass(frozen=True)
class SetupChoice:
    """The one setup to take from CSV files holding several (None: the file must hold one)."""

    tensor_parallel: int | None = None
    precision: str | None = None


def read_table(files: Sequence[tuple[str, str]], choice: SetupChoice, *, setup_flags: str) -> Any:
    """The ``capacity.LoadTestTable`` of (file name, text) pairs; a bad file is a
    ``capacity.LoadTestFormatError`` naming file, row and column. ``setup_flags`` names how
    the caller selects a setup (``--tp and --precision``), for a file that holds several."""
    from capacity import LoadTestFormatError, read_loadtest_files

    for name, text in files:
        if text.lstrip()[:1] in ("{", "["):
            # before parsing: a deeply nested file would exhaust the JSON parser's recursion
            check_json_depth(text, what=f"{echo(name)}: the JSON")
    try:
        return read_loadtest_files(
            files, tensor_parallel=choice.tensor_parallel, precision=choice.precision
        )
    except LoadTestFormatError as exc:
        message = str(exc).replace("(select one setup)", f"(select one with {setup_flags})")
        raise LoadTestFormatError(message) from exc


def saturation_tokens_per_s_per_gpu(table: Any, *, gpus_per_replica: int) -> float:
    """Median over mixes of the highest measured tokens/s at the mix, per GPU."""
    frame = table.frame
    tokens = frame["request_throughput_rps"] * (frame["prompt_tokens"] + frame["completion_tokens"])
    per_mix = tokens.groupby([frame["prompt_tokens"], frame["completion_tokens"]]).max()
    return float(np.median(per_mix.to_numpy(dtype=float))) / gpus_per_replica


def check_physics(table: Any, fields: ProfileFields, *, gpus: int) -> None:
    """No row may imply more tokens/s per GPU than the fastest catalog GPU computes for the
    model (its parameters: the profile's figure, else the catalog's for the profile's or the
    table's model name; unknown: the bound of the smallest model served)."""
    from capacity.measured.loadtest_checks import check_physical_rates
    from capacity.sizing.ceilings import model_by_name

    spec = model_by_name(fields.model) or model_by_name(table.model)
    parameters = fields.parameters or (spec.compute_parameters if spec else None)
    check_physical_rates(
        table.frame,
        table.origins or [f"row {i + 1}" for i in range(len(table.frame))],
        gpus=gpus,
        parameters=parameters,
        peak_tflops=fields.peak_tflops,
    )


def check_setup_text(table: Any, *, source: str) -> None:
    """The setup the files name (model, GPU, precision, engine) is stored: it must be text a
    database keeps, within the column sizes."""
    for attribute, limit in SETUP_TEXT_LIMITS.items():
        value = getattr(table, attribute)
        if value is None:
            continue
        check_text(value, what=f"{echo(source)}: the {attribute} value", name=True)
        if len(value) > limit:
            raise InputError(
                f"{echo(source)}: the {attribute} value is {len(value)} characters long; "
                f"at most {limit}"
            )


def replica_size(table: Any, fields: ProfileFields) -> int:
    """The caller's replica size, else the one the files state; a size the files contradict
    is refused (:func:`check_replica_size`)."""
    if fields.gpus_per_replica is None:
        if table.tensor_parallel is None:
            raise InputError(
                "gpus_per_replica is required: the load-test files state no GPU count or "
                "tensor-parallel degree"
            )
        return int(table.tensor_parallel)
    check_replica_size(table, fields)
    return fields.gpus_per_replica


def check_model(table: Any, fields: ProfileFields) -> None:
    """The files' model and the profile's must be the same size: a table of an 8B model
    stored as a 70B profile would size every plan (and its physical ceilings) wrongly. Names
    the catalog does not know are not compared."""
    from capacity.sizing.ceilings import model_by_name

    measured, given = model_by_name(table.model), model_by_name(fields.model)
    if measured is None or given is None:
        return
    if measured.compute_parameters != given.compute_parameters:
        raise InputError(
            f"the load test measured model {echo(table.model)} ({measured.name}) but model is "
            f"{echo(fields.model)} ({given.name}); give the model the files measured"
        )


def check_replica_size(table: Any, fields: ProfileFields) -> None:
    """A table measured at tensor-parallel degree N is what N GPUs deliver: a replica of
    another size would scale every per-GPU figure wrongly."""
    measured = table.tensor_parallel
    if measured is not None and measured != fields.gpus_per_replica:
        raise InputError(
            f"the load test was measured at tensor-parallel degree {measured} "
            f"({measured} GPUs per replica) but gpus_per_replica is {fields.gpus_per_replica}; "
            f"give {measured}, or import the setup measured at {fields.gpus_per_replica}"
        )


def check_stored_replica_size(
    session: Session, *, profile: GpuProfile, gpus_per_replica: int
) -> None:
    """Changing a load-test profile's replica size away from the table's tensor-parallel degree
    would scale every per-GPU figure of the table wrongly: an InputError."""
    row = stored_table(session, profile_id=profile.id)
    if row is not None and row.tensor_parallel not in (None, gpus_per_replica):
        raise InputError(
            f"GPU profile {echo(profile.name)} carries a load test measured at tensor-parallel "
            f"degree {row.tensor_parallel}; gpus_per_replica must stay {row.tensor_parallel} "
            f"(import the setup measured at {gpus_per_replica} instead)"
        )


def import_profile(
    session: Session,
    *,
    name: str,
    fields: ProfileFields,
    files: Sequence[tuple[str, str]],
    choice: SetupChoice = SetupChoice(),
    replace: bool = False,
    setup_flags: str = "tensor_parallel and precision",
) -> tuple[GpuProfile, GpuProfileLoadTest, bool]:
    """Create (or, with ``replace``, overwrite) profile ``name`` with the files' table.

    Returns (profile, stored table, created). Without ``replace`` an existing name is a
    ConflictError. Nothing is written when the files are refused.
    """
    table = read_table(files, choice, setup_flags=setup_flags)
    check_setup_text(table, source=", ".join(n for n, _ in files))
    gpus = replica_size(table, fields)
    model = fields.model or table.model
    if model is None:
        raise InputError("model is required: the load-test files name no model")
    fields = dataclasses.replace(fields, model=model, gpus_per_replica=gpus)
    check_model(table, fields)
    check_physics(table, fields, gpus=gpus)
    values: dict[str, Any] = {
        "gpu_type": fields.gpu_type,
        "model": model,
        "gpus_per_replica": gpus,
        "tokens_per_s_per_gpu": saturation_tokens_per_s_per_gpu(table, gpus_per_replica=gpus),
        **{price: getattr(fields, price) for price in PRICE_FIELDS},
        **{name: getattr(fields, name) for name in PHYSICS_FIELDS},
    }
    existing = (
        session.scalar(select(GpuProfile).where(GpuProfile.name == name)) if replace else None
    )
    if existing is None:
        profile = repository.create_gpu_profile(session, name=name, **values)
    else:
        profile = repository.update_gpu_profile(session, name=name, **values)
    row = store_table(
        session, profile=profile, table=table, sources=[PurePath(n).name for n, _ in files]
    )
    return profile, row, existing is None
