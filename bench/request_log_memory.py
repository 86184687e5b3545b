"""Memory of per-request log ingestion: gpucast's chunked aggregation vs reading the whole log.

    python bench/request_log_memory.py --rows 10000000

Writes a synthetic request log (timestamp, input_tokens, output_tokens; one row per request,
spread over --hours hours), then measures in separate processes the peak RSS and wall time of
(a) ``app.ingest.aggregate_request_log`` (chunked; what ``gpucast ingest requests`` runs) and
(b) a plain ``pandas.read_csv`` of the whole file followed by the same hourly aggregation.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

CHILD = r"""
import json, resource, sys, time
import pandas as pd
path, mode = sys.argv[1], sys.argv[2]
started = time.perf_counter()
if mode == "gpucast":
    from app.ingest import RequestLogOptions, aggregate_request_log
    hourly = aggregate_request_log(path, RequestLogOptions())
    rows = int(hourly["requests"].sum())
else:
    frame = pd.read_csv(path)
    stamps = pd.to_datetime(frame["timestamp"], utc=True)
    hourly = frame.groupby(stamps.dt.floor("h")).agg(
        requests=("input_tokens", "size"), tokens=("input_tokens", "sum"))
    rows = int(hourly["requests"].sum())
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - started,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_log(path: Path, rows: int, hours: int, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2026-11-01T00:00Z").value // 10**9
    chunk = 1_000_000
    with path.open("w") as handle:
        handle.write("timestamp,input_tokens,output_tokens\n")
        for offset in range(0, rows, chunk):
            n = min(chunk, rows - offset)
            seconds = np.sort(rng.uniform(0, hours * 3600, n)) + start
            stamps = pd.to_datetime(seconds, unit="s", utc=True).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            frame = pd.DataFrame(
                {
                    "timestamp": stamps,
                    "input_tokens": rng.integers(10, 8000, n),
                    "output_tokens": rng.integers(1, 1000, n),
                }
            )
            frame.to_csv(handle, header=False, index=False)


def measure(path: Path, mode: str) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), mode], capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--hours", type=int, default=24)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "requests.csv"
        started = time.perf_counter()
        write_log(path, args.rows, args.hours)
        size_mb = path.stat().st_size / 1e6
        print(
            f"{args.rows:,} requests over {args.hours} h, {size_mb:,.0f} MB CSV "
            f"(written in {time.perf_counter() - started:.0f} s)"
        )
        for mode in ("gpucast", "pandas whole file"):
            stats = measure(path, "gpucast" if mode == "gpucast" else "pandas")
            assert stats["rows"] == args.rows, stats
            print(
                f"{mode:<18} peak RSS {stats['peak_rss_mb']:>8,.0f} MB   "
                f"{stats['seconds']:>6.1f} s   {args.rows / stats['seconds']:>12,.0f} rows/s"
            )


if __name__ == "__main__":
    main()
