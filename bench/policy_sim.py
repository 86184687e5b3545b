"""Replay the ServeGen m-small hourly trace under the five scaling policies.

Assumptions (stated so the table can be reproduced and challenged):
- load: ``avg_rate_rps`` of servegen_language_m-small_hourly.csv (Alibaba Model Studio,
  14 days, 336 hours) taken as requests/s. The upstream trace does not say whether rates were
  scaled, so the fleet size here is illustrative; the policy comparison is what matters.
- tokens per request: measured from the trace's covered clients, sum of input + output tokens
  over the requests they sent (about 135 tokens).
- per-GPU throughput: --tokens-per-s-per-gpu (default 10,000 tokens/s, prompt + completion,
  one GPU per replica), a round figure for a ~8B model on one H100 under vLLM.
  The library's FLOPs bound at 35 % MFU is ~21,500 tokens/s, so this is conservative.
- static peak: the peak of day 0 (past data only); every fleet starts sized for day 0's
  last hour.
- replay: days 1-13 (312 hours; day 0 only seeds the forecast), hourly values interpolated
  linearly to 60 s ticks, metrics lag one tick, added replicas serve after a 600 s cold start.
- predictive: a seasonal mean forecast (same hour over the previous up-to-7 days, only past
  data) turned into replicas by capacity.plan_gpus with its defaults (target 0.75, safety 1.2).

Run:  python bench/policy_sim.py [--data-dir DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

import capacity as cap

TRACE = Path("servegen") / "servegen_language_m-small_hourly.csv"
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def load_trace(data_dir: Path) -> tuple[pd.Series, float]:
    """Hourly requests/s on a UTC index (day 0 00:00 set to an arbitrary date) and tokens/req."""
    frame = pd.read_csv(data_dir / TRACE)
    index = pd.date_range("2026-01-01", periods=len(frame), freq="h", tz="UTC")
    qps = pd.Series(frame["avg_rate_rps"].to_numpy(dtype=float), index=index, name="qps")
    covered = frame["token_coverage_frac"].fillna(0) * frame["requests"]
    tokens = frame["est_input_tokens_covered"] + frame["est_output_tokens_covered"]
    return qps, float(tokens.sum() / covered.sum())


def seasonal_mean_forecast(qps: pd.Series, *, start_day: int, max_days: int = 7) -> pd.DataFrame:
    """Forecast frame (ds, yhat, ...) for every hour from start_day on, from past days only."""
    days = qps.to_numpy().reshape(-1, 24)
    rows = []
    for day in range(start_day, len(days)):
        yhat = days[max(0, day - max_days) : day].mean(axis=0)
        rows.append(yhat)
    yhat = np.concatenate(rows)
    ds = qps.index[start_day * 24 :]
    return pd.DataFrame(
        {"ds": ds, "yhat": yhat, "lo_80": yhat, "hi_80": yhat, "lo_95": yhat, "hi_95": yhat}
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--tokens-per-s-per-gpu", type=float, default=10_000.0)
    parser.add_argument("--usd-per-gpu-hour", type=float, default=2.5)
    parser.add_argument("--cold-start-s", type=float, default=600.0)
    parser.add_argument("--tick-s", type=float, default=60.0)
    args = parser.parse_args(argv)

    qps, tokens_per_request = load_trace(args.data_dir)
    replica_qps = args.tokens_per_s_per_gpu / tokens_per_request
    forecast = seasonal_mean_forecast(qps, start_day=1)
    plan = cap.plan_gpus(
        forecast,
        per_gpu_tokens_per_s=args.tokens_per_s_per_gpu,
        tokens_per_request=tokens_per_request,
        forecast_unit="per_s",
    )
    predictive = cap.Predictive(plan.frame.set_index("hour")["replicas"])
    reactive = cap.ReactiveHPA(target_utilization=0.75)
    policies = [
        cap.StaticPeak(utilization_target=0.75, peak_load=float(qps.iloc[:24].max())),
        reactive,
        cap.Tiered(),
        predictive,
        cap.Hybrid(predictive, reactive),
    ]
    replay = qps.iloc[24:]
    comparison = cap.simulate_policies(
        replay,
        policies,
        capacity_per_replica=replica_qps,
        usd_per_gpu_hour=args.usd_per_gpu_hour,
        cold_start_s=args.cold_start_s,
        tick_s=args.tick_s,
        interpolation="linear",
        initial_load=float(qps.iloc[23]),
    )
    table = comparison.table.copy()
    table["rate_limited"] = table["rate_limited"] / 1e6
    table["rate_limited_share"] = table["rate_limited_share"] * 100
    table = table.rename(
        columns={"rate_limited": "rate_limited_Mreq", "rate_limited_share": "rate_limited_%"}
    )
    print(
        f"ServeGen m-small, {len(replay)} h replayed; {tokens_per_request:.1f} tokens/request; "
        f"{args.tokens_per_s_per_gpu:,.0f} tokens/s per GPU = {replica_qps:.1f} req/s per "
        f"1-GPU replica; cold start {args.cold_start_s:.0f} s; ${args.usd_per_gpu_hour}/GPU-h"
    )
    print(f"load: mean {replay.mean():.0f} req/s, peak {replay.max():.0f} req/s (hourly means)")
    print(markdown_table(table))


def markdown_table(table: pd.DataFrame) -> str:
    """A GitHub markdown table; floats to 3 significant digits (no extra dependency)."""

    def cell(value: object) -> str:
        if isinstance(value, float | np.floating):
            return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
        return str(value)

    header = [table.index.name or "", *table.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, row in table.iterrows():
        lines.append("| " + " | ".join([str(name), *(cell(v) for v in row)]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
