"""Per-GPU and per-replica throughput: FLOPs-based, Little's law, and a measured SLO knee."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from capacity._checks import require_fraction, require_positive
from capacity.errors import InvalidParameterError, SLOUnreachableError

LOAD_TEST_COLUMNS = ("concurrency", "throughput", "p95_ttft_s", "p95_tpot_s")


@dataclass(frozen=True)
class Knee:
    """The best operating point of a load test that still meets the latency SLO."""

    concurrency: float
    throughput: float
    p95_ttft_s: float
    p95_tpot_s: float


def theoretical_tokens_per_s(
    peak_tflops: float, parameters: float, *, utilization: float = 0.35
) -> float:
    """Tokens/s one GPU can generate: peak FLOPS x utilization / (2 x parameters).

    A forward pass costs about 2 FLOPs per parameter per token. utilization (model FLOPs
    utilization, MFU) is the share of peak actually achieved; 0.3-0.4 is typical for serving.
    """
    flops = require_positive("peak_tflops", peak_tflops) * 1e12
    mfu = require_fraction("utilization", utilization)
    return flops * mfu / (2.0 * require_positive("parameters", parameters))


def requests_per_s(tokens_per_s: float, *, prompt_tokens: float, output_tokens: float) -> float:
    """Requests/s from a token throughput: tokens_per_s / (prompt_tokens + output_tokens)."""
    require_positive("tokens_per_s", tokens_per_s)
    total = require_positive("prompt_tokens", prompt_tokens) + output_tokens
    if output_tokens < 0:
        raise InvalidParameterError(f"output_tokens must be >= 0, got {output_tokens!r}")
    return tokens_per_s / total


def littles_law_qps(concurrency: float, latency_s: float) -> float:
    """Throughput (requests/s) that `concurrency` in-flight requests of `latency_s` each sustain.

    Little's law L = lambda x W, so lambda = L / W.
    """
    return require_positive("concurrency", concurrency) / require_positive("latency_s", latency_s)


def in_flight_requests(qps: float, latency_s: float) -> float:
    """Average number of requests in flight (Little's law L = lambda x W)."""
    return require_positive("qps", qps) * require_positive("latency_s", latency_s)


def slo_knee(load_test: pd.DataFrame, *, max_p95_ttft_s: float, max_p95_tpot_s: float) -> Knee:
    """The load-test row with the largest throughput whose p95 TTFT and TPOT meet the SLO.

    load_test columns: concurrency, throughput (requests/s or tokens/s, whichever was measured),
    p95_ttft_s (time to first token), p95_tpot_s (time per output token). Raises
    SLOUnreachableError when no row meets both limits.
    """
    missing = set(LOAD_TEST_COLUMNS) - set(load_test.columns)
    if missing:
        raise InvalidParameterError(f"load_test is missing column(s) {sorted(missing)}")
    ttft = require_positive("max_p95_ttft_s", max_p95_ttft_s)
    tpot = require_positive("max_p95_tpot_s", max_p95_tpot_s)
    ok = load_test[(load_test["p95_ttft_s"] <= ttft) & (load_test["p95_tpot_s"] <= tpot)]
    if ok.empty:
        raise SLOUnreachableError(
            f"no load-test row meets p95 TTFT <= {ttft} s and p95 TPOT <= {tpot} s; "
            "relax the SLO or measure lower concurrencies"
        )
    best = ok.loc[ok["throughput"].idxmax()]
    return Knee(*(float(best[column]) for column in LOAD_TEST_COLUMNS))
