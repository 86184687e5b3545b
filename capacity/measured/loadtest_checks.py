"""Validation of a load-test frame: each rule raises LoadTestFormatError naming file, row, column.

The readers build a frame with the canonical columns (floats, NaN where absent) and a
``_where`` column (the row's location, "lt.csv, row 7" or "rate4.json") used in messages;
:func:`validated_frame` checks it and returns the rows sorted by mix then load, repeats
averaged, plus notes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from capacity.errors import LoadTestFormatError
from capacity.measured.loadtest_notes import pooled_tpot_notes

TTFT_COLUMNS = ("ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "ttft_mean_s")
TPOT_COLUMNS = ("tpot_p50_s", "tpot_p95_s", "tpot_p99_s", "tpot_mean_s")
POSITIVE_COLUMNS = (
    "prompt_tokens",
    "completion_tokens",
    "concurrency",
    "request_rate",
    "request_throughput_rps",
    *TTFT_COLUMNS,
    *TPOT_COLUMNS,
)
# Beyond these a value in seconds is not a plausible measurement but a millisecond figure.
MAX_PLAUSIBLE_TTFT_S = 600.0
MAX_PLAUSIBLE_TPOT_S = 10.0
MAX_LOWEST_LOAD_TPOT_S = 1.0
MIX_GROUP_TOLERANCE = 0.05

# Physical floors and ceilings of one measured row (a number outside them is a unit error or a
# forged figure, never a measurement).
#: No transformer step completes in under 100 µs on any GPU: a step runs hundreds of kernels and a
#: kernel launch alone costs about 5 µs. A TTFT or TPOT below it (5e-324 is a subnormal) is refused.
MIN_LATENCY_S = 1e-4
#: Tokens per request: at least one; at most 10 million, the longest context of any released model.
MIN_TOKENS = 1.0
MAX_TOKENS_PER_REQUEST = 10_000_000.0
#: Requests in flight on one replica: engines batch hundreds to a few thousand sequences
#: (vLLM's max_num_seqs defaults to 256-1024); a million is far beyond any.
MAX_CONCURRENCY = 1_000_000.0
#: The most GPUs one replica spans (the profile's ``gpus_per_replica`` limit).
MAX_GPUS_PER_REPLICA = 64
#: A model smaller than any served LLM (GPT-2 small has 124 million parameters): the physical
#: bound of a table whose model's size is unknown.
SMALLEST_MODEL_PARAMETERS = 1e8
#: Rows per import (after a setup is selected): real sweeps measure tens to hundreds of rows; the
#: cap keeps an import's reading and checking within seconds and its memory within megabytes.
MAX_LOADTEST_ROWS = 100_000
#: Mixes per table: real sweeps measure 1-20; the SLO model's range refits it once per mix.
MAX_LOADTEST_MIXES = 100


def validated_frame(frame: pd.DataFrame, *, file_name: str) -> tuple[pd.DataFrame, list[str]]:
    """Check a canonical frame and return (sorted frame with repeats averaged, notes)."""
    if frame.empty:
        raise LoadTestFormatError(f"{file_name}: no data rows")
    check_row_count(len(frame), file_name)
    mixes = len(frame[["prompt_tokens", "completion_tokens"]].drop_duplicates())
    if mixes > MAX_LOADTEST_MIXES:
        raise LoadTestFormatError(
            f"{file_name}: {mixes:,} prompt/completion mixes; at most {MAX_LOADTEST_MIXES} per "
            "table (import the mixes plans need, or fewer distinct token counts)"
        )
    _check_finite_and_positive(frame, file_name)
    _check_physical_bounds(frame)
    _check_units(frame, file_name)
    load = _load_column(frame, file_name)
    _check_required(frame, file_name)
    _check_monotone(frame, load, file_name)
    averaged, notes = _average_repeats(frame, load)
    notes += pooled_tpot_notes(averaged, load)
    _check_levels(averaged, load, file_name)
    _check_lowest_load_units(averaged, load, file_name)
    ordered = averaged.sort_values(["prompt_tokens", "completion_tokens", load], kind="stable")
    return ordered.reset_index(drop=True), notes


def check_row_count(rows: int, file_name: str) -> None:
    """At most :data:`MAX_LOADTEST_ROWS` rows per import."""
    if rows > MAX_LOADTEST_ROWS:
        raise LoadTestFormatError(
            f"{file_name}: {rows:,} rows; at most {MAX_LOADTEST_ROWS:,} per import (a sweep needs "
            "a few load levels per mix: average repeats, or split the table)"
        )


def group_mixes(prompt: np.ndarray, completion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Measured mean token counts (no nominal mix given) grouped into mixes.

    Rows whose prompt and completion means are within 5 % of a group's first row are one mix
    (a ShareGPT sweep samples the same prompts at every rate); each group gets its mean. A row
    joins the earliest group it fits. Groups are found through a grid of log-spaced cells, so
    each row compares with the few groups in its neighbouring cells: O(rows), whatever the
    number of mixes. Non-positive or missing means are left as they are (the row checks refuse
    them, naming the row).
    """
    prompt = np.asarray(prompt, dtype=float)
    completion = np.asarray(completion, dtype=float)
    if not (np.isfinite(prompt).all() and np.isfinite(completion).all()):
        return prompt, completion
    if (prompt <= 0).any() or (completion <= 0).any():
        return prompt, completion
    cells: dict[tuple[int, int], list[int]] = {}
    anchors: list[tuple[float, float]] = []
    labels = np.empty(len(prompt), dtype=np.int64)
    cell_p = np.floor(np.log(prompt) / _CELL_WIDTH).astype(np.int64)
    cell_c = np.floor(np.log(completion) / _CELL_WIDTH).astype(np.int64)
    for i, (p, c, kp, kc) in enumerate(zip(prompt, completion, cell_p, cell_c, strict=True)):
        found = -1
        for dp in (-1, 0, 1):
            for dc in (-1, 0, 1):
                for k in cells.get((int(kp) + dp, int(kc) + dc), ()):
                    if (
                        (found < 0 or k < found)
                        and _within(p, anchors[k][0])
                        and _within(c, anchors[k][1])
                    ):
                        found = k
        if found < 0:
            found = len(anchors)
            anchors.append((float(p), float(c)))
            cells.setdefault((int(kp), int(kc)), []).append(found)
        labels[i] = found
    sizes = np.bincount(labels)
    mean_p = np.round(np.bincount(labels, weights=prompt) / sizes, 1)
    mean_c = np.round(np.bincount(labels, weights=completion) / sizes, 1)
    return mean_p[labels], mean_c[labels]


