"""Read load-test files into a LoadTestTable: the CSV schema, and format detection by content.

The CSV schema is the one of the public load-test tables gpucast is validated on (column
names such as ``isl, osl, concurrency, request_rate, request_throughput_rps, ttft_p95_s,
itl_p95_s``); canonical column names (``prompt_tokens``, ``tpot_p95_s`` …) are read too.
The other formats (``vllm bench serve``, genai-perf, guidellm, inference-perf, genai-bench)
are detected and read by :mod:`capacity.measured.loadtest_formats`.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from capacity.errors import LoadTestFormatError
from capacity.measured.loadtest import LOADTEST_COLUMNS, LoadTestTable, make_table
from capacity.measured.loadtest_checks import (
    MAX_LOADTEST_ROWS,
    check_row_count,
    group_mixes,
    validated_frame,
)
from capacity.measured.loadtest_formats import detect_format, is_document, read_format

SETUP_COLUMNS = {
    "model": "models",
    "gpu": "GPUs",
    "tp": "tensor-parallel degrees",
    "precision": "precisions",
}
DIRECT_COLUMNS = (
    "concurrency",
    "request_rate",
    "request_throughput_rps",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "ttft_mean_s",
)
LATENCY_ONLY = ("ttft_s", "tpot_s")
_NOT_FINITE = {"nan", "inf", "+inf", "-inf", "infinity", "-infinity", "+infinity"}


def read_loadtest_csv(
    text: str,
    *,
    file_name: str,
    tensor_parallel: int | None = None,
    precision: str | None = None,
) -> LoadTestTable:
    """A load-test CSV (one setup: one model, GPU, tensor-parallel degree and precision).

    ``tensor_parallel`` / ``precision`` keep only the rows of that setup (a file holding several
    is otherwise refused, naming them); a selection no row matches is refused, naming the
    setups the file holds.
    """
    raw = _select_setup(_parse_csv(text, file_name), file_name, tensor_parallel, precision)
    return _table_from_raw(raw, file_name, _single_setup(raw, file_name))


def read_loadtest_csv_setups(text: str, *, file_name: str) -> list[LoadTestTable]:
    """Every setup of a CSV holding several (e.g. TP4 and TP8, fp16 and fp8), one table each,
    in the order they first appear; rows keep their row numbers in messages."""
    raw = _parse_csv(text, file_name)
    keys = [column for column in ("model", "gpu", "tp", "num_gpus", "precision") if column in raw]
    if not keys:
        return [read_loadtest_csv(text, file_name=file_name)]
    tables = []
    for _, rows in raw.groupby(keys, sort=False):
        tables.append(_table_from_raw(rows, file_name, _single_setup(rows, file_name)))
    return tables


def _table_from_raw(raw: pd.DataFrame, file_name: str, setup: dict[str, object]) -> LoadTestTable:
    columns = set(raw.columns)
    latency_only = set(LATENCY_ONLY) <= columns and not columns & {"ttft_p95_s", "ttft_p99_s"}
    _check_required_columns(columns, latency_only, file_name)
    row_numbers = raw.index.to_numpy() + 1
    raw = raw.reset_index(drop=True)
    cell = _CellReader(raw, file_name, row_numbers)
    frame = pd.DataFrame({column: np.full(len(raw), math.nan) for column in LOADTEST_COLUMNS})
    for column in DIRECT_COLUMNS:
        if column in columns:
            frame[column] = cell.numbers(column)
    for stat in ("p50", "p95", "p99", "mean"):
        frame[f"tpot_{stat}_s"] = cell.numbers(f"tpot_{stat}_s").fillna(
            cell.numbers(f"itl_{stat}_s")
        )
    frame["prompt_tokens"], frame["completion_tokens"] = _mix_columns(cell, columns)
    notes: list[str] = []
    if latency_only:
        frame["ttft_p95_s"], frame["tpot_p95_s"] = cell.numbers("ttft_s"), cell.numbers("tpot_s")
        frame["request_throughput_rps"] = _littles_law_rps(frame)
        notes.append(
            "latency-only table: the single TTFT/TPOT value per load level is taken as "
            "the p95 estimate; request throughput derived by Little's law"
        )
    frame.insert(0, "_where", [f"{file_name}, row {n}" for n in row_numbers])
    checked, check_notes = validated_frame(frame, file_name=file_name)
    return make_table(
        checked,
        **setup,
        source_format="csv",
        throughput_derived=latency_only,
        latency_statistic="single value" if latency_only else "percentiles",
        notes=tuple(notes + check_notes),
    )


def read_loadtest_files(
    files: Sequence[tuple[str, str]],
    *,
    tensor_parallel: int | None = None,
    precision: str | None = None,
) -> LoadTestTable:
    """Read (file name, text) pairs of one format, detected by content, into one table.

    Several CSV files are concatenated (they must describe one setup); several JSON files are
    one row each (a guidellm report one row per benchmark; genai-bench's
    experiment_metadata.json goes with its run files). Files of different formats in one
    import are refused. ``tensor_parallel`` and ``precision`` select one setup of CSV files
    that hold several (other files hold one setup: a selection is refused there).
    """
    if not files:
        raise LoadTestFormatError("no load-test files given")
    _check_size(files)
    formats = {name: detect_format(name, text) for name, text in files}
    kinds = sorted(set(formats.values()))
    if len(kinds) > 1:
        listing = ", ".join(f"{name} ({kind})" for name, kind in formats.items())
        raise LoadTestFormatError(f"one format per import; got {listing}")
    if kinds[0] != "csv":
        if precision is not None:
            raise LoadTestFormatError(
                f"{files[0][0]}: a {kinds[0]} file holds one setup and states no precision; "
                "select a tensor-parallel degree or precision only in a CSV import"
            )
        return _stated_setup(read_format(kinds[0], files), kinds[0], files, tensor_parallel)
    tables = [
        read_loadtest_csv(
            text, file_name=name, tensor_parallel=tensor_parallel, precision=precision
        )
        for name, text in files
    ]
    return tables[0] if len(tables) == 1 else _combine_csv(tables, [name for name, _ in files])


def _stated_setup(
    table: LoadTestTable, kind: str, files: Sequence[tuple[str, str]], tensor_parallel: int | None
) -> LoadTestTable:
    """A file other than a CSV holds one setup: a tensor-parallel degree asked for must be the
    GPU count it states."""
    if tensor_parallel is None or tensor_parallel == table.tensor_parallel:
        return table
    if table.tensor_parallel is None:
        raise LoadTestFormatError(
            f"{files[0][0]}: a {kind} file holds one setup and states no tensor-parallel "
            "degree; select a tensor-parallel degree or precision only in a CSV import"
        )
    raise LoadTestFormatError(
        f"{files[0][0]}: the files state GPU count / tensor-parallel degree "
        f"{table.tensor_parallel} but tensor-parallel degree {tensor_parallel} was selected"
    )


def _check_size(files: Sequence[tuple[str, str]]) -> None:
    """At most MAX_LOADTEST_ROWS rows, counted unparsed: a CSV line is one, a JSON or YAML
    document one (a guidellm report's benchmarks are counted once read)."""
    names = ", ".join(name for name, _ in files[:3]) + (", …" if len(files) > 3 else "")
    if len(files) > MAX_LOADTEST_ROWS:
        check_row_count(len(files), names)
    rows = sum(
        1 if is_document(text) else text.count("\n", 0, len(text.rstrip("\n"))) for _, text in files
    )
    check_row_count(rows, names)


def _parse_csv(text: str, file_name: str) -> pd.DataFrame:
    if not text.strip():
        raise LoadTestFormatError(f"{file_name}: empty file")
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, csv.Error, UnicodeError) as exc:
        raise LoadTestFormatError(f"{file_name}: not a readable CSV table ({exc})") from exc
    except pd.errors.EmptyDataError as exc:
        raise LoadTestFormatError(f"{file_name}: empty file") from exc
    raw.columns = [str(column).strip() for column in raw.columns]
    header = [name.strip() for name in next(csv.reader(io.StringIO(text)), [])]
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:  # pandas would read the first copy and rename the others
        raise LoadTestFormatError(f"{file_name}: column {repeated[0]!r} appears more than once")
    if raw.empty:
        raise LoadTestFormatError(f"{file_name}: no data rows (only a header)")
    return raw


