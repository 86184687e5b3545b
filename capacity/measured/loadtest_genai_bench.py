"""Read genai-bench experiments (sgl-project/genai-bench): one run file per traffic scenario
and concurrency, with the experiment's ``experiment_metadata.json`` alongside.

A run file is what ``AggregatedMetricsCollector.save`` writes
(``genai_bench/metrics/aggregated_metrics_collector.py``): ``aggregated_metrics`` (the
``AggregatedMetrics`` model of ``genai_bench/metrics/metrics.py``: ``scenario``,
``num_concurrency``, ``iteration_type``, ``requests_per_second``,
``num_completed_requests`` and ``stats`` with ``ttft``, ``tpot``, ``num_input_tokens``,
``num_output_tokens`` as ``mean``, ``p50``, ``p95``, ``p99`` …), ``individual_request_metrics``
and ``_time_unit`` (``s`` or ``ms``, the unit of the latencies; absent in older files: seconds).
The metadata file is the ``ExperimentMetadata`` model of ``genai_bench/protocol.py``
(``model``, ``api_model_name``, ``server_engine``, ``server_gpu_type``, ``server_gpu_count``
…): its GPU count is the replica's, its model the served model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from capacity.errors import LoadTestFormatError
from capacity.measured.loadtest import LoadTestTable
from capacity.measured.loadtest_json import (
    TIME_UNITS_S,
    _load_documents,
    _number,
    _required,
    _table,
    setup_degree,
)


def looks_like_genai_bench_run(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("aggregated_metrics"), dict)


def looks_like_genai_bench_metadata(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and "traffic_scenario" in document
        and "cmd" in document
        and "server_gpu_count" in document
    )


def looks_like_genai_bench(document: Any) -> bool:
    return looks_like_genai_bench_run(document) or looks_like_genai_bench_metadata(document)


def read_genai_bench(files: Sequence[tuple[str, str]]) -> LoadTestTable:
    """genai-bench run files (one row each) and at most one experiment_metadata.json."""
    documents = _load_documents(files, looks_like_genai_bench, "a genai-bench run or metadata")
    metadata = [(n, d) for n, d in documents if not looks_like_genai_bench_run(d)]
    runs = [(n, d) for n, d in documents if looks_like_genai_bench_run(d)]
    if len(metadata) > 1:
        names = ", ".join(n for n, _ in metadata)
        raise LoadTestFormatError(f"{names}: one experiment_metadata.json per import")
    if not runs:
        raise LoadTestFormatError(
            f"{files[0][0]}: an experiment's metadata without its run files (the "
            "<scenario>_<task>_concurrency_<N>_time_<T>s.json files)"
        )
    rows = [_row(name, document) for name, document in runs]
    meta = metadata[0][1] if metadata else {}
    meta_name = metadata[0][0] if metadata else ""
    model = meta.get("api_model_name") or meta.get("model")
    return _table(
        rows,
        files,
        "genai-bench-json",
        None if model is None else str(model),
        _text(meta, "server_engine"),
        [],
        gpu_type=_text(meta, "server_gpu_type"),
        tensor_parallel=setup_degree([(meta_name, meta.get("server_gpu_count"))], files),
    )


def _text(document: Mapping[str, Any], key: str) -> str | None:
    value = document.get(key)
    return None if value is None or not str(value).strip() else str(value).strip()


def _row(name: str, document: Mapping[str, Any]) -> dict[str, Any]:
    metrics = document["aggregated_metrics"]
    unit = document.get("_time_unit", "s")
    if unit not in ("s", "ms"):
        raise LoadTestFormatError(f"{name}, _time_unit: {unit!r} is not s or ms")
    if metrics.get("iteration_type", "num_concurrency") != "num_concurrency":
        raise LoadTestFormatError(
            f"{name}, iteration_type: {metrics.get('iteration_type')!r}; only a concurrency "
            "sweep (num_concurrency) is a load test of a generation server"
        )
    if not _number(name, metrics, "num_completed_requests") > 0:
        raise LoadTestFormatError(f"{name}, num_completed_requests: no request completed")
    stats = metrics.get("stats")
    if not isinstance(stats, dict):
        raise LoadTestFormatError(f"{name}, stats: expected an object of statistics")
    row: dict[str, Any] = {
        "_where": name,
        "concurrency": _required(name, metrics, "num_concurrency"),
        "request_rate": math.nan,
        "request_throughput_rps": _required(name, metrics, "requests_per_second"),
        "prompt_tokens": _stat(name, stats, "num_input_tokens", "mean", 1.0),
        "completion_tokens": _stat(name, stats, "num_output_tokens", "mean", 1.0),
    }
    for metric in ("ttft", "tpot"):
        for stat in ("p50", "p95", "p99", "mean"):
            row[f"{metric}_{stat}_s"] = _stat(name, stats, metric, stat, TIME_UNITS_S[unit])
    return row


def _stat(name: str, stats: Mapping[str, Any], metric: str, stat: str, scale: float) -> float:
    entry = stats.get(metric)
    if not isinstance(entry, dict):
        raise LoadTestFormatError(f"{name}, stats, {metric}: expected an object of statistics")
    value = _number(f"{name}, {metric}", entry, stat, scale=scale)
    if math.isnan(value) and stat in ("mean", "p95"):
        raise LoadTestFormatError(f"{name}, stats, {metric}: missing {stat}")
    return value