# A member lies within 5 % of its group's first row: at most log(1 / 0.95) ≈ 0.051 apart in log
# space, less than one cell, so it is in the anchor's cell or a neighbouring one.
_CELL_WIDTH = 0.1


def _within(value: float, anchor: float) -> bool:
    return abs(value - anchor) <= MIX_GROUP_TOLERANCE * abs(anchor)


def _fail(where: str, column: str, message: str) -> LoadTestFormatError:
    """``where`` is the row's full location ("lt.csv, row 7" or "rate4.json")."""
    return LoadTestFormatError(f"{where}, column {column}: {message}")


def _check_finite_and_positive(frame: pd.DataFrame, file_name: str) -> None:
    for column in POSITIVE_COLUMNS:
        values = frame[column].to_numpy(dtype=float)
        bad = np.isinf(values) | (values <= 0)
        if bad.any():
            i = int(np.argmax(bad))
            what = "is not a finite number" if np.isinf(values[i]) else "must be > 0"
            raise _fail(frame["_where"].iat[i], column, f"{values[i]:g} {what}")


def fastest_tokens_per_s_per_gpu(parameters: float | None = None) -> float:
    """The most tokens/s (prompt + completion) any catalog GPU computes for a model of
    ``parameters`` (2 FLOPs per parameter per token at the GPU's highest dense peak); a model of
    unknown size is taken as :data:`SMALLEST_MODEL_PARAMETERS`."""
    from capacity.sizing.catalog import GPUS

    peak_tflops = max(max(g.dense_fp16_tflops, g.dense_fp8_tflops or 0.0) for g in GPUS.values())
    return peak_tflops * 1e12 / (2.0 * (parameters or SMALLEST_MODEL_PARAMETERS))


def check_physical_rates(
    frame: pd.DataFrame,
    where: Sequence[str],
    *,
    gpus: int,
    parameters: float | None = None,
    peak_tflops: float | None = None,
) -> None:
    """Every row's request rate and throughput imply (prompt + completion tokens) × rate ÷
    ``gpus`` tokens/s per GPU: no more than the fastest catalog GPU (or ``peak_tflops``, when
    higher) computes for a model of ``parameters``. ``where`` names each row of ``frame``."""
    limit = fastest_tokens_per_s_per_gpu(parameters)
    if peak_tflops is not None:
        limit = max(limit, peak_tflops * 1e12 / (2.0 * (parameters or SMALLEST_MODEL_PARAMETERS)))
    size = (
        f"a {parameters:.3g}-parameter model"
        if parameters
        else f"a model of unknown size (taken as {SMALLEST_MODEL_PARAMETERS:.0e} parameters)"
    )
    _check_tokens_per_s(frame, list(where), limit * gpus, f"{gpus} GPU(s) serving {size}")