def _select_setup(
    raw: pd.DataFrame, file_name: str, tensor_parallel: int | None, precision: str | None
) -> pd.DataFrame:
    """The rows of the selected setup (all rows when nothing is selected)."""
    if tensor_parallel is None and precision is None:
        return raw
    keep = pd.Series(True, index=raw.index)
    if tensor_parallel is not None:
        column = "tp" if "tp" in raw.columns else "num_gpus"
        if column not in raw.columns:
            raise LoadTestFormatError(
                f"{file_name}: no tp (or num_gpus) column to select tensor-parallel degree "
                f"{tensor_parallel} by"
            )
        degrees = pd.to_numeric(raw[column].str.strip(), errors="coerce")
        keep &= degrees == tensor_parallel
    if precision is not None:
        if "precision" not in raw.columns:
            raise LoadTestFormatError(
                f"{file_name}: no precision column to select precision {precision!r} by"
            )
        keep &= raw["precision"].str.strip().str.casefold() == precision.strip().casefold()
    if not keep.any():
        raise LoadTestFormatError(
            f"{file_name}: no row has the selected setup "
            f"({_describe_selection(tensor_parallel, precision)}); the file holds "
            f"{_describe_setups(raw)}"
        )
    return raw[keep]


def _describe_selection(tensor_parallel: int | None, precision: str | None) -> str:
    parts = [] if tensor_parallel is None else [f"tensor-parallel degree {tensor_parallel}"]
    return ", ".join(parts + ([] if precision is None else [f"precision {precision}"]))


