"""Which load-test format a file is, told by its content, and the reader of each JSON/YAML
format (the CSV reader is :mod:`capacity.measured.loadtest_readers`).

Each format's marks are disjoint: a ``vllm bench serve`` result has ``request_throughput``
and ``*_ttft_ms`` keys, a genai-perf export per-metric objects (``time_to_first_token``), a
guidellm report a ``benchmarks`` list (in YAML: that top-level key), an inference-perf stage
report ``load_summary`` and ``successes`` (its config.yaml top-level ``load`` and ``server``),
a genai-bench run ``aggregated_metrics`` (its experiment metadata ``traffic_scenario``,
``cmd`` and ``server_gpu_count``). A file bearing the marks of two formats is refused rather
than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from capacity.errors import LoadTestFormatError
from capacity.measured.loadtest import LoadTestTable
from capacity.measured.loadtest_genai_bench import looks_like_genai_bench, read_genai_bench
from capacity.measured.loadtest_guidellm import looks_like_guidellm, read_guidellm
from capacity.measured.loadtest_inference_perf import (
    looks_like_inference_perf,
    read_inference_perf,
)
from capacity.measured.loadtest_json import (
    looks_like_genai_perf,
    looks_like_vllm_bench,
    parse_json,
    read_genai_perf_json,
    read_vllm_bench_json,
)

Reader = Callable[[Sequence[tuple[str, str]]], LoadTestTable]

#: format name → (is it this format?, reader, what the user ran to get such a file)
JSON_FORMATS: dict[str, tuple[Callable[[Any], bool], Reader, str]] = {
    "vllm-bench-json": (
        looks_like_vllm_bench,
        read_vllm_bench_json,
        "a `vllm bench serve --save-result` file",
    ),
    "genai-perf-json": (
        looks_like_genai_perf,
        read_genai_perf_json,
        "genai-perf's profile_export_genai_perf.json",
    ),
    "guidellm": (looks_like_guidellm, read_guidellm, "a guidellm benchmarks report"),
    "inference-perf-json": (
        looks_like_inference_perf,
        read_inference_perf,
        "an inference-perf stage_N_lifecycle_metrics.json",
    ),
    "genai-bench-json": (
        looks_like_genai_bench,
        read_genai_bench,
        "a genai-bench run file or experiment_metadata.json",
    ),
}
EXPECTED = ", ".join(what for _, _, what in JSON_FORMATS.values())
#: The top-level keys guidellm writes a YAML report with (yaml.dump sorts them).
GUIDELLM_YAML = re.compile(r"^(benchmarks|config|metadata):", re.MULTILINE)
#: Top-level keys of inference-perf's config.yaml (the run's configuration, written unsorted).
INFERENCE_PERF_CONFIG = (re.compile(r"^load:", re.MULTILINE), re.compile(r"^server:", re.MULTILINE))


def is_document(text: str) -> bool:
    """A JSON document or a YAML file (not a table of lines), told unparsed."""
    stripped = text.lstrip()
    return stripped[:1] in ("{", "[") or _yaml_format(stripped) is not None


def _yaml_format(text: str) -> str | None:
    if GUIDELLM_YAML.match(_first_line(text)):
        return "guidellm"
    if all(pattern.search(text) for pattern in INFERENCE_PERF_CONFIG):
        return "inference-perf-json"  # the run's config.yaml, read with its stage files
    return None


def _first_line(text: str) -> str:
    lines = (line for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return next(lines, "")


def detect_format(name: str, text: str) -> str:
    """``csv`` or one of :data:`JSON_FORMATS`; an unknown or ambiguous file is refused in one
    line naming what was expected."""
    stripped = text.strip()
    if not stripped:
        raise LoadTestFormatError(f"{name}: empty file")
    if stripped.startswith("{"):
        return _json_format(name, stripped)
    header = stripped.splitlines()[0]
    if "," in header and {"concurrency", "request_rate"} & {c.strip() for c in header.split(",")}:
        return "csv"
    kind = _yaml_format(stripped)
    if kind is not None:
        return kind
    raise LoadTestFormatError(
        f"{name}: unknown format; expected a load-test CSV (with a concurrency or request_rate "
        f"column), a guidellm YAML report, inference-perf's config.yaml or JSON: {EXPECTED}"
    )


def _json_format(name: str, text: str) -> str:
    document = parse_json(name, text)
    matches = [kind for kind, (looks, _, _) in JSON_FORMATS.items() if looks(document)]
    if not matches:
        raise LoadTestFormatError(f"{name}: unknown JSON format; expected {EXPECTED}")
    if len(matches) > 1:
        raise LoadTestFormatError(
            f"{name}: the file has the keys of several formats ({', '.join(matches)}); "
            "import the tool's own output unchanged"
        )
    return matches[0]


def read_format(kind: str, files: Sequence[tuple[str, str]]) -> LoadTestTable:
    """The table of files all detected as ``kind`` (a JSON/YAML format)."""
    return JSON_FORMATS[kind][1](files)
