"""Erlang C (M/M/c) queueing: probability of waiting, mean and percentile waits, server counts.

A "server" is one concurrent serving slot: for LLM inference, replicas x the batch slots each
replica runs at the service time you pass. Arrivals are Poisson, service times exponential.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from capacity._checks import require_fraction, require_int, require_positive
from capacity.errors import InvalidParameterError, UnstableQueueError


@dataclass(frozen=True)
class ErlangC:
    """M/M/c results. Times in seconds; utilization = offered load / servers."""

    servers: int
    offered_load_erlangs: float
    utilization: float
    probability_of_waiting: float
    mean_wait_s: float
    p99_wait_s: float
    p99_response_s: float


def _erlang_c_probability(servers: int, offered_load: float) -> float:
    # Erlang B by the stable recursion B(k) = a B(k-1) / (k + a B(k-1)), then C from B.
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered_load * blocking / (k + offered_load * blocking)
    return servers * blocking / (servers - offered_load * (1.0 - blocking))


def wait_quantile_s(result: ErlangC, service_time_s: float, *, quantile: float = 0.99) -> float:
    """Wait not exceeded with probability `quantile`: P(W > t) = C exp(-(c mu - lambda) t)."""
    tail = 1.0 - require_fraction("quantile", quantile)
    if result.probability_of_waiting <= tail:
        return 0.0
    drain_rate = (result.servers - result.offered_load_erlangs) / service_time_s
    return math.log(result.probability_of_waiting / tail) / drain_rate


def _response_tail(t: float, c_wait: float, mu: float, theta: float) -> float:
    # Response = wait + Exp(mu) service; wait is 0 w.p. 1-C and Exp(theta) w.p. C.
    if abs(theta - mu) < 1e-12 * mu:
        conv = (1.0 + mu * t) * math.exp(-mu * t)
    else:
        conv = (theta * math.exp(-mu * t) - mu * math.exp(-theta * t)) / (theta - mu)
    return (1.0 - c_wait) * math.exp(-mu * t) + c_wait * conv


def response_quantile_s(result: ErlangC, service_time_s: float, *, quantile: float = 0.99) -> float:
    """Response time (wait + service) not exceeded with probability `quantile`, by bisection."""
    tail = 1.0 - require_fraction("quantile", quantile)
    mu = 1.0 / service_time_s
    theta = (result.servers - result.offered_load_erlangs) * mu
    low, high = 0.0, service_time_s
    while _response_tail(high, result.probability_of_waiting, mu, theta) > tail:
        high *= 2.0
    for _ in range(100):
        mid = (low + high) / 2.0
        if _response_tail(mid, result.probability_of_waiting, mu, theta) > tail:
            low = mid
        else:
            high = mid
    return high


def erlang_c(arrival_rate_per_s: float, service_time_s: float, *, servers: int) -> ErlangC:
    """M/M/c queue with Poisson arrivals (per s), exponential service (mean s), `servers` slots.

    Raises UnstableQueueError when arrival_rate x service_time >= servers.
    """
    rate = require_positive("arrival_rate_per_s", arrival_rate_per_s)
    service = require_positive("service_time_s", service_time_s)
    count = require_int("servers", servers, minimum=1)
    offered = rate * service
    if offered >= count:
        raise UnstableQueueError(
            f"offered load {offered:.3g} Erlangs needs more than {count} servers; "
            f"use at least {math.floor(offered) + 1}"
        )
    c_wait = _erlang_c_probability(count, offered)
    partial = ErlangC(count, offered, offered / count, c_wait, 0.0, 0.0, 0.0)
    return ErlangC(
        servers=count,
        offered_load_erlangs=offered,
        utilization=offered / count,
        probability_of_waiting=c_wait,
        mean_wait_s=c_wait * service / (count - offered),
        p99_wait_s=wait_quantile_s(partial, service),
        p99_response_s=response_quantile_s(partial, service),
    )


def min_servers_for_latency(
    arrival_rate_per_s: float,
    service_time_s: float,
    *,
    target_s: float,
    quantile: float = 0.99,
    include_service: bool = True,
    max_servers: int = 100_000,
) -> ErlangC:
    """Fewest servers whose `quantile` latency is <= target_s (response time, or wait only).

    Raises InvalidParameterError when the target is below what any server count can reach
    (a response target under the service time's own quantile).
    """
    target = require_positive("target_s", target_s)
    service = require_positive("service_time_s", service_time_s)
    if include_service and target < -math.log(1.0 - quantile) * service:
        raise InvalidParameterError(
            f"target_s={target} is below the {quantile:.0%} quantile of the service time alone "
            f"({-math.log(1.0 - quantile) * service:.3g} s); no server count can meet it"
        )
    count = math.floor(require_positive("arrival_rate_per_s", arrival_rate_per_s) * service) + 1
    while count <= max_servers:
        result = erlang_c(arrival_rate_per_s, service, servers=count)
        latency = (
            response_quantile_s(result, service, quantile=quantile)
            if include_service
            else wait_quantile_s(result, service, quantile=quantile)
        )
        if latency <= target:
            return result
        count += 1
    raise InvalidParameterError(f"no server count up to {max_servers} meets target_s={target}")