def _describe_setups(raw: pd.DataFrame) -> str:
    tp_column = next((c for c in ("tp", "num_gpus") if c in raw.columns), None)
    columns = [c for c in (tp_column, "precision") if c is not None and c in raw.columns]
    if not columns:
        return "no setup columns"
    labels = raw[columns].apply(
        lambda row: " ".join(
            f"TP{row[c].strip()}" if c == tp_column else row[c].strip() for c in columns
        ),
        axis=1,
    )
    return ", ".join(dict.fromkeys(labels))


def _single_setup(raw: pd.DataFrame, file_name: str) -> dict[str, object]:
    if "tp" not in raw.columns and "num_gpus" in raw.columns:
        raw = raw.assign(tp=raw["num_gpus"])
    found: dict[str, list[str]] = {}
    for column in SETUP_COLUMNS:
        if column in raw.columns:
            found[column] = sorted({v.strip() for v in raw[column] if v.strip()})
    mixed = {column: values for column, values in found.items() if len(values) > 1}
    if mixed:
        parts = "; ".join(f"{SETUP_COLUMNS[c]} {', '.join(v)}" for c, v in mixed.items())
        raise LoadTestFormatError(
            f"{file_name} mixes setups ({parts}); import one model on one GPU type at one "
            "tensor-parallel degree and precision at a time (select one setup)"
        )

    def only(column: str) -> str | None:
        return found[column][0] if found.get(column) else None

    tp_text = only("tp")
    try:
        tensor_parallel = None if tp_text is None else int(float(tp_text))
    except ValueError as exc:
        raise LoadTestFormatError(f"{file_name}, column tp: {tp_text!r} is not a number") from exc
    engines = sorted({v.strip() for v in raw.get("engine", pd.Series(dtype=str)) if v.strip()})
    return {
        "model": only("model"),
        "gpu_type": only("gpu"),
        "tensor_parallel": tensor_parallel,
        "precision": only("precision"),
        "engine": engines[0] if len(engines) == 1 else None,
    }


def _check_required_columns(columns: set[str], latency_only: bool, file_name: str) -> None:
    missing = []
    if not columns & {"concurrency", "request_rate"}:
        missing.append("concurrency or request_rate")
    if not columns & {"prompt_tokens", "isl", "num_input_tokens_mean"}:
        missing.append("isl (or prompt_tokens)")
    if not columns & {"completion_tokens", "osl", "num_output_tokens_mean"}:
        missing.append("osl (or completion_tokens)")
    if not latency_only:
        if "request_throughput_rps" not in columns:
            missing.append("request_throughput_rps")
        if not any(c.startswith("ttft_") for c in columns):
            missing.append("ttft_p95_s")
        if not any(c.startswith(("tpot_", "itl_")) for c in columns):
            missing.append("tpot_p95_s (or itl_p95_s)")
    if missing:
        raise LoadTestFormatError(f"{file_name}: missing required column(s): {', '.join(missing)}")


