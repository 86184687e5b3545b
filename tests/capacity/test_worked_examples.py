"""The worked examples of the capacity seeds, reproduced with the library's own calls."""

from __future__ import annotations

import pytest

import capacity as cap


def test_long_range_peak_1200_qps_grown_8_percent_for_6_months_times_spike_3() -> None:
    peak = cap.long_range_peak_qps(1200, growth_rate=0.08, periods=6, spike_factor=3.0)
    assert round(peak, 1) == 5712.7


def test_littles_law_32_in_flight_at_200_ms_is_160_qps_per_replica() -> None:
    assert cap.littles_law_qps(32, 0.2) == pytest.approx(160.0)


def test_replicas_for_the_planned_peak_with_30_percent_redundancy() -> None:
    peak = cap.long_range_peak_qps(1200, growth_rate=0.08, periods=6, spike_factor=3.0)
    assert cap.replicas_for_qps(peak, cap.littles_law_qps(32, 0.2), redundancy=0.3) == 47


def test_hpa_at_25_percent_surge_against_80_percent_target_gives_56() -> None:
    from capacity import hpa_desired_replicas

    peak = cap.long_range_peak_qps(1200, growth_rate=0.08, periods=6, spike_factor=3.0)
    current = 47
    utilization_now = peak * 1.25 / (current * 160.0)
    assert hpa_desired_replicas(current, utilization_now, target_utilization=0.80) == 56


def test_llama_70b_on_h100_at_35_percent_mfu() -> None:
    h100 = cap.GPUS["h100-80g"]
    tokens_per_s = cap.theoretical_tokens_per_s(h100.dense_fp16_tflops, 70e9, utilization=0.35)
    assert tokens_per_s == pytest.approx(2472.5)
    req_per_s = cap.requests_per_s(tokens_per_s, prompt_tokens=2000, output_tokens=512)
    assert round(req_per_s, 2) == 0.98


def test_70b_fp16_weights_need_two_80gb_gpus() -> None:
    assert cap.weights_gb(70e9, "fp16") == pytest.approx(140.0)
    llama_70b_nominal = cap.ModelSpec("llama-70b", 70e9, 80, 8192, 64, 8, 128, 131072)
    fit = cap.min_tensor_parallel(
        llama_70b_nominal, "h100-80g", precision="fp16", context_tokens=4096, concurrency=1
    )
    assert fit.tensor_parallel == 2
    one_gpu = cap.fit_at(llama_70b_nominal, "h100-80g", tensor_parallel=1, precision="fp16")
    assert one_gpu.max_concurrency == 0


def test_10_qps_at_1_2_qps_per_replica_with_30_percent_redundancy_is_12_replicas() -> None:
    assert cap.replicas_for_qps(10, 1.2, redundancy=0.0) == 9
    assert cap.replicas_for_qps(10, 1.2, redundancy=0.3) == 12


def test_growth_factor_1_5_on_top_gives_18_not_13_to_14() -> None:
    # The seed quotes "13-14 replicas" after a 1.5 growth factor; 9 x 1.5 = 13.5 forgets the
    # 30 % redundancy. 9 x 1.3 x 1.5 = 17.55, so 18 replicas.
    assert cap.replicas_for_qps(10, 1.2, redundancy=0.3, growth=1.5) == 18


def test_28_h100_for_a_month() -> None:
    assert cap.monthly_cost_usd(28, 2.5) == pytest.approx(50_400.0)
    assert cap.monthly_cost_usd(28, cap.GPUS["h100-80g"].on_demand_usd_per_hour) == 50_400.0


def test_gqa_kv_cache_is_8x_smaller_than_the_naive_formula_for_70b() -> None:
    model = cap.MODELS["llama-3.1-70b"]
    gqa = cap.kv_cache_bytes_per_token(model)
    naive = cap.naive_kv_cache_bytes_per_token(model)
    assert gqa == 2 * 80 * 8 * 128 * 2 == 327_680
    assert naive / gqa == 8
