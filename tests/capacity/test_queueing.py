"""Erlang C against table values, closed forms and an independent simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

import capacity as cap


@pytest.mark.parametrize(("servers", "p_wait"), [(11, 0.6821), (12, 0.4494), (13, 0.2853)])
def test_erlang_c_matches_the_classic_table_for_10_erlangs(servers: int, p_wait: float) -> None:
    result = cap.erlang_c(10.0, 1.0, servers=servers)
    assert result.probability_of_waiting == pytest.approx(p_wait, abs=5e-5)


def test_mm1_and_mm2_closed_forms() -> None:
    mm1 = cap.erlang_c(0.5, 1.0, servers=1)
    assert mm1.probability_of_waiting == pytest.approx(0.5)
    assert mm1.mean_wait_s == pytest.approx(1.0)  # rho / (mu - lambda)
    assert mm1.p99_response_s == pytest.approx(math.log(100) / 0.5)  # T ~ Exp(mu - lambda)
    rho = 0.7
    mm2 = cap.erlang_c(1.4, 1.0, servers=2)
    assert mm2.probability_of_waiting == pytest.approx(2 * rho**2 / (1 + rho))


def _simulate_mmc_waits(rate: float, service_s: float, servers: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    services = rng.exponential(service_s, n)
    free_at = np.zeros(servers)
    waits = np.empty(n)
    for i in range(n):
        k = int(np.argmin(free_at))
        start = max(arrivals[i], free_at[k])
        waits[i] = start - arrivals[i]
        free_at[k] = start + services[i]
    return waits


def test_erlang_c_agrees_with_a_discrete_event_simulation() -> None:
    result = cap.erlang_c(8.0, 1.0, servers=10)
    waits = _simulate_mmc_waits(8.0, 1.0, 10, 60_000)[5_000:]
    assert (waits > 0).mean() == pytest.approx(result.probability_of_waiting, abs=0.03)
    assert waits.mean() == pytest.approx(result.mean_wait_s, rel=0.12)
    assert np.quantile(waits, 0.99) == pytest.approx(result.p99_wait_s, rel=0.12)


def test_min_servers_for_a_p99_target() -> None:
    result = cap.min_servers_for_latency(10.0, 1.0, target_s=6.0)
    assert result.p99_response_s <= 6.0
    fewer = cap.erlang_c(10.0, 1.0, servers=result.servers - 1)
    assert fewer.p99_response_s > 6.0
    wait_only = cap.min_servers_for_latency(10.0, 1.0, target_s=0.5, include_service=False)
    assert (
        wait_only.p99_wait_s
        <= 0.5
        < cap.erlang_c(10.0, 1.0, servers=wait_only.servers - 1).p99_wait_s
    )


def test_unstable_and_unreachable() -> None:
    with pytest.raises(cap.UnstableQueueError, match="use at least 11"):
        cap.erlang_c(10.0, 1.0, servers=10)
    with pytest.raises(cap.InvalidParameterError, match="below the 99% quantile"):
        cap.min_servers_for_latency(10.0, 1.0, target_s=1.0)


@pytest.mark.parametrize(
    ("value", "tier"),
    [(0.1, "low"), (0.3, "healthy"), (0.7, "healthy"), (0.71, "high")],
)
def test_utilization_tiers(value: float, tier: str) -> None:
    assert cap.utilization_tier(value) == tier
    assert cap.utilization_tier(value).advice


def test_utilization_formula() -> None:
    assert cap.utilization(100.0, 0.2, gpus=40) == pytest.approx(0.5)
