"""guidellm, inference-perf and genai-bench result files read into load-test tables, and the
setup (GPU count, model) the files state, vllm bench serve's included.

The files (tests/capacity/loadtest_files, see its README) follow each tool's schema; the
expected numbers are read from the files themselves, never retyped.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import capacity as cap
from tests.capacity.loadtest_fixtures import vllm_result

FILES = Path(__file__).parent / "loadtest_files"
GUIDELLM_SWEEP = FILES / "guidellm_sweep.json"
GUIDELLM_YAML = FILES / "guidellm_concurrent.yaml"


def read(*paths: Path) -> list[tuple[str, str]]:
    return [(p.name, p.read_text()) for p in paths]


def inference_perf_stages() -> list[Path]:
    return sorted((FILES / "inference_perf").glob("stage_*_lifecycle_metrics.json"))


def genai_bench_files() -> list[Path]:
    return sorted((FILES / "genai_bench").glob("*.json"))


def guidellm_stat(metric: dict[str, Any], stat: str) -> float:
    successful = metric["successful"]
    return float(successful["mean"] if stat == "mean" else successful["percentiles"][stat])


def test_a_guidellm_sweep_is_its_constant_rate_benchmarks() -> None:
    report = json.loads(GUIDELLM_SWEEP.read_text())
    table = cap.read_loadtest_files(read(GUIDELLM_SWEEP))
    assert table.source_format == "guidellm"
    assert table.model == "meta-llama/Llama-3.1-8B-Instruct" and table.tensor_parallel is None
    rates = [b for b in report["benchmarks"] if b["config"]["strategy"]["type_"] == "constant"]
    assert len(rates) == 3 == len(table.frame)
    for row, benchmark in zip(table.to_records(), rates, strict=True):
        metrics = benchmark["metrics"]
        assert row["request_rate"] == benchmark["config"]["strategy"]["rate"]
        assert row["concurrency"] is None
        rps = guidellm_stat(metrics["requests_per_second"], "mean")
        assert row["request_throughput_rps"] == rps
        assert row["prompt_tokens"] == guidellm_stat(metrics["prompt_token_count"], "mean")
        assert row["completion_tokens"] == guidellm_stat(metrics["output_token_count"], "mean")
        for stat in ("p50", "p95", "p99", "mean"):
            ttft = guidellm_stat(metrics["time_to_first_token_ms"], stat) / 1000
            # TPOT without the first token: guidellm's inter-token latency
            tpot = guidellm_stat(metrics["inter_token_latency_ms"], stat) / 1000
            assert row[f"ttft_{stat}_s"] == pytest.approx(ttft, rel=1e-12)
            assert row[f"tpot_{stat}_s"] == pytest.approx(tpot, rel=1e-12)
    assert any("benchmark 1, guidellm_sweep.json, benchmark 2" in n for n in table.notes)


def test_a_guidellm_0_3_report_reads_the_same() -> None:
    """guidellm 0.3 (src/guidellm/benchmark/benchmark.py at v0.3.0) kept the strategy under
    ``args`` and the model as ``worker.backend_model``."""
    report = json.loads(GUIDELLM_SWEEP.read_text())
    for benchmark in report["benchmarks"]:
        config = benchmark.pop("config")
        benchmark["args"] = {"strategy": config["strategy"], "max_duration": 60.0}
        benchmark["worker"] = {"type_": "generative_requests_worker", "backend_type": "openai_http"}
        benchmark["worker"]["backend_model"] = config["backend"]["model"]
    old = cap.read_loadtest_files([("benchmarks.json", json.dumps(report))])
    new = cap.read_loadtest_files(read(GUIDELLM_SWEEP))
    assert old.to_records() == new.to_records() and old.model == new.model


def test_a_guidellm_yaml_report_of_concurrent_streams_reads_by_concurrency() -> None:
    table = cap.read_loadtest_files(read(GUIDELLM_YAML))
    assert table.source_format == "guidellm" and table.load_column == "concurrency"
    assert list(table.frame["concurrency"]) == [1.0, 4.0, 16.0]
    assert table.mixes() == [(512.0, 128.0)]


def test_inference_perf_stages_are_one_row_each() -> None:
    paths = inference_perf_stages()
    table = cap.read_loadtest_files(read(*reversed(paths)))
    assert table.source_format == "inference-perf-json" and len(table.frame) == 3
    for row, path in zip(table.to_records(), paths, strict=True):
        stage = json.loads(path.read_text())
        successes, latency = stage["successes"], stage["successes"]["latency"]
        assert row["request_rate"] == stage["load_summary"]["requested_rate"]
        assert row["request_throughput_rps"] == successes["throughput"]["requests_per_sec"]
        assert row["prompt_tokens"] == successes["prompt_tokens"]["mean"]
        assert row["completion_tokens"] == successes["output_len"]["mean"]
        for stat, key in (("p50", "median"), ("p95", "p95"), ("p99", "p99"), ("mean", "mean")):
            assert row[f"ttft_{stat}_s"] == latency["time_to_first_token"][key]
            assert row[f"tpot_{stat}_s"] == latency["time_per_output_token"][key]
    assert any("stage_2_lifecycle_metrics.json" in n and "failed" in n for n in table.notes)


def test_inference_perf_config_names_the_model() -> None:
    config = FILES / "inference_perf" / "config.yaml"
    table = cap.read_loadtest_files(read(config, *inference_perf_stages()))
    assert table.model == "meta-llama/Llama-3.1-8B-Instruct" and table.tensor_parallel is None
    assert (
        table.to_records() == cap.read_loadtest_files(read(*inference_perf_stages())).to_records()
    )
    with pytest.raises(cap.LoadTestFormatError, match="config.yaml, config.yaml: one config"):
        cap.read_loadtest_files([*read(config, config), *read(*inference_perf_stages())])
    with pytest.raises(cap.LoadTestFormatError, match="config.yaml without its stage_N"):
        cap.read_loadtest_files(read(config))
    listed = config.read_text().replace("server:\n", "server:\n- \n", 1)
    with pytest.raises(cap.LoadTestFormatError, match="not an inference-perf config"):
        cap.read_loadtest_files([("config.yaml", listed), *read(*inference_perf_stages())])


def test_genai_bench_runs_take_the_experiment_setup() -> None:
    table = cap.read_loadtest_files(read(*genai_bench_files()))
    assert table.source_format == "genai-bench-json"
    assert (table.model, table.gpu_type, table.tensor_parallel, table.engine) == (
        "meta-llama/Llama-3.1-70B-Instruct",
        "H100",
        4,
        "SGLang",
    )
    runs = [p for p in genai_bench_files() if p.name != "experiment_metadata.json"]
    by_concurrency = {}
    for path in runs:
        metrics = json.loads(path.read_text())["aggregated_metrics"]
        by_concurrency[metrics["num_concurrency"]] = metrics
    assert list(table.frame["concurrency"]) == sorted(by_concurrency) == [1, 8, 32]
    for row in table.to_records():
        metrics = by_concurrency[row["concurrency"]]
        stats = metrics["stats"]
        assert row["request_throughput_rps"] == metrics["requests_per_second"]
        assert row["prompt_tokens"] == stats["num_input_tokens"]["mean"]
        assert row["completion_tokens"] == stats["num_output_tokens"]["mean"]
        for stat in ("p50", "p95", "p99", "mean"):
            assert row[f"ttft_{stat}_s"] == stats["ttft"][stat]
            assert row[f"tpot_{stat}_s"] == stats["tpot"][stat]


def test_genai_bench_latencies_in_milliseconds_are_converted() -> None:
    runs = []
    for path in genai_bench_files():
        document = json.loads(path.read_text())
        if "aggregated_metrics" in document:
            for metric in ("ttft", "tpot"):
                stats = document["aggregated_metrics"]["stats"][metric]
                stats.update({k: v * 1000 for k, v in stats.items() if v is not None})
            document["_time_unit"] = "ms"
        runs.append((path.name, json.dumps(document)))
    in_ms = cap.read_loadtest_files(runs)
    in_s = cap.read_loadtest_files(read(*genai_bench_files()))
    assert in_ms.frame["ttft_p95_s"].to_numpy() == pytest.approx(in_s.frame["ttft_p95_s"])


def test_vllm_metadata_states_the_gpu_count() -> None:
    files = [(f"r{r}.json", vllm_result(r, gpu_count="2", gpu_name="H100")) for r in (1, 2, 4)]
    table = cap.read_loadtest_files(files)
    assert (table.tensor_parallel, table.gpu_type) == (2, "H100")
    assert cap.read_loadtest_files(files, tensor_parallel=2).tensor_parallel == 2
    with pytest.raises(cap.LoadTestFormatError, match="state GPU count.* 2 but .* 4 was selected"):
        cap.read_loadtest_files(files, tensor_parallel=4)
    mixed = [*files[:2], ("r4.json", vllm_result(4, gpu_count="1"))]
    with pytest.raises(cap.LoadTestFormatError, match=r"mix GPU counts \(1, 2\)"):
        cap.read_loadtest_files(mixed)
    both = [(f"r{r}.json", vllm_result(r, gpu_count="2", tp="2")) for r in (1, 2)]
    assert cap.read_loadtest_files(both).tensor_parallel == 2
    disagree = [both[0], ("r4.json", vllm_result(4, gpu_count="8", tensor_parallel_size="4"))]
    with pytest.raises(cap.LoadTestFormatError, match=r"r4.json: .*disagree \(gpu_count=8, tensor"):
        cap.read_loadtest_files(disagree)
    unstated = cap.read_loadtest_files([(f"r{r}.json", vllm_result(r)) for r in (1, 2)])
    assert (unstated.tensor_parallel, unstated.gpu_type) == (None, None)


def _edit(path: Path, change: Any) -> tuple[str, str]:
    document = json.loads(path.read_text())
    change(document)
    return (path.name, json.dumps(document))


def _set(document: dict[str, Any], keys: str, value: Any) -> None:
    *parents, last = keys.split(".")
    for key in parents:
        document = document[int(key)] if key.isdigit() else document[key]  # type: ignore[index]
    if value is _DELETE:
        del document[last]
    else:
        document[last] = value


_DELETE = object()


def _guidellm(keys: str, value: Any) -> list[tuple[str, str]]:
    return [_edit(GUIDELLM_SWEEP, lambda d: _set(d, keys, value))]


def _stages(keys: str, value: Any) -> list[tuple[str, str]]:
    first, *rest = inference_perf_stages()
    return [_edit(first, lambda d: _set(d, keys, value)), *read(*rest)]


def _genai_bench(keys: str, value: Any) -> list[tuple[str, str]]:
    paths = genai_bench_files()
    run = next(p for p in paths if "concurrency_8_" in p.name)
    return [_edit(run, lambda d: _set(d, keys, value)) if p == run else read(p)[0] for p in paths]


def _genai_bench_meta(value: Any) -> list[tuple[str, str]]:
    meta = FILES / "genai_bench" / "experiment_metadata.json"
    others = [p for p in genai_bench_files() if p != meta]
    return [_edit(meta, lambda d: _set(d, "server_gpu_count", value)), *read(*others)]


TTFT_MS = "benchmarks.2.metrics.time_to_first_token_ms"
STAGE_TTFT = "successes.latency.time_to_first_token"
MALFORMED = [
    ("guidellm no benchmarks", _guidellm("benchmarks", []), "no benchmarks in the report"),
    (
        "guidellm text latency",
        _guidellm(f"{TTFT_MS}.successful.percentiles.p95", "fast"),
        "benchmark 3, time_to_first_token_ms, column p95: 'fast' is not a number",
    ),
    (
        "guidellm no rate",
        _guidellm("benchmarks.2.config.strategy.rate", _DELETE),
        "benchmark 3, strategy: missing rate",
    ),
    (
        "guidellm unknown strategy",
        _guidellm("benchmarks.2.config.strategy.type_", "burst"),
        "unknown type 'burst'",
    ),
    (
        "guidellm metrics not an object",
        _guidellm("benchmarks.3.metrics", [1, 2]),
        "benchmark 4, metrics: expected an object",
    ),
    (
        "guidellm no successful request",
        _guidellm("benchmarks.2.metrics.requests_per_second.successful", None),
        "benchmark 3: no successful request measured (request_throughput_rps)",
    ),
    (
        "inference-perf run summary",
        read(*inference_perf_stages(), FILES / "inference_perf" / "summary_lifecycle_metrics.json"),
        "a run's summary (summary_lifecycle_metrics.json) covers every stage",
    ),
    (
        "inference-perf text rate",
        _stages("load_summary.requested_rate", "five"),
        "stage_0_lifecycle_metrics.json, column requested_rate: 'five' is not a number",
    ),
    (
        "inference-perf no ttft",
        _stages(STAGE_TTFT, None),
        "no time_to_first_token (run with streaming)",
    ),
    (
        "inference-perf no successes",
        _stages("successes.count", 0),
        "stage_0_lifecycle_metrics.json, successes: no request succeeded",
    ),
    (
        "genai-bench text throughput",
        _genai_bench("aggregated_metrics.requests_per_second", "2.2"),
        "column requests_per_second: '2.2' is not a number",
    ),
    (
        "genai-bench no tpot p95",
        _genai_bench("aggregated_metrics.stats.tpot.p95", None),
        "stats, tpot: missing p95",
    ),
    (
        "genai-bench unknown unit",
        _genai_bench("_time_unit", "min"),
        "_time_unit: 'min' is not s or ms",
    ),
    (
        "genai-bench bad gpu count",
        _genai_bench_meta("four"),
        "experiment_metadata.json: GPU count 'four' is not a whole number ≥ 1",
    ),
    (
        "genai-bench metadata alone",
        read(FILES / "genai_bench" / "experiment_metadata.json"),
        "an experiment's metadata without its run files",
    ),
]


@pytest.mark.parametrize(
    ("files", "says"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED]
)
def test_malformed_files_are_refused_in_one_line(files: list[tuple[str, str]], says: str) -> None:
    with pytest.raises(cap.LoadTestFormatError) as refused:
        cap.read_loadtest_files(files)
    message = str(refused.value)
    assert says in message and "\n" not in message


def test_a_file_of_two_formats_or_of_none_is_refused_naming_what_was_expected() -> None:
    both = json.loads(vllm_result(1)) | {"benchmarks": []}
    with pytest.raises(cap.LoadTestFormatError, match="keys of several formats"):
        cap.read_loadtest_files([("both.json", json.dumps(both))])
    with pytest.raises(cap.LoadTestFormatError, match="guidellm benchmarks report.*inference-perf"):
        cap.read_loadtest_files([("x.json", '{"results": []}')])
    with pytest.raises(cap.LoadTestFormatError, match="one format per import"):
        cap.read_loadtest_files([*read(GUIDELLM_SWEEP), *read(*inference_perf_stages())])


DEEP_YAML = r"^r.yaml: YAML nested too deeply to read$"


@pytest.mark.parametrize(
    "text",
    [
        "benchmarks: " + "[" * 5000,
        "benchmarks:\n" + "".join("  " * i + "a:\n" for i in range(3000)),
    ],
    ids=["flow", "block"],
)
def test_deeply_nested_yaml_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(cap.LoadTestFormatError, match=DEEP_YAML):
        cap.read_loadtest_files([("r.yaml", text)])


def test_yaml_may_nest_32_levels() -> None:
    def nested(levels: int) -> str:  # the top-level mapping is the first level
        return "benchmarks: " + "[" * (levels - 1) + "]" * (levels - 1) + "\n"

    with pytest.raises(cap.LoadTestFormatError, match="nested too deeply"):
        cap.read_loadtest_files([("r.yaml", nested(33))])
    with pytest.raises(cap.LoadTestFormatError, match="r.yaml: not a guidellm benchmarks report"):
        cap.read_loadtest_files([("r.yaml", nested(32))])


def test_yaml_aliases_are_not_expanded() -> None:
    text = "benchmarks: &b [1]\nconfig: *b\n"
    with pytest.raises(cap.LoadTestFormatError, match=r"^r.yaml: YAML aliases are not read$"):
        cap.read_loadtest_files([("r.yaml", text)])
    assert math.isfinite(cap.read_loadtest_files(read(GUIDELLM_YAML)).frame["ttft_p95_s"].max())


@pytest.mark.parametrize(
    ("scalar", "problem"),
    [
        ("9" * 5000, r"Exceeds the limit \(4300 digits\)"),
        ("2026-13-01", "month must be in 1..12"),
    ],
)
def test_a_yaml_scalar_its_constructor_refuses_is_named_in_one_line(
    scalar: str, problem: str
) -> None:
    text = f"benchmarks: []\ncreated: {scalar}\n"
    with pytest.raises(
        cap.LoadTestFormatError, match=rf"^r.yaml: not a readable YAML file \({problem}"
    ) as info:
        cap.read_loadtest_files([("r.yaml", text)])
    assert "\n" not in str(info.value)