class _CellReader:
    """Parses a text column to floats; empty cells are NaN, anything else non-numeric fails."""

    def __init__(self, raw: pd.DataFrame, file_name: str, row_numbers: np.ndarray) -> None:
        self._raw = raw
        self._file_name = file_name
        self._row_numbers = row_numbers

    def has_text(self, column: str) -> bool:
        """True when the column exists and some non-empty cell is not a number."""
        if column not in self._raw.columns:
            return False
        cells = self._raw[column].str.strip()
        return bool((pd.to_numeric(cells, errors="coerce").isna() & (cells != "")).any())

    def numbers(self, column: str) -> pd.Series:
        if column not in self._raw.columns:
            return pd.Series(np.full(len(self._raw), math.nan))
        cells = self._raw[column].str.strip()
        values = pd.to_numeric(cells, errors="coerce")
        bad = (values.isna() & (cells != "")) | cells.str.lower().isin(_NOT_FINITE)
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            what = (
                "is not a finite number"
                if cells.iat[i].lower() in _NOT_FINITE
                else "is not a number"
            )
            raise LoadTestFormatError(
                f"{self._file_name}, row {self._row_numbers[i]}, column {column}: "
                f"{cells.iat[i]!r} {what}"
            )
        return values.astype(float).reset_index(drop=True)


def _mix_columns(cell: _CellReader, columns: set[str]) -> tuple[pd.Series, pd.Series]:
    """Nominal mix (prompt_tokens/isl, completion_tokens/osl) if numeric, else measured means."""
    for prompt, completion in (("prompt_tokens", "completion_tokens"), ("isl", "osl")):
        if {prompt, completion} <= columns and not (
            {"num_input_tokens_mean", "num_output_tokens_mean"} <= columns
            and (cell.has_text(prompt) or cell.has_text(completion))
        ):
            return cell.numbers(prompt), cell.numbers(completion)
    prompt_means = cell.numbers("num_input_tokens_mean").to_numpy()
    completion_means = cell.numbers("num_output_tokens_mean").to_numpy()
    if np.isnan(prompt_means).any() or np.isnan(completion_means).any():
        return pd.Series(prompt_means), pd.Series(completion_means)
    grouped_prompt, grouped_completion = group_mixes(prompt_means, completion_means)
    return pd.Series(grouped_prompt), pd.Series(grouped_completion)


def _littles_law_rps(frame: pd.DataFrame) -> pd.Series:
    """Closed loop: concurrency / (ttft + tpot × (completion − 1)); open loop: the offered rate."""
    cycle_s = frame["ttft_p95_s"] + frame["tpot_p95_s"] * (frame["completion_tokens"] - 1)
    return (frame["concurrency"] / cycle_s).fillna(frame["request_rate"])


def _combine_csv(tables: list[LoadTestTable], names: list[str]) -> LoadTestTable:
    first = tables[0]
    for table, name in zip(tables[1:], names[1:], strict=True):
        for attribute in ("model", "gpu_type", "tensor_parallel", "precision"):
            a, b = getattr(first, attribute), getattr(table, attribute)
            if a is not None and b is not None and a != b:
                raise LoadTestFormatError(
                    f"{names[0]} and {name} describe different setups ({attribute} {a} vs {b}); "
                    "one setup per import"
                )
    frames = []
    for table, name in zip(tables, names, strict=True):
        frame = table.frame.copy()
        frame.insert(0, "_where", [f"{name}, load level {i + 1}" for i in range(len(frame))])
        frames.append(frame)
    checked, notes = validated_frame(
        pd.concat(frames, ignore_index=True), file_name=", ".join(names)
    )
    meta = first.meta()
    meta["notes"] = tuple(dict.fromkeys([n for t in tables for n in t.notes] + notes))
    for attribute in ("model", "gpu_type", "tensor_parallel", "precision", "engine"):
        meta[attribute] = next(
            (getattr(t, attribute) for t in tables if getattr(t, attribute)), None
        )
    return make_table(checked, **meta)
