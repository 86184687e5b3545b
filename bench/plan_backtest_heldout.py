"""Plan replay on real series gpucast was not built on: does band auto's calibration carry?

    python bench/plan_backtest_heldout.py [--data-dir DIR] [--cold-start-s 300 900]

The same CLI replay as ``bench/plan_backtest.py`` (``gpucast backtest --load FILE --days 7
--tradeoff --json``, every plan option at its default) on two real count series from the
Numenta Anomaly Benchmark (SOURCES.md §2e), read as request counts of an LLM service:

- ``nab_nyc_taxi_30min.csv``: NYC taxi passengers per 30 min; the last 35 days (2014-12-28 ..
  2015-01-31: New Year and a snowstorm, known anomalies, inside the replayed weeks);
- ``nab_aws_elb_request_count_5min.csv``: an AWS load balancer's requests per 5 min, 14 days.

Assumptions, stated: each count is requests in its window; every request carries
``TOKENS_PER_REQUEST`` tokens (1,000; a made-up constant mix, so the conversion is exact);
hourly history = the sum of the hour's windows, ``peak_rps`` = its busiest window's rate;
``--load`` = each window's rate as ``requests_per_s``. The GPU profile carries
``PROFILE_TOKENS_PER_S`` tokens/s per GPU, chosen per series so the fleet runs tens of GPUs
(a one-GPU fleet has nothing to plan). Nothing about the plan is tuned to these series.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from app.cli.demo import DEMO_PROFILE
from bench.plan_backtest import DEFAULT_DATA_DIR, gpucast_command

TOKENS_PER_REQUEST = 1000.0
SERIES = {
    # name: (file, days kept from the end, tokens/s per GPU)
    "nab/nyc-taxi": ("nab/nab_nyc_taxi_30min.csv", 35, 500.0),
    "nab/aws-elb": ("nab/nab_aws_elb_request_count_5min.csv", 14, 50.0),
}


def windows(data_dir: Path, file: str, days: int) -> tuple[pd.DataFrame, int]:
    frame = pd.read_csv(data_dir / file)
    frame["start"] = pd.to_datetime(frame["timestamp"], utc=True)
    step = int(frame["start"].diff().dropna().mode().iloc[0].total_seconds())
    # one regular step: missing windows carry 0 requests (NAB marks none missing here)
    index = pd.date_range(frame["start"].iloc[0], frame["start"].iloc[-1], freq=f"{step}s")
    values = frame.set_index("start")["value"].reindex(index, fill_value=0.0)
    values = values[values.index >= values.index[-1] - pd.Timedelta(days=days)]
    first_hour = values.index[0].ceil("h")
    values = values[values.index >= first_hour]
    return pd.DataFrame({"start": values.index, "requests": values.to_numpy(float)}), step


def prepare(workdir: Path, name: str, frame: pd.DataFrame, step: int, per_gpu: float) -> tuple:
    from app.db import open_database
    from app.db.models import GpuProfile

    url = f"sqlite:///{workdir / 'heldout.db'}"
    hour = frame["start"].dt.floor("h")
    rate = frame["requests"] / step
    hourly = pd.DataFrame(
        {
            "requests": frame.groupby(hour)["requests"].sum(),
            "peak_rps": rate.groupby(hour).max(),
        }
    )
    hourly["prompt_tokens"] = hourly["requests"] * TOKENS_PER_REQUEST * 0.8
    hourly["completion_tokens"] = hourly["requests"] * TOKENS_PER_REQUEST * 0.2
    hourly.index = hourly.index.strftime("%Y-%m-%dT%H:%M:%SZ")
    hourly.index.name = "timestamp"
    hourly_path, load_path = workdir / "hourly.csv", workdir / "load.csv"
    hourly.reset_index().to_csv(hourly_path, index=False)
    pd.DataFrame(
        {
            "timestamp": frame["start"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "requests_per_s": rate.to_numpy(),
        }
    ).to_csv(load_path, index=False)
    base = [*gpucast_command(), "--database-url", url]
    subprocess.run(
        [*base, "ingest", "hourly", str(hourly_path), "--series", name],
        check=True,
        capture_output=True,
        text=True,
    )
    database = open_database(url)
    database.ensure_schema(auto_migrate=True)
    with database.transaction() as session:
        session.add(
            GpuProfile(**{**DEMO_PROFILE, "name": "bench", "tokens_per_s_per_gpu": per_gpu})
        )
    database.dispose()
    return base, load_path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--cold-start-s", type=int, nargs="+", default=[300, 900])
    args = parser.parse_args(argv)
    print(
        "| series | cold start | gpucast GPU-h | time over capacity | x instant bound "
        "| x HPA at equal risk | trade-off 0.1/0.5/1/2/5 %: time over capacity (GPU-h) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, (file, days, per_gpu) in SERIES.items():
        frame, step = windows(args.data_dir, file, days)
        with tempfile.TemporaryDirectory(prefix="gpucast-heldout-") as tmp:
            base, load_path = prepare(Path(tmp), name, frame, step, per_gpu)
            for cold in args.cold_start_s:
                command = [
                    *base,
                    "backtest",
                    name,
                    "--profile",
                    "bench",
                    "--days",
                    "7",
                    "--cold-start-s",
                    str(cold),
                    "--load",
                    str(load_path),
                    "--tradeoff",
                    "--json",
                ]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"| {name} | {cold} s | failed: {done.stderr.strip()[:200]} |")
                    continue
                result = json.loads(done.stdout)
                ours = next(r for r in result["policies"] if r["policy"] == "gpucast")
                equal = result["versus_reactive_at_equal_risk"]
                equal_text = (
                    f"{equal['gpu_hours_ratio']:.3f} ({equal['target_utilization']:g})"
                    if equal["gpu_hours_ratio"] is not None
                    else "n/a"
                )
                trade = ", ".join(
                    f"{r['time_over_capacity_share']:.2%} ({r['gpu_hours']:,.0f})"
                    for r in result["tradeoff"] or []
                )
                print(
                    f"| {name} | {cold} s | {ours['gpu_hours']:,.0f} | "
                    f"{ours['time_over_capacity_share']:.2%} | "
                    f"{result['versus_instant_bound']['gpu_hours_ratio']:.3f} | {equal_text} | "
                    f"{trade} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