def _check_tokens_per_s(
    frame: pd.DataFrame, where: list[str], limit_per_replica: float, what: str
) -> None:
    tokens = (frame["prompt_tokens"] + frame["completion_tokens"]).to_numpy(dtype=float)
    for column in ("request_throughput_rps", "request_rate"):
        implied = tokens * frame[column].to_numpy(dtype=float)
        over = implied > limit_per_replica
        if over.any():
            i = int(np.argmax(over))
            raise _fail(
                where[i],
                column,
                f"{frame[column].iat[i]:g} requests/s of {tokens[i]:g} tokens is "
                f"{implied[i]:.3g} tokens/s; {what} compute at most {limit_per_replica:.3g} "
                "tokens/s (peak TFLOPS ÷ 2 FLOPs per parameter per token)",
            )


def _check_physical_bounds(frame: pd.DataFrame) -> None:
    """Per row: token counts, latencies, concurrency and rates within physical ranges."""
    where = frame["_where"]
    for column in ("prompt_tokens", "completion_tokens"):
        _check_range(frame, column, MIN_TOKENS, MAX_TOKENS_PER_REQUEST, "tokens per request")
    for column in (*TTFT_COLUMNS, *TPOT_COLUMNS):
        values = frame[column].to_numpy(dtype=float)
        low = values < MIN_LATENCY_S
        if low.any():
            i = int(np.argmax(low))
            raise _fail(
                where.iat[i],
                column,
                f"{values[i]:g} s is below {MIN_LATENCY_S:g} s, faster than any model step on "
                "any GPU; give seconds",
            )
    _check_range(frame, "concurrency", 0.0, MAX_CONCURRENCY, "requests in flight")
    _check_tokens_per_s(
        frame,
        list(where),
        fastest_tokens_per_s_per_gpu() * MAX_GPUS_PER_REPLICA,
        f"{MAX_GPUS_PER_REPLICA} of the fastest GPUs serving a {SMALLEST_MODEL_PARAMETERS:.0e}"
        "-parameter model",
    )


def _check_range(frame: pd.DataFrame, column: str, low: float, high: float, what: str) -> None:
    values = frame[column].to_numpy(dtype=float)
    bad = (values < low) | (values > high)
    if bad.any():
        i = int(np.argmax(bad))
        raise _fail(
            frame["_where"].iat[i],
            column,
            f"{values[i]:g} is outside [{low:g}, {high:,.0f}] {what}",
        )


def _check_units(frame: pd.DataFrame, file_name: str) -> None:
    for columns, limit in (
        (TTFT_COLUMNS, MAX_PLAUSIBLE_TTFT_S),
        (TPOT_COLUMNS, MAX_PLAUSIBLE_TPOT_S),
    ):
        for column in columns:
            values = frame[column].to_numpy(dtype=float)
            over = values > limit
            if over.any():
                i = int(np.argmax(over))
                raise _fail(
                    frame["_where"].iat[i],
                    column,
                    f"{values[i]:g} s is implausible (over {limit:g} s); looks like milliseconds — "
                    "give seconds",
                )


def _load_column(frame: pd.DataFrame, file_name: str) -> str:
    for column in ("concurrency", "request_rate"):
        if frame[column].notna().all():
            return column
    missing = frame["concurrency"].isna() & frame["request_rate"].isna()
    if missing.any():
        where = frame["_where"][missing].iat[0]
        raise _fail(
            where,
            "concurrency",
            "no concurrency and no request_rate: every row needs the load it was measured at",
        )
    raise LoadTestFormatError(
        f"{file_name}: some rows give a concurrency and others only a request_rate; "
        "one sweep per import (all rows by concurrency, or all by request rate)"
    )


def _check_required(frame: pd.DataFrame, file_name: str) -> None:
    for column in ("prompt_tokens", "completion_tokens", "request_throughput_rps"):
        _require_present(frame, column, file_name)
    for metric, columns in (("ttft", TTFT_COLUMNS), ("tpot", TPOT_COLUMNS)):
        percentiles = list(columns[:3])
        for (prompt, completion), rows in frame.groupby(["prompt_tokens", "completion_tokens"]):
            if rows[percentiles].isna().all().all():
                raise LoadTestFormatError(
                    f"{file_name}: mix {prompt:g}/{completion:g} has no {metric.upper()} "
                    f"percentile at all (columns {', '.join(percentiles)}); the SLO is on p95"
                )
        slo = frame[f"{metric}_p95_s"].fillna(frame[f"{metric}_p99_s"])
        if slo.isna().any():
            where = frame["_where"][slo.isna()].iat[0]
            raise _fail(
                where,
                f"{metric}_p95_s",
                f"no p95 (nor p99) {metric.upper()}; the SLO is checked on p95",
            )


