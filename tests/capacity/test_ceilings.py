"""What physics allows a replica: names resolved to the catalog, the compute and decode
ceilings, the context length, and SLO answers held under them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import capacity as cap
from tests.capacity.loadtest_fixtures import synthetic_csv, synthetic_rows

NIM_8B_H100 = "meta-llama3-8b-instruct__H100-SXM-80GB-HBM3__nim-trtllm_genai-perf.csv"
SLO = cap.SloTarget(ttft_p95_s=2.0, tpot_p95_s=0.05)


@pytest.mark.parametrize(
    ("name", "catalog"),
    [
        ("A100-SXM4-80GB", "a100-80g"),
        ("H100-SXM-80GB-HBM3", "h100-80g"),
        ("H100-SXM", "h100-80g"),
        ("H100-PCIe-80GB", "h100-pcie-80g"),
        ("1xNVIDIA-H100-PCIe", "h100-pcie-80g"),
        ("H200-SXM", "h200-141g"),
        ("B200-SXM", "b200-180g"),
        ("L40S", "l40s-48g"),
        ("RTX-4090", "rtx-4090-24g"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090-24g"),
        ("l4-24g", "l4-24g"),
    ],
)
def test_gpu_names_of_load_test_tools_resolve_to_the_catalog(name: str, catalog: str) -> None:
    gpu = cap.gpu_by_name(name)
    assert gpu is not None and gpu.name == catalog


@pytest.mark.parametrize(
    ("name", "catalog"),
    [
        ("meta-llama3-70b-instruct", "llama-3-70b"),
        ("meta-llama3-8b-instruct", "llama-3-8b"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
        ("Meta-Llama-3-8B-Instruct", "llama-3-8b"),
        ("meta-llama/Llama-3.1-70B", "llama-3.1-70b"),
        ("Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b"),
        ("LLaMA-v2-7B", "llama-2-7b"),
    ],
)
def test_model_names_of_load_tests_resolve_to_the_catalog(name: str, catalog: str) -> None:
    model = cap.model_by_name(name)
    assert model is not None and model.name == catalog


def test_unknown_names_resolve_to_nothing() -> None:
    assert cap.gpu_by_name("TOY-GPU") is None and cap.gpu_by_name(None) is None
    assert cap.model_by_name("toy-7b") is None and cap.model_by_name("") is None


def test_llama_3_has_an_8k_context_and_llama_3_1_a_128k_one() -> None:
    assert cap.MODELS["llama-3-8b"].max_context_tokens == 8192
    assert cap.MODELS["llama-3-70b"].max_context_tokens == 8192
    assert cap.MODELS["llama-3.1-70b"].max_context_tokens == 131072


def test_the_compute_ceiling_is_peak_flops_over_two_flops_per_parameter() -> None:
    ceilings = cap.ServingCeilings.known(
        gpus=2, gpu=cap.GPUS["a100-80g"], model=cap.MODELS["llama-3-8b"]
    )
    assert ceilings.prefill_tokens_per_s() == pytest.approx(2 * 312e12 / (2 * 8.03e9))
    # one completion token: no decode step, so compute alone bounds it
    assert ceilings.requests_per_s(200, 1) == pytest.approx(ceilings.prefill_tokens_per_s() / 201)


def test_decode_is_bounded_by_reading_the_kv_cache() -> None:
    # compute raised far above any GPU's, so that the memory bound is the one that binds
    ceilings = cap.ServingCeilings.known(
        gpus=1, gpu=cap.GPUS["a100-80g"], model=cap.MODELS["llama-3-8b"], peak_tflops=1e5
    )
    kv_bytes = 2 * 32 * 8 * 128  # per token, one byte per element
    decode_bound = 2039e9 / (kv_bytes * (200 + 2000 / 2)) / 1999
    assert ceilings.requests_per_s(200, 2000) == pytest.approx(decode_bound)
    assert decode_bound < ceilings.prefill_tokens_per_s() / 2200


def test_fp8_serving_uses_the_fp8_peak() -> None:
    h100, model = cap.GPUS["h100-80g"], cap.MODELS["llama-3-70b"]
    fp8 = cap.ServingCeilings.known(gpus=1, gpu=h100, model=model, precision="fp8 (gemm fp8)")
    fp16 = cap.ServingCeilings.known(gpus=1, gpu=h100, model=model, precision="fp16")
    assert fp8.peak_tflops == 1979 and fp16.peak_tflops == 989


def test_nothing_known_means_no_ceiling() -> None:
    ceilings = cap.ServingCeilings.known(gpus=1, gpu=None, model=None)
    assert math.isinf(ceilings.requests_per_s(100, 100))
    ceilings.check_context(1e6, 1e6)


@pytest.fixture(scope="module")
def nim_8b(loadtests: Path) -> cap.LoadTestTable:
    text = (loadtests / NIM_8B_H100).read_text()
    return cap.read_loadtest_csv_setups(text, file_name=NIM_8B_H100)[0]


@pytest.fixture(scope="module")
def model_8b(nim_8b: cap.LoadTestTable) -> cap.SloModel:
    return cap.fit_slo_model(nim_8b)


def test_the_table_names_give_the_model_its_ceilings(model_8b: cap.SloModel) -> None:
    ceilings = model_8b.ceilings
    assert ceilings.context_tokens == 8192 and ceilings.parameters == 8.03e9
    assert ceilings.peak_tflops == 989 and ceilings.gpus == 1


@pytest.mark.parametrize("value", [5e-324, 0.5, 0.0, -3.0, float("nan"), float("inf")])
def test_token_counts_below_one_or_not_finite_are_refused(
    model_8b: cap.SloModel, value: float
) -> None:
    with pytest.raises(cap.InvalidParameterError, match="prompt_tokens must be a finite token"):
        model_8b.capacity(prompt_tokens=value, completion_tokens=100, slo=SLO)
    with pytest.raises(cap.InvalidParameterError, match="completion_tokens must be a finite"):
        model_8b.capacity(prompt_tokens=100, completion_tokens=value, slo=SLO)


def test_a_mix_beyond_the_context_length_is_refused(model_8b: cap.SloModel) -> None:
    with pytest.raises(cap.ContextLengthError, match="context length of 8,192 tokens"):
        model_8b.capacity(prompt_tokens=32000, completion_tokens=1, slo=SLO)
    with pytest.raises(cap.ContextLengthError):
        model_8b.capacity(prompt_tokens=8000, completion_tokens=193, slo=SLO)
    model_8b.capacity(prompt_tokens=7000, completion_tokens=1000, slo=SLO)


def test_a_plan_hour_beyond_the_context_is_sized_at_the_nearest_servable_mix(
    model_8b: cap.SloModel,
) -> None:
    prompts, completions = model_8b.sane_mix(np.array([30000.0, 0.2]), np.array([2000.0, 0.5]))
    assert prompts[0] + completions[0] <= 8192 and prompts[0] / completions[0] == pytest.approx(
        15, rel=0.01
    )
    assert (prompts[1], completions[1]) == (1.0, 1.0)
    per_gpu = model_8b.tokens_per_s_per_gpu(np.array([30000.0]), np.array([2000.0]), SLO)
    assert per_gpu.shape == (1,) and per_gpu[0] >= 0


def test_no_answer_is_above_the_ceiling_and_a_capped_one_says_so(nim_8b: cap.LoadTestTable) -> None:
    # a made-up GPU a tenth of an H100: the model's answers at light mixes are above it
    ceilings = cap.ServingCeilings(gpus=1, parameters=8.03e9, peak_tflops=98.9)
    model = cap.fit_slo_model(nim_8b, ceilings=ceilings)
    capped = 0
    for prompt in (200.0, 2000.0, 7000.0):
        for completion in (1.0, 200.0, 1000.0):
            got = model.capacity(
                prompt_tokens=prompt,
                completion_tokens=completion,
                slo=SLO,
                allow_extrapolation=True,
            )
            ceiling = ceilings.requests_per_s(prompt, completion)
            assert got.requests_per_s_per_replica <= ceiling * (1 + 1e-12)
            assert got.requests_per_s_per_replica_high <= ceiling * (1 + 1e-12)
            if got.binding == "physics":
                capped += 1
                assert got.requests_per_s_per_replica == pytest.approx(ceiling)
                assert "physical ceiling" in got.note
    assert capped >= 3


def test_every_published_row_is_under_its_ceiling(shared_data: Path) -> None:
    checked = 0
    for path in sorted((shared_data / "loadtests").glob("*.csv")):
        for table in cap.read_loadtest_csv_setups(path.read_text(), file_name=path.name):
            ceilings = cap.table_ceilings(table, gpus=table.tensor_parallel or 1)
            assert ceilings.peak_tflops is not None and ceilings.parameters is not None, path
            frame = table.frame
            for prompt, completion, rate in zip(
                frame.prompt_tokens,
                frame.completion_tokens,
                frame.request_throughput_rps,
                strict=True,
            ):
                assert rate <= ceilings.requests_per_s(prompt, completion), (path.name, prompt)
                checked += 1
    assert checked > 100


def test_a_table_without_known_names_has_no_ceiling() -> None:
    table = cap.read_loadtest_csv(synthetic_csv(synthetic_rows()), file_name="toy.csv")
    model = cap.fit_slo_model(table)
    assert model.ceilings.parameters is None and model.ceilings.context_tokens is None
    got = model.capacity(
        prompt_tokens=50_000,
        completion_tokens=3,
        slo=cap.SloTarget(60, 1),
        allow_extrapolation=True,
    )
    assert got.binding != "physics"
