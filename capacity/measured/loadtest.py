"""A measured load-test table for one model on one GPU type at one tensor-parallel degree.

Rows are load levels (a concurrency or a request rate) at prompt/completion mixes, with the
request throughput and the latency percentiles measured there. The readers
(:mod:`capacity.measured.loadtest_readers`) turn CSV, ``vllm bench serve`` and genai-perf files
into a :class:`LoadTestTable`; :func:`measured_knee` finds, at a measured mix, the largest
request rate that still meets a p95 TTFT / TPOT SLO.

Conventions (documented in docs/capacity.md):

- TPOT falls back to the inter-token latency (ITL) where a tool reports no TPOT.
- The SLO is checked against p95; where a file has no p95 (``vllm bench serve`` without
  ``--metric-percentiles ... 95``) p99 stands in (conservative) and a note says so.
- A latency-only table (one TTFT and one TPOT value per load level, mean or median unknown)
  stores the single values as the p95 estimates (``latency_statistic="single value"``) and
  derives the request throughput by Little's law,
  ``concurrency / (ttft + tpot × (completion_tokens − 1))`` (``throughput_derived=True``).
- Repeated runs at the same load level of a mix are averaged into one row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from capacity.errors import LoadTestFormatError, SloUnreachableError
from capacity.measured.loadtest_checks import validated_frame

LOADTEST_COLUMNS: tuple[str, ...] = (
    "prompt_tokens",
    "completion_tokens",
    "concurrency",
    "request_rate",
    "request_throughput_rps",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p95_s",
    "tpot_p99_s",
    "ttft_mean_s",
    "tpot_mean_s",
)
SOURCE_FORMATS = (
    "csv",
    "vllm-bench-json",
    "genai-perf-json",
    "guidellm",
    "inference-perf-json",
    "genai-bench-json",
    "records",
)
LATENCY_STATISTICS = ("percentiles", "single value")
MIX_MATCH_TOLERANCE = 1e-3  # relative: a requested mix within 0.1 % of a measured one is it


@dataclass(frozen=True, eq=False)
class LoadTestTable:
    """Validated load-test rows (``frame`` has LOADTEST_COLUMNS, sorted by mix, then load)."""

    model: str | None
    gpu_type: str | None
    tensor_parallel: int | None
    precision: str | None
    engine: str | None
    source_format: str
    frame: pd.DataFrame
    throughput_derived: bool = False
    latency_statistic: str = "percentiles"
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: Where each row of ``frame`` came from ("lt.csv, row 7"), for messages; not stored.
    origins: tuple[str, ...] = field(default=(), repr=False)

    @property
    def load_column(self) -> str:
        """``"concurrency"`` when every row has one (closed-loop sweeps), else "request_rate"."""
        return "concurrency" if self.frame["concurrency"].notna().all() else "request_rate"

    def mixes(self) -> list[tuple[float, float]]:
        """The measured (prompt_tokens, completion_tokens) mixes, ascending."""
        return [(float(p), float(c)) for p, c in self._mix_array]

    @cached_property
    def _mix_array(self) -> np.ndarray:
        pairs = self.frame[["prompt_tokens", "completion_tokens"]].drop_duplicates()
        return pairs.to_numpy(dtype=float)

    def measured_mix(
        self, prompt_tokens: float, completion_tokens: float
    ) -> tuple[float, float] | None:
        """The measured mix within 0.1 % of (prompt, completion), or None."""
        for prompt, completion in self._mix_array:
            if _close(prompt, prompt_tokens) and _close(completion, completion_tokens):
                return float(prompt), float(completion)
        return None

    def mix_rows(self, prompt_tokens: float, completion_tokens: float) -> pd.DataFrame | None:
        """The rows of the measured mix matching (prompt, completion) within 0.1 %, or None."""
        mix = self.measured_mix(prompt_tokens, completion_tokens)
        if mix is None:
            return None
        rows = self.frame[
            (self.frame["prompt_tokens"] == mix[0]) & (self.frame["completion_tokens"] == mix[1])
        ]
        return rows.reset_index(drop=True)

    def meta(self) -> dict[str, Any]:
        """The keyword arguments :meth:`from_records` takes besides the records (JSON-safe)."""
        return {
            "model": self.model,
            "gpu_type": self.gpu_type,
            "tensor_parallel": self.tensor_parallel,
            "precision": self.precision,
            "engine": self.engine,
            "source_format": self.source_format,
            "throughput_derived": self.throughput_derived,
            "latency_statistic": self.latency_statistic,
            "notes": list(self.notes),
        }

    def to_records(self) -> list[dict[str, float | None]]:
        """One JSON-safe dict per row (floats; None where a value is absent)."""
        return [
            {
                column: _json_float(value)
                for column, value in zip(LOADTEST_COLUMNS, row, strict=True)
            }
            for row in self.frame[list(LOADTEST_COLUMNS)].itertuples(index=False)
        ]

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], **meta: Any) -> LoadTestTable:
        """Rebuild (and re-validate) a table from :meth:`to_records` output and :meth:`meta`."""
        rows = list(records)
        unknown = sorted({key for row in rows for key in row} - set(LOADTEST_COLUMNS))
        if unknown:
            raise LoadTestFormatError(f"records: unknown column(s) {unknown}")
        frame = pd.DataFrame(
            [
                [_record_float(row.get(c), i, c) for c in LOADTEST_COLUMNS]
                for i, row in enumerate(rows)
            ],
            columns=list(LOADTEST_COLUMNS),
            dtype=float,
        )
        frame.insert(0, "_where", [f"records, row {i + 1}" for i in range(len(frame))])
        checked, notes = validated_frame(frame, file_name="records")
        meta = dict(meta)
        meta.setdefault("source_format", "records")
        meta["notes"] = tuple(meta.get("notes") or ()) + tuple(
            note for note in notes if note not in (meta.get("notes") or ())
        )
        return make_table(checked, **meta)


def make_table(frame: pd.DataFrame, **meta: Any) -> LoadTestTable:
    """A LoadTestTable from an already validated frame; checks the metadata fields."""
    source_format = meta.pop("source_format", "records")
    if source_format not in SOURCE_FORMATS:
        raise LoadTestFormatError(f"source_format must be one of {SOURCE_FORMATS}")
    statistic = meta.pop("latency_statistic", "percentiles")
    if statistic not in LATENCY_STATISTICS:
        raise LoadTestFormatError(f"latency_statistic must be one of {LATENCY_STATISTICS}")
    tensor_parallel = meta.pop("tensor_parallel", None)
    if tensor_parallel is not None and (
        isinstance(tensor_parallel, bool)
        or int(tensor_parallel) != tensor_parallel
        or int(tensor_parallel) < 1
    ):
        raise LoadTestFormatError(
            f"tensor_parallel must be a whole number >= 1, got {tensor_parallel!r}"
        )
    text = {
        key: _optional_text(meta.pop(key, None))
        for key in ("model", "gpu_type", "precision", "engine")
    }
    notes = tuple(str(note) for note in meta.pop("notes", ()) or ())
    derived = bool(meta.pop("throughput_derived", False))
    if meta:
        raise LoadTestFormatError(f"unknown table field(s) {sorted(meta)}")
    return LoadTestTable(
        **text,
        tensor_parallel=None if tensor_parallel is None else int(tensor_parallel),
        source_format=source_format,
        frame=frame[list(LOADTEST_COLUMNS)].reset_index(drop=True),
        throughput_derived=derived,
        latency_statistic=statistic,
        notes=notes,
        origins=tuple(frame["_where"]) if "_where" in frame.columns else (),
    )


def slo_latency_s(rows: pd.DataFrame, metric: str) -> np.ndarray:
    """The per-row latency the p95 SLO is checked against: p95, else p99 (conservative)."""
    p95 = rows[f"{metric}_p95_s"].to_numpy(dtype=float)
    return np.where(np.isnan(p95), rows[f"{metric}_p99_s"].to_numpy(dtype=float), p95)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= MIX_MATCH_TOLERANCE * max(abs(a), abs(b), 1.0)


def _json_float(value: Any) -> float | None:
    number = float(value)
    return None if math.isnan(number) else number


def _record_float(value: Any, index: int, column: str) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LoadTestFormatError(
            f"records, row {index + 1}, column {column}: {value!r} is not a number"
        )
    number = float(value)
    if not math.isfinite(number):
        raise LoadTestFormatError(
            f"records, row {index + 1}, column {column}: {value!r} is not a finite number"
        )
    return number


def _optional_text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


@dataclass(frozen=True)
class MeasuredKnee:
    """The SLO knee at a measured mix: the largest request rate meeting both p95 limits.

    Linear between the last load level that meets the SLO and the first that does not
    (``binding`` names the limit crossed there); ``"measured range"`` when even the highest
    measured load meets it (the capacity is then at least ``requests_per_s``).
    """

    prompt_tokens: float
    completion_tokens: float
    requests_per_s: float
    concurrency: float | None
    request_rate: float | None
    binding: str
    ttft_p95_s: float
    tpot_p95_s: float


def measured_knee(
    table: LoadTestTable,
    *,
    prompt_tokens: float,
    completion_tokens: float,
    ttft_p95_s: float,
    tpot_p95_s: float,
) -> MeasuredKnee | None:
    """The measured SLO knee at a measured mix, or None when the mix was not measured.

    Load levels are scanned from the lowest; the first that violates either limit ends the
    search (latency is not assumed to fall again with more load). Raises SloUnreachableError
    when the lowest measured load already violates the SLO.
    """
    rows = table.mix_rows(prompt_tokens, completion_tokens)
    if rows is None:
        return None
    ttft, tpot = slo_latency_s(rows, "ttft"), slo_latency_s(rows, "tpot")
    throughput = rows["request_throughput_rps"].to_numpy(dtype=float)
    violated = (ttft > ttft_p95_s) | (tpot > tpot_p95_s)
    mix = (float(rows["prompt_tokens"].iat[0]), float(rows["completion_tokens"].iat[0]))
    if violated[0]:
        raise unreachable_error(mix, ttft[0], tpot[0], ttft_p95_s, tpot_p95_s, "measured")
    if not violated.any():
        last = len(rows) - 1
        return _knee(rows, mix, last, last, 0.0, "measured range", throughput, ttft, tpot)
    j = int(np.argmax(violated))
    fractions = {
        limit: (slo - values[j - 1]) / (values[j] - values[j - 1])
        for limit, values, slo in (("ttft", ttft, ttft_p95_s), ("tpot", tpot, tpot_p95_s))
        if values[j] > slo
    }
    binding = min(fractions, key=lambda limit: fractions[limit])
    return _knee(rows, mix, j - 1, j, fractions[binding], binding, throughput, ttft, tpot)


def unreachable_error(
    mix: tuple[float, float],
    ttft_s: float,
    tpot_s: float,
    ttft_limit_s: float,
    tpot_limit_s: float,
    how: str,
) -> SloUnreachableError:
    """The error for a mix that misses the SLO at the lowest load (``how``: measured/predicted)."""
    limit, value, slo = (
        ("ttft", ttft_s, ttft_limit_s) if ttft_s > ttft_limit_s else ("tpot", tpot_s, tpot_limit_s)
    )
    return SloUnreachableError(
        f"mix {mix[0]:g} prompt / {mix[1]:g} completion tokens cannot meet the SLO on this "
        f"profile: p95 {limit.upper()} is {_distinct(value, slo)} s at the lowest load ({how}), "
        f"above the {slo:g} s limit",
        limit=limit,
        value_s=float(value),
        limit_s=float(slo),
    )


def _distinct(value: float, limit: float) -> str:
    """``value`` with enough digits to read as different from ``limit`` (1.004 vs 1)."""
    for digits in (3, 4, 5, 6):
        shown = f"{value:.{digits}g}"
        if float(shown) != limit:
            return shown
    return f"{value:.6g}"


def _knee(
    rows: pd.DataFrame,
    mix: tuple[float, float],
    i: int,
    j: int,
    fraction: float,
    binding: str,
    throughput: np.ndarray,
    ttft: np.ndarray,
    tpot: np.ndarray,
) -> MeasuredKnee:
    def between(values: np.ndarray) -> float:
        return float(values[i] + fraction * (values[j] - values[i]))

    loads = {}
    for column in ("concurrency", "request_rate"):
        values = rows[column].to_numpy(dtype=float)
        loads[column] = None if np.isnan(values[[i, j]]).any() else between(values)
    return MeasuredKnee(
        prompt_tokens=mix[0],
        completion_tokens=mix[1],
        requests_per_s=between(throughput),
        concurrency=loads["concurrency"],
        request_rate=loads["request_rate"],
        binding=binding,
        ttft_p95_s=between(ttft),
        tpot_p95_s=between(tpot),
    )
