"""Small synthetic load-test files written for the tests (no real measurements in them)."""

from __future__ import annotations

import json

NIM_70B_H100 = "meta-llama3-70b-instruct__H100-SXM-80GB-HBM3__nim-trtllm_genai-perf.csv"
VLLM_CSV = "Meta-Llama-3-8B-Instruct__H100-PCIe-80GB__vllm-0.8.5_benchmark_serving.csv"

HEADER = (
    "model,gpu,tp,precision,engine,isl,osl,concurrency,request_throughput_rps,"
    "ttft_p95_s,itl_p95_s,ttft_mean_s,itl_mean_s"
)


def synthetic_rows(
    mixes: tuple[tuple[int, int], ...] = ((500, 100), (500, 500)),
    concurrencies: tuple[int, ...] = (1, 2, 4, 8, 16),
    *,
    tp: int = 2,
    precision: str = "fp8",
) -> list[str]:
    """CSV rows of a made-up replica: TTFT and TPOT grow with load, throughput saturates."""
    rows = []
    for prompt, completion in mixes:
        for n in concurrencies:
            ttft = 0.02 + 0.0001 * prompt * (1 + 0.8 * (n - 1))
            tpot = 0.01 * (1 + 0.05 * (n - 1))
            rps = n / (ttft + (completion - 1) * tpot)
            rows.append(
                f"toy-7b,TOY-GPU,{tp},{precision},toy-engine,{prompt},{completion},{n},"
                f"{rps:.6g},{ttft * 1.1:.6g},{tpot * 1.02:.6g},{ttft:.6g},{tpot:.6g}"
            )
    return rows


def synthetic_csv(rows: list[str] | None = None, header: str = HEADER) -> str:
    return "\n".join([header, *(synthetic_rows() if rows is None else rows)]) + "\n"


def vllm_result(rate: float | str, *, p95: bool = True, **extra: object) -> str:
    """A `vllm bench serve --save-result` file for a made-up run at one request rate."""
    r = 32.0 if rate == "inf" else float(rate)
    document: dict[str, object] = {
        "date": "20261201-120000",
        "backend": "vllm",
        "model_id": "toy/toy-7b",
        "num_prompts": 200,
        "request_rate": rate,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": 200 / r,
        "completed": 200,
        "total_input_tokens": 200 * 300,
        "total_output_tokens": 200 * 150,
        "request_throughput": r * 0.97,
        "output_throughput": r * 0.97 * 150,
        "total_token_throughput": r * 0.97 * 450,
    }
    for metric, base in (
        ("ttft", 40.0 + 2.0 * r),
        ("tpot", 12.0 + 0.2 * r),
        ("itl", 12.0 + 0.2 * r),
    ):
        document.update(
            {
                f"mean_{metric}_ms": base,
                f"median_{metric}_ms": base * 0.95,
                f"std_{metric}_ms": base * 0.1,
                f"p99_{metric}_ms": base * 1.6,
            }
        )
        if p95:
            document[f"p95_{metric}_ms"] = base * 1.4
    document.update(extra)
    return json.dumps(document)


def genai_perf_export(concurrency: int, *, unit: str = "ms") -> str:
    """A genai-perf profile_export_genai_perf.json of a made-up run at one concurrency."""
    scale = {"ms": 1.0, "ns": 1e6}[unit] if unit in ("ms", "ns") else 1.0

    def latency(avg_ms: float) -> dict[str, object]:
        return {
            "unit": unit,
            "avg": avg_ms * scale,
            "p50": avg_ms * 0.95 * scale,
            "p90": avg_ms * 1.2 * scale,
            "p95": avg_ms * 1.3 * scale,
            "p99": avg_ms * 1.5 * scale,
            "min": avg_ms * 0.5 * scale,
            "max": avg_ms * 2 * scale,
            "std": avg_ms * 0.1 * scale,
        }

    document = {
        "request_throughput": {"unit": "requests/sec", "avg": concurrency * 0.4},
        "request_latency": latency(2500.0 + 50 * concurrency),
        "time_to_first_token": latency(60.0 + 30.0 * concurrency),
        "inter_token_latency": latency(10.0 + 0.3 * concurrency),
        "output_token_throughput": {"unit": "tokens/sec", "avg": concurrency * 0.4 * 250},
        "input_sequence_length": {"unit": "tokens", "avg": 1000.0, "p50": 1000.0},
        "output_sequence_length": {"unit": "tokens", "avg": 250.0, "p50": 250.0},
        "input_config": {
            "model": ["toy/toy-7b"],
            "concurrency": concurrency,
            "request_rate": None,
            "synthetic_input_tokens_mean": 1000,
            "output_tokens_mean": 250,
        },
    }
    return json.dumps(document)
