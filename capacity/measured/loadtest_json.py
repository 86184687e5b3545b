"""Read ``vllm bench serve`` and genai-perf result JSON files (one load level per file).

``vllm bench serve --save-result`` (and the older ``benchmarks/benchmark_serving.py``) writes
one object per run: ``request_rate`` (a number or ``"inf"``), ``max_concurrency``,
``completed``, ``total_input_tokens``, ``total_output_tokens``, ``request_throughput`` and, in
milliseconds, ``mean_/median_/std_/p{N}_{ttft,tpot,itl}_ms`` for the percentiles asked with
``--metric-percentiles`` (default 99 only: then there is no p95 and p99 stands in).

genai-perf's ``profile_export_genai_perf.json`` holds one object per metric
(``time_to_first_token``, ``inter_token_latency``, ``request_throughput``,
``input_sequence_length``, ``output_sequence_length``: ``avg``, ``p50``…``p99`` and a ``unit``)
and the run's arguments under ``input_config`` (``concurrency`` or ``request_rate``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import yaml

from capacity.errors import LoadTestFormatError
from capacity.measured.loadtest import LOADTEST_COLUMNS, LoadTestTable, make_table
from capacity.measured.loadtest_checks import group_mixes, validated_frame

#: ``--metadata KEY=VALUE`` pairs (stored as top-level strings) naming the replica's GPUs.
VLLM_GPU_KEYS = ("gpu_count", "tensor_parallel_size", "tp")
VLLM_REQUIRED = ("request_throughput", "completed", "total_input_tokens", "total_output_tokens")
#: Nesting a load-test YAML file may have (as JSON inside a file: guidellm's reports use 8).
MAX_YAML_DEPTH = 32
#: libyaml's parser when PyYAML was built with it (several times faster), else PyYAML's own.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
TIME_UNITS_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
PERCENTILE_ADVICE = (
    "rerun `vllm bench serve` with --percentile-metrics ttft,tpot,itl --metric-percentiles 50,95,99"
)


def looks_like_vllm_bench(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and "request_throughput" in document
        and any(key.endswith("_ttft_ms") for key in document)
    )


def looks_like_genai_perf(document: Any) -> bool:
    if not isinstance(document, dict):
        return False
    return isinstance(document.get("time_to_first_token"), dict) or (
        "input_config" in document and isinstance(document.get("request_throughput"), dict)
    )


def read_vllm_bench_json(files: Sequence[tuple[str, str]]) -> LoadTestTable:
    """``vllm bench serve`` result files, one per request rate (or per max concurrency)."""
    documents = _load_documents(files, looks_like_vllm_bench, "a vllm bench serve result")
    rows = [_vllm_row(name, document) for name, document in documents]
    notes = _missing_p95_notes(documents)
    failed = [name for name, d in documents if isinstance(d.get("failed"), int) and d["failed"] > 0]
    if failed:
        notes.append(
            f"failed requests reported in {', '.join(failed)}: latencies cover the "
            "completed requests only"
        )
    models = {str(d.get("model_id")) for _, d in documents if d.get("model_id")}
    engines = {
        str(d.get("backend") or d.get("endpoint_type"))
        for _, d in documents
        if d.get("backend") or d.get("endpoint_type")
    }
    gpus = {str(d["gpu_name"]) for _, d in documents if d.get("gpu_name")}
    return _table(
        rows,
        files,
        "vllm-bench-json",
        _one(models, "models", files),
        _one(engines, "backends", files),
        notes,
        gpu_type=_one(gpus, "GPUs", files),
        tensor_parallel=setup_degree([_vllm_gpu_count(n, d) for n, d in documents], files),
    )


def _vllm_gpu_count(name: str, document: Mapping[str, Any]) -> tuple[str, Any]:
    """(file, the GPU count its --metadata states, or None); keys that disagree (gpu_count=8
    with tp=4: data parallel?) leave one replica's size unknown and are refused."""
    stated = {key: document[key] for key in VLLM_GPU_KEYS if document.get(key) is not None}
    if len({str(value).strip() for value in stated.values()}) > 1:
        pairs = ", ".join(f"{key}={value}" for key, value in stated.items())
        raise LoadTestFormatError(
            f"{name}: the metadata's GPU counts disagree ({pairs}); state one replica's GPUs"
        )
    return name, next(iter(stated.values()), None)


