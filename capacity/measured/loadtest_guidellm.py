"""Read guidellm benchmark reports (``guidellm benchmark --output-path benchmarks.json``, or
``.yaml``): one file holds every benchmark of a run, one load level each.

The schema is guidellm's ``GenerativeBenchmarksReport`` (vllm-project/guidellm,
``src/guidellm/benchmark/schemas/report.py``, ``benchmark.py``, ``base.py``, ``metrics.py``
and ``src/guidellm/schemas/statistics.py``; guidellm 0.3 wrote ``args`` for ``config`` and the
model as ``worker.backend_model``): ``benchmarks[]`` each with ``config.strategy``
(``type_`` synchronous / concurrent with ``streams`` / throughput with ``max_concurrency`` /
constant or poisson with ``rate``), ``config.backend.model`` and ``metrics``, where every
metric (``requests_per_second``, ``prompt_token_count``, ``output_token_count``,
``time_to_first_token_ms``, ``inter_token_latency_ms`` …) is split by request status
(``successful``, ``errored``, ``incomplete``, ``total``) into ``mean``, ``median`` and
``percentiles`` (``p50``, ``p95``, ``p99`` …).

guidellm's ``time_per_output_token_ms`` includes the first token; the inter-token latency
excludes it, as the TPOT of ``vllm bench serve`` and of gpucast does, so TPOT is read from
``inter_token_latency_ms``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from capacity.errors import LoadTestFormatError
from capacity.measured.loadtest import LoadTestTable
from capacity.measured.loadtest_json import _number, _one, _table, parse_json, parse_yaml

RATE_STRATEGIES = ("constant", "poisson")
CONCURRENCY_STRATEGIES = ("synchronous", "concurrent", "throughput")


def looks_like_guidellm(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and isinstance(document.get("benchmarks"), list)
        and all(isinstance(b, dict) and "metrics" in b for b in document["benchmarks"][:1])
    )


def read_guidellm(files: Sequence[tuple[str, str]]) -> LoadTestTable:
    """guidellm reports (JSON or YAML): one row per benchmark of a rate sweep or of a
    concurrency sweep."""
    rows: list[dict[str, Any]] = []
    models: set[str] = set()
    for name, text in files:
        document = _parse(name, text)
        benchmarks = document["benchmarks"]
        if not benchmarks:
            raise LoadTestFormatError(f"{name}: no benchmarks in the report")
        for i, benchmark in enumerate(benchmarks):
            where = f"{name}, benchmark {i + 1}"
            if not isinstance(benchmark, dict):
                raise LoadTestFormatError(f"{where}: expected an object")
            # guidellm 0.3 wrote the benchmark's arguments as "args", its model in "worker"
            config = _mapping(where, benchmark, "config" if "config" in benchmark else "args")
            model = _model(config.get("backend"), benchmark.get("worker"))
            if model is not None:
                models.add(model)
            rows.append(_row(where, benchmark, _mapping(where, config, "strategy")))
    kept, notes = _one_sweep(rows)
    return _table(kept, files, "guidellm", _one(models, "models", files), None, notes)


def _model(backend: Any, worker: Any) -> str | None:
    for source, key in ((backend, "model"), (worker, "backend_model")):
        if isinstance(source, dict) and source.get(key) not in (None, "", "None"):
            return str(source[key])
    return None


def _parse(name: str, text: str) -> dict[str, Any]:
    is_json = text.lstrip()[:1] == "{"
    document = parse_json(name, text) if is_json else parse_yaml(name, text)
    if not looks_like_guidellm(document):
        raise LoadTestFormatError(f"{name}: not a guidellm benchmarks report")
    return document


def _mapping(where: str, document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = document.get(key)
    if not isinstance(value, dict):
        raise LoadTestFormatError(f"{where}, {key}: expected an object, got {value!r:.40}")
    return value


def _row(where: str, benchmark: Mapping[str, Any], strategy: Mapping[str, Any]) -> dict[str, Any]:
    metrics = _mapping(where, benchmark, "metrics")
    row: dict[str, Any] = {"_where": where, **_load(where, strategy)}
    row["request_throughput_rps"] = _stat(where, metrics, "requests_per_second", "mean")
    row["prompt_tokens"] = _stat(where, metrics, "prompt_token_count", "mean")
    row["completion_tokens"] = _stat(where, metrics, "output_token_count", "mean")
    for metric, key in (("ttft", "time_to_first_token_ms"), ("tpot", "inter_token_latency_ms")):
        for stat in ("p50", "p95", "p99", "mean"):
            row[f"{metric}_{stat}_s"] = _stat(where, metrics, key, stat, scale=1e-3)
    for column in ("request_throughput_rps", "prompt_tokens", "completion_tokens", "ttft_p95_s"):
        if math.isnan(row[column]):
            raise LoadTestFormatError(f"{where}: no successful request measured ({column})")
    return row


def _load(where: str, strategy: Mapping[str, Any]) -> dict[str, float]:
    kind = strategy.get("type_")
    if kind in RATE_STRATEGIES:
        return {"request_rate": _required(where, strategy, "rate"), "concurrency": math.nan}
    if kind == "synchronous":
        return {"concurrency": 1.0, "request_rate": math.nan}
    if kind == "concurrent":
        return {"concurrency": _required(where, strategy, "streams"), "request_rate": math.nan}
    if kind == "throughput":
        # unbounded: all requests at once, not a load level (left out of the sweep)
        bound = _number(where, strategy, "max_concurrency")
        return {"concurrency": bound, "request_rate": math.nan}
    raise LoadTestFormatError(
        f"{where}, strategy: unknown type {kind!r}; expected one of "
        f"{', '.join(RATE_STRATEGIES + CONCURRENCY_STRATEGIES)}"
    )


def _required(where: str, document: Mapping[str, Any], key: str) -> float:
    value = _number(where, document, key)
    if math.isnan(value):
        raise LoadTestFormatError(f"{where}, strategy: missing {key}")
    return value


def _stat(
    where: str, metrics: Mapping[str, Any], metric: str, stat: str, *, scale: float = 1.0
) -> float:
    """metrics[metric].successful's mean or percentile × scale; NaN when absent."""
    entry = metrics.get(metric)
    if entry is None:
        return math.nan
    if not isinstance(entry, dict) or not isinstance(entry.get("successful"), dict | None):
        raise LoadTestFormatError(f"{where}, {metric}: expected statistics by request status")
    summary = entry.get("successful") or {}
    if stat == "mean":
        return _number(f"{where}, {metric}", summary, "mean", scale=scale)
    percentiles = summary.get("percentiles") or {}
    if not isinstance(percentiles, dict):
        raise LoadTestFormatError(f"{where}, {metric}, percentiles: expected an object")
    return _number(f"{where}, {metric}", percentiles, stat, scale=scale)


def _one_sweep(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """A guidellm sweep runs synchronous and throughput benchmarks around its constant rates:
    those are not load levels of the rate sweep and are left out (a note says so). Without
    rate benchmarks the concurrency levels are the sweep; the unbounded throughput
    benchmark (no max_concurrency) is never a load level."""
    by_rate = [r for r in rows if not math.isnan(r["request_rate"])]
    by_concurrency = [r for r in rows if not math.isnan(r["concurrency"])]
    kept = by_rate or by_concurrency
    if not kept:
        raise LoadTestFormatError(
            f"{rows[0]['_where']}: only unbounded throughput benchmarks; run a rate or "
            "concurrency sweep (--profile sweep, constant, poisson or concurrent)"
        )
    left = [r["_where"] for r in rows if r not in kept]
    notes = (
        [
            f"left out (not a load level of the {'rate' if by_rate else 'concurrency'} sweep): "
            + ", ".join(left)
        ]
        if left
        else []
    )
    return kept, notes