def _require_present(frame: pd.DataFrame, column: str, file_name: str) -> None:
    missing = frame[column].isna()
    if missing.any():
        raise _fail(frame["_where"][missing].iat[0], column, "missing value")


def _check_monotone(frame: pd.DataFrame, load: str, file_name: str) -> None:
    for (prompt, completion), rows in frame.groupby(
        ["prompt_tokens", "completion_tokens"], sort=False
    ):
        values = rows[load].to_numpy(dtype=float)
        steps = np.diff(values)
        if (steps >= 0).all() or (steps <= 0).all():
            continue
        rising = steps[0] > 0 if steps[0] != 0 else bool((steps > 0).any())
        i = 1 + int(np.argmax(steps < 0 if rising else steps > 0))
        raise _fail(
            rows["_where"].iat[i],
            load,
            f"{values[i]:g} after {values[i - 1]:g}: within mix {prompt:g}/{completion:g} the "
            f"{load} must rise (or fall) steadily; two sweeps in one file?",
        )


def _average_repeats(frame: pd.DataFrame, load: str) -> tuple[pd.DataFrame, list[str]]:
    keys = ["prompt_tokens", "completion_tokens", load]
    counts = frame.groupby(keys, sort=False).size()
    repeated = counts[counts > 1]
    if repeated.empty:
        return frame, []
    numeric = [column for column in frame.columns if column != "_where"]
    averaged = frame.groupby(keys, sort=False, as_index=False)[numeric].mean()
    averaged[load] = frame.groupby(keys, sort=False)[load].first().to_numpy()
    averaged["_where"] = frame.groupby(keys, sort=False)["_where"].first().to_numpy()
    levels = ", ".join(f"{p:g}/{c:g} at {level:g}" for p, c, level in repeated.index)
    return averaged, [f"repeated runs averaged ({load}): {levels}"]


def _check_levels(frame: pd.DataFrame, load: str, file_name: str) -> None:
    if len(frame) == 1:
        raise LoadTestFormatError(
            f"{file_name}: a single load level; no knee can be found from one point — "
            "measure several concurrencies or request rates"
        )
    sizes = frame.groupby(["prompt_tokens", "completion_tokens"]).size()
    single = sizes[sizes < 2]
    if not single.empty:
        prompt, completion = single.index[0]
        raise LoadTestFormatError(
            f"{file_name}: mix {prompt:g}/{completion:g} has a single {load} level; "
            "a knee needs at least two load levels per mix"
        )


def _check_lowest_load_units(frame: pd.DataFrame, load: str, file_name: str) -> None:
    """At the lowest load a TPOT of 1 s or more, or a TTFT far above prompt × TPOT, is ms."""
    lowest = frame.sort_values(load).groupby(["prompt_tokens", "completion_tokens"]).head(1)
    for row in lowest.to_dict("records"):
        tpot_column = _first_present(row, ("tpot_p50_s", "tpot_mean_s", "tpot_p95_s", "tpot_p99_s"))
        tpot = row[tpot_column]
        if tpot >= MAX_LOWEST_LOAD_TPOT_S:
            raise _fail(
                row["_where"],
                tpot_column,
                f"{tpot:g} s per token at the "
                "lowest load is implausible; looks like milliseconds — give seconds",
            )
        ttft_column = _first_present(row, ("ttft_p50_s", "ttft_mean_s", "ttft_p95_s", "ttft_p99_s"))
        ttft = row[ttft_column]
        # Prefill runs many prompt tokens per forward pass, so even an idle replica's TTFT stays
        # well below prompt_tokens decode steps.
        if ttft > 3.0 * row["prompt_tokens"] * tpot + 1.0:
            raise _fail(
                row["_where"],
                ttft_column,
                f"{ttft:g} s at the lowest load is "
                f"implausible for {row['prompt_tokens']:g} prompt tokens at {tpot:g} s per "
                "token; looks like milliseconds — give seconds",
            )


def _first_present(row: dict, columns: tuple[str, ...]) -> str:
    return next(column for column in columns if not np.isnan(row[column]))
