"""Ingest speed on PostgreSQL: gpucast's hourly ingest path vs a bare COPY of the same file.

    python bench/ingest_speed.py --database-url postgresql://postgres@127.0.0.1:5432/gpucast_bench

Generates a CSV of SERIES x HOURS hourly rows (default 1,000 x 1,000 = 1,000,000), then, for
each repetition and in alternating order:
  * gpucast: parse + validate the CSV (app.ingest.read_hourly_csv) and store it
    (app.ingest.store: COPY into a staging table + one INSERT ... ON CONFLICT), one transaction,
    into an empty observations table (insert) and again over the loaded rows (replace);
  * bare COPY: psycopg COPY of the same file into a plain table with no keys or indexes.
Prints rows/s of each, medians over the repetitions, and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psycopg
from sqlalchemy import text

from app import ingest
from app.db import open_database
from app.settings import normalize_database_url


def make_csv(path: Path, *, series: int, hours: int, seed: int = 7) -> int:
    rng = np.random.default_rng(seed)
    stamps = pd.date_range("2025-01-01T00:00Z", periods=hours, freq="h")
    stamp_text = np.array(stamps.strftime("%Y-%m-%dT%H:%M:%SZ"))
    daily = 1.0 + 0.5 * np.sin(2 * np.pi * np.arange(hours) / 24)
    with path.open("w") as handle:
        handle.write("series,timestamp,requests,prompt_tokens,completion_tokens,peak_rps\n")
        for index in range(series):
            requests = np.round(rng.uniform(1e3, 1e6) * daily * rng.lognormal(0, 0.1, hours))
            frame = pd.DataFrame(
                {
                    "series": f"region-{index % 7}/model-{index:04d}",
                    "timestamp": stamp_text,
                    "requests": requests.astype("int64"),
                    "prompt_tokens": (requests * rng.uniform(200, 2000)).astype("int64"),
                    "completion_tokens": (requests * rng.uniform(50, 500)).astype("int64"),
                    "peak_rps": np.round(requests / 3600 * 1.8, 3),
                }
            )
            frame.to_csv(handle, header=False, index=False)
    return series * hours


def gpucast_ingest(database_url: str, path: Path) -> float:
    database = open_database(database_url)
    started = time.perf_counter()
    with path.open("rb") as handle:
        frame = ingest.read_hourly_csv(handle, ingest.HourlyOptions())
    with database.transaction() as session:
        ingest.store(session, frame, create_series=True)
    elapsed = time.perf_counter() - started
    database.dispose()
    return elapsed


def bare_copy(dsn: str, path: Path) -> float:
    with psycopg.connect(dsn) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_bare_copy")
        conn.execute(
            "CREATE TABLE bench_bare_copy (series text, ts timestamptz, requests double precision,"
            " prompt_tokens double precision, completion_tokens double precision,"
            " peak_rps double precision)"
        )
        conn.commit()
        started = time.perf_counter()
        with (
            conn.cursor() as cursor,
            path.open("rb") as handle,
            cursor.copy("COPY bench_bare_copy FROM STDIN WITH (FORMAT csv, HEADER true)") as copy,
        ):
            while block := handle.read(1 << 20):
                copy.write(block)
        conn.commit()
        elapsed = time.perf_counter() - started
        conn.execute("DROP TABLE bench_bare_copy")
        conn.commit()
    return elapsed


def reset(database_url: str) -> None:
    database = open_database(database_url)
    database.upgrade()
    with database.engine.begin() as connection:
        connection.execute(text("TRUNCATE observations, series RESTART IDENTITY CASCADE"))
    database.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="an empty PostgreSQL database")
    parser.add_argument("--series", type=int, default=1_000)
    parser.add_argument("--hours", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    url = normalize_database_url(args.database_url)
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hourly.csv"
        rows = make_csv(path, series=args.series, hours=args.hours)
        size_mb = path.stat().st_size / 1e6
        print(f"{rows:,} rows, {size_mb:.1f} MB CSV, {args.repeat} repetitions")
        results: dict[str, list[float]] = {
            "gpucast insert": [],
            "gpucast replace": [],
            "bare COPY": [],
        }
        for rep in range(args.repeat):
            order = ["gpucast", "copy"] if rep % 2 == 0 else ["copy", "gpucast"]
            for what in order:
                if what == "copy":
                    results["bare COPY"].append(bare_copy(dsn, path))
                else:
                    reset(url)
                    results["gpucast insert"].append(gpucast_ingest(url, path))
                    results["gpucast replace"].append(gpucast_ingest(url, path))
        reset(url)
    medians = {name: statistics.median(times) for name, times in results.items()}
    print(f"{'path':<16} {'median s':>9} {'rows/s':>12}   runs (s)")
    for name, times in results.items():
        runs = ", ".join(f"{t:.2f}" for t in times)
        print(f"{name:<16} {medians[name]:>9.2f} {rows / medians[name]:>12,.0f}   {runs}")
    for name in ("gpucast insert", "gpucast replace"):
        print(f"ratio {name} / bare COPY throughput: {medians['bare COPY'] / medians[name]:.2f}")


if __name__ == "__main__":
    main()
