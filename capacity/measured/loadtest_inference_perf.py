"""Read inference-perf per-stage reports (``stage_N_lifecycle_metrics.json``, one load stage
each).

The schema is what kubernetes-sigs/inference-perf writes in
``inference_perf/reportgen/base.py`` (``summarize_requests``, documented in
``docs/reports.md``): ``load_summary`` (``requested_rate``, ``achieved_rate`` and, for a
concurrency load, ``concurrency``), ``successes`` (``count``; ``latency`` with
``time_to_first_token``, ``time_per_output_token``, ``inter_token_latency`` and
``request_latency``, in seconds, each ``mean``, ``median`` and ``p{N}`` for the configured
percentiles, 95 and 99 by default; ``throughput.requests_per_sec``; ``prompt_tokens`` and
``output_len`` with their ``mean``) and ``failures``. The run's summary
(``summary_lifecycle_metrics.json``) covers every stage at once and is no load level.
The run's ``config.yaml`` (the ``Config`` model of ``inference_perf/config/config.py``, written
by ``generate_config_report``) may come along: its ``server.model_name`` is the model measured
(it states no GPU count).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from capacity.errors import LoadTestFormatError
from capacity.measured.loadtest import LoadTestTable
from capacity.measured.loadtest_json import (
    _load_documents,
    _number,
    _required,
    _table,
    parse_yaml,
)


def looks_like_inference_perf(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and isinstance(document.get("load_summary"), dict)
        and isinstance(document.get("successes"), dict)
    )


def read_inference_perf(files: Sequence[tuple[str, str]]) -> LoadTestTable:
    """inference-perf stage reports, one row per stage, and at most one config.yaml (the
    served model: ``server.model_name``)."""
    configs = [(n, t) for n, t in files if t.lstrip()[:1] != "{"]
    if len(configs) > 1:
        raise LoadTestFormatError(f"{', '.join(n for n, _ in configs)}: one config.yaml per import")
    stages = [(n, t) for n, t in files if t.lstrip()[:1] == "{"]
    if not stages:
        raise LoadTestFormatError(
            f"{files[0][0]}: a run's config.yaml without its stage_N_lifecycle_metrics.json files"
        )
    documents = _load_documents(
        stages, looks_like_inference_perf, "an inference-perf lifecycle metrics"
    )
    rows = [_row(name, document) for name, document in documents]
    failed = [
        name
        for name, d in documents
        if isinstance(d.get("failures"), dict) and _positive(d["failures"].get("count"))
    ]
    notes = (
        [f"failed requests reported in {', '.join(failed)}: latencies cover the successes only"]
        if failed
        else []
    )
    model = _config_model(*configs[0]) if configs else None
    return _table(rows, files, "inference-perf-json", model, None, notes)


def _config_model(name: str, text: str) -> str | None:
    config = parse_yaml(name, text)
    if not isinstance(config, dict) or not isinstance(config.get("server") or {}, dict):
        raise LoadTestFormatError(f"{name}: not an inference-perf config (no server section)")
    model = (config.get("server") or {}).get("model_name")
    return None if model is None or not str(model).strip() else str(model).strip()


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _object(name: str, document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = document.get(key)
    if not isinstance(value, dict):
        raise LoadTestFormatError(f"{name}, {key}: expected an object, got {value!r:.40}")
    return value


def _row(name: str, document: Mapping[str, Any]) -> dict[str, Any]:
    successes = document["successes"]
    count = _number(name, successes, "count")
    if not count > 0:
        raise LoadTestFormatError(f"{name}, successes: no request succeeded in this stage")
    latency = _object(f"{name}, successes", successes, "latency")
    throughput = _object(f"{name}, successes", successes, "throughput")
    row: dict[str, Any] = {"_where": name, **_load(name, document["load_summary"])}
    row["request_throughput_rps"] = _required(name, throughput, "requests_per_sec")
    row["prompt_tokens"] = _mean(name, successes, "prompt_tokens")
    row["completion_tokens"] = _mean(name, successes, "output_len")
    tpot_key = (
        "time_per_output_token" if latency.get("time_per_output_token") else ("inter_token_latency")
    )
    for metric, key in (("ttft", "time_to_first_token"), ("tpot", tpot_key)):
        summary = latency.get(key)
        if summary is None:
            raise LoadTestFormatError(f"{name}, latency: no {key} (run with streaming)")
        if not isinstance(summary, dict):
            raise LoadTestFormatError(f"{name}, latency, {key}: expected an object")
        for stat, source in (("p50", "median"), ("p95", "p95"), ("p99", "p99"), ("mean", "mean")):
            row[f"{metric}_{stat}_s"] = _number(f"{name}, {key}", summary, source)
    if math.isnan(row["ttft_p95_s"]) and math.isnan(row["ttft_p99_s"]):
        raise LoadTestFormatError(
            f"{name}, time_to_first_token: no p95 or p99; keep 95 and 99 in the report's "
            "percentiles"
        )
    return row


def _load(name: str, load: Any) -> dict[str, float]:
    if "concurrency" in load:
        return {"concurrency": _number(name, load, "concurrency"), "request_rate": math.nan}
    if "requested_rate" in load:
        return {"request_rate": _number(name, load, "requested_rate"), "concurrency": math.nan}
    raise LoadTestFormatError(
        f"{name}, load_summary: no requested_rate or concurrency; a run's summary "
        "(summary_lifecycle_metrics.json) covers every stage: import the "
        "stage_N_lifecycle_metrics.json files"
    )


def _mean(name: str, successes: Mapping[str, Any], key: str) -> float:
    return _required(f"{name}, {key}", _object(name, successes, key), "mean")