def read_genai_perf_json(files: Sequence[tuple[str, str]]) -> LoadTestTable:
    """genai-perf ``profile_export_genai_perf.json`` files, one per concurrency or rate."""
    documents = _load_documents(files, looks_like_genai_perf, "a genai-perf profile export")
    rows = [_genai_perf_row(name, document) for name, document in documents]
    models = {model for _, d in documents if (model := _genai_perf_model(d)) is not None}
    return _table(rows, files, "genai-perf-json", _one(models, "models", files), None, [])


def _load_documents(
    files: Sequence[tuple[str, str]], check: Any, what: str
) -> list[tuple[str, dict]]:
    if not files:
        raise LoadTestFormatError("no load-test files given")
    documents = []
    for name, text in files:
        if not text.strip():
            raise LoadTestFormatError(f"{name}: empty file")
        document = parse_json(name, text)
        if not check(document):
            raise LoadTestFormatError(f"{name}: not {what} JSON file")
        documents.append((name, document))
    return documents


def parse_json(name: str, text: str) -> Any:
    """The JSON document of a file; a file that is not JSON is refused in one line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoadTestFormatError(f"{name}: not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    except RecursionError as exc:
        raise LoadTestFormatError(f"{name}: JSON nested too deeply to read") from exc
    except ValueError as exc:  # an integer longer than Python converts (4300 digits)
        raise LoadTestFormatError(f"{name}: not readable JSON ({str(exc).split(';')[0]})") from exc


def parse_yaml(name: str, text: str) -> Any:
    """A YAML file (a guidellm report, inference-perf's config) as Python objects. Its events
    are read first: aliases (they can expand a small file into an enormous one) and nesting
    deeper than :data:`MAX_YAML_DEPTH` are refused before anything is built."""
    try:
        depth = 0
        for event in yaml.parse(text, Loader=_YAML_LOADER):
            if isinstance(event, yaml.AliasEvent):
                raise LoadTestFormatError(f"{name}: YAML aliases are not read")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise LoadTestFormatError(f"{name}: YAML nested too deeply to read")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):  # libyaml's scanner, ahead of the events
            raise LoadTestFormatError(f"{name}: YAML nested too deeply to read") from exc
        problem = _first_line(exc)
        raise LoadTestFormatError(f"{name}: not a readable YAML file ({problem})") from exc
    except ValueError as exc:  # a scalar its constructor refuses: 2026-13-01, 5,000 digits
        if isinstance(exc, LoadTestFormatError):
            raise
        problem = str(exc).split(";")[0]
        raise LoadTestFormatError(f"{name}: not a readable YAML file ({problem})") from exc


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _number(name: str, document: Mapping[str, Any], key: str, *, scale: float = 1.0) -> float:
    """document[key] × scale; NaN when absent or null; a clear error when not a finite number."""
    value = document.get(key)
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LoadTestFormatError(f"{name}, column {key}: {value!r} is not a number")
    if not math.isfinite(value):
        raise LoadTestFormatError(f"{name}, column {key}: {value!r} is not a finite number")
    return float(value) * scale


def _required(name: str, document: Mapping[str, Any], key: str) -> float:
    """document[key], which must be present and a finite number."""
    value = _number(name, document, key)
    if math.isnan(value):
        raise LoadTestFormatError(f"{name}: missing {key}")
    return value


def _vllm_row(name: str, document: Mapping[str, Any]) -> dict[str, Any]:
    missing = [key for key in VLLM_REQUIRED if key not in document]
    if missing:
        raise LoadTestFormatError(f"{name}: missing key(s) {', '.join(missing)}")
    completed = _number(name, document, "completed")
    if not completed > 0:
        raise LoadTestFormatError(f"{name}, column completed: no request completed")
    row: dict[str, Any] = {"_where": name, **_vllm_load(name, document)}
    for column, key in (
        ("prompt_tokens", "total_input_tokens"),
        ("completion_tokens", "total_output_tokens"),
    ):
        total = _number(name, document, key)
        row[column] = total / completed
        # a total of a token or more spread below one per request: the completed count is off
        # (a smaller total is the column's own problem: its range check names it)
        if total >= 1 and row[column] < 1:
            raise LoadTestFormatError(
                f"{name}, column {key}: {total:g} tokens over {completed:g} completed requests "
                f"is {row[column]:.3g} per request, below 1 (is completed right?)"
            )
    row["request_throughput_rps"] = _number(name, document, "request_throughput")
    for metric in ("ttft", "tpot", "itl"):
        for stat, keys in (
            ("p50", ("p50", "median")),
            ("p95", ("p95",)),
            ("p99", ("p99",)),
            ("mean", ("mean",)),
        ):
            values = [_number(name, document, f"{k}_{metric}_ms", scale=1e-3) for k in keys]
            row[f"{metric}_{stat}_s"] = next((v for v in values if not math.isnan(v)), math.nan)
    for stat in ("p50", "p95", "p99", "mean"):
        if math.isnan(row[f"tpot_{stat}_s"]):
            row[f"tpot_{stat}_s"] = row[f"itl_{stat}_s"]
    return row


def _vllm_load(name: str, document: Mapping[str, Any]) -> dict[str, float]:
    rate = document.get("request_rate")
    concurrency = document.get("max_concurrency")
    if rate is None or rate == "inf" or (isinstance(rate, float) and math.isinf(rate)):
        if concurrency is None:
            raise LoadTestFormatError(
                f"{name}, column request_rate: an infinite rate without --max-concurrency is one "
                "burst of all prompts, not a load level; run at finite --request-rate values or "
                "with --max-concurrency"
            )
        return {"concurrency": _number(name, document, "max_concurrency"), "request_rate": math.nan}
    return {"request_rate": _number(name, document, "request_rate"), "concurrency": math.nan}


def _missing_p95_notes(documents: list[tuple[str, dict]]) -> list[str]:
    lacking = [
        name
        for name, d in documents
        if "p95_ttft_ms" not in d or ("p95_tpot_ms" not in d and "p95_itl_ms" not in d)
    ]
    if not lacking:
        return []
    return [
        f"no p95 latency in {', '.join(lacking)} (only the percentiles asked for were "
        f"saved): p99 stands in for p95, which is conservative; {PERCENTILE_ADVICE}"
    ]


def _genai_perf_row(name: str, document: Mapping[str, Any]) -> dict[str, Any]:
    config = document.get("input_config") or {}
    row: dict[str, Any] = {"_where": name, **_genai_perf_load(name, config)}
    row["request_throughput_rps"] = _stat(name, document, "request_throughput", "avg", time=False)
    row["prompt_tokens"] = _stat(name, document, "input_sequence_length", "avg", time=False)
    row["completion_tokens"] = _stat(name, document, "output_sequence_length", "avg", time=False)
    if "time_to_first_token" not in document:
        raise LoadTestFormatError(f"{name}: no time_to_first_token; profile with --streaming")
    tpot_key = (
        "time_per_output_token" if "time_per_output_token" in document else "inter_token_latency"
    )
    for metric, key in (("ttft", "time_to_first_token"), ("tpot", tpot_key)):
        for stat, source in (("p50", "p50"), ("p95", "p95"), ("p99", "p99"), ("mean", "avg")):
            row[f"{metric}_{stat}_s"] = _stat(name, document, key, source, time=True)
    return row


def _genai_perf_load(name: str, config: Mapping[str, Any]) -> dict[str, float]:
    stimulus = (config.get("perf_analyzer") or {}).get("stimulus") or {}
    for source in (config, stimulus):
        concurrency, rate = source.get("concurrency"), source.get("request_rate")
        if rate is not None:
            return {"request_rate": _number(name, source, "request_rate"), "concurrency": math.nan}
        if concurrency is not None:
            return {"concurrency": _number(name, source, "concurrency"), "request_rate": math.nan}
    raise LoadTestFormatError(f"{name}, column input_config: no concurrency and no request_rate")


def _stat(name: str, document: Mapping[str, Any], metric: str, stat: str, *, time: bool) -> float:
    entry = document.get(metric)
    if entry is None:
        return math.nan
    if not isinstance(entry, dict):
        raise LoadTestFormatError(f"{name}, column {metric}: expected an object of statistics")
    scale = 1.0
    if time:
        unit = entry.get("unit")
        if unit not in TIME_UNITS_S:
            raise LoadTestFormatError(f"{name}, column {metric}: unknown time unit {unit!r}")
        scale = TIME_UNITS_S[unit]
    return _number(f"{name}", entry, stat, scale=scale) if stat in entry else math.nan


def _genai_perf_model(document: Mapping[str, Any]) -> str | None:
    config = document.get("input_config") or {}
    model = config.get("model") or config.get("model_names")
    if isinstance(model, list):
        model = model[0] if model else None
    return None if model is None else str(model)


def _one(values: set[str], what: str, files: Sequence[tuple[str, str]]) -> str | None:
    if len(values) > 1:
        raise LoadTestFormatError(
            f"{', '.join(name for name, _ in files)} mix {what} ({', '.join(sorted(values))}); "
            "one setup per import"
        )
    return next(iter(values), None)


def setup_degree(values: Sequence[tuple[str, Any]], files: Sequence[tuple[str, str]]) -> int | None:
    """The one GPU count / tensor-parallel degree the files state ((file, value) pairs, None
    where a file states none), or None; a value that is not a whole number ≥ 1 is refused."""
    degrees = set()
    for name, value in values:
        if value is None:
            continue
        text = str(value).strip()
        if not text.isdigit() or int(text) < 1:
            raise LoadTestFormatError(f"{name}: GPU count {value!r} is not a whole number ≥ 1")
        degrees.add(text.lstrip("0"))
    found = _one(degrees, "GPU counts", files)
    return None if found is None else int(found)


def _table(
    rows: list[dict[str, Any]],
    files: Sequence[tuple[str, str]],
    source_format: str,
    model: str | None,
    engine: str | None,
    notes: list[str],
    *,
    gpu_type: str | None = None,
    tensor_parallel: int | None = None,
) -> LoadTestTable:
    frame = pd.DataFrame(rows)
    for column in LOADTEST_COLUMNS:
        if column not in frame:
            frame[column] = math.nan
    prompt, completion = frame["prompt_tokens"].to_numpy(), frame["completion_tokens"].to_numpy()
    if not (np.isnan(prompt).any() or np.isnan(completion).any()):
        frame["prompt_tokens"], frame["completion_tokens"] = group_mixes(prompt, completion)
    # One file per load level: the order files are given in carries no meaning.
    load = "concurrency" if frame["concurrency"].notna().all() else "request_rate"
    frame = frame.sort_values(["prompt_tokens", "completion_tokens", load], kind="stable")
    frame = frame[["_where", *LOADTEST_COLUMNS]].reset_index(drop=True)
    file_names = ", ".join(name for name, _ in files)
    checked, check_notes = validated_frame(frame, file_name=file_names)
    return make_table(
        checked,
        model=model,
        gpu_type=gpu_type,
        tensor_parallel=tensor_parallel,
        precision=None,
        engine=engine,
        source_format=source_format,
        notes=tuple(notes + check_notes),
    )
