"""Nightly job throughput: 1 worker vs a process pool on every core vs a 2-worker Dask cluster.

    python bench/nightly.py [--series 200] [--metrics requests] [--database-url URL]

Generates N synthetic 30-day hourly series (daily and weekly seasonality, trend, noise, spikes,
an outage gap in some; levels from hundreds to hundreds of thousands of requests per hour;
tokens = requests x a per-series tokens per request, with noise), loads them into a fresh
database (a temporary SQLite file unless ``--database-url`` names an empty one), then runs the
full nightly job (``run_forecasts``: every default candidate model, both metrics) once per
configuration on the same data. The forecast tables are emptied before each configuration so
each does the full work. Wall time includes loading history, starting the process pool and
writing every run back; the Dask cluster is started before its timing starts, as a deployed
scheduler would be, and its start-up time is reported apart.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads: one BLAS thread in the parent too

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sqlalchemy import delete, func, select  # noqa: E402

from app import ingest  # noqa: E402
from app.db import Database, open_database  # noqa: E402
from app.db.models import ForecastPoint, ForecastRun  # noqa: E402
from app.jobs import ForecastOptions, JobReport, run_forecasts, run_item  # noqa: E402
from app.jobs.nightly import build_items  # noqa: E402

REGIONS = ("us-east", "us-west", "eu-west", "ap-south")
MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen2.5-32b", "mistral-7b", "deepseek-v3")
UTC_OFFSET_H = {"us-east": -5, "us-west": -8, "eu-west": 1, "ap-south": 5}


def synthetic_series(rng: np.random.Generator, hours: pd.DatetimeIndex, region: str) -> dict:
    """One service's hourly load: requests, token split and peak_rps (arrays, same length)."""
    n = len(hours)
    t = np.arange(n, dtype="float64")
    local_hour = (hours.hour.to_numpy() + UTC_OFFSET_H[region]) % 24
    local_dow = (hours.dayofweek.to_numpy() * 24 + hours.hour.to_numpy()) + UTC_OFFSET_H[region]
    local_dow = (local_dow // 24) % 7
    level = float(np.exp(rng.uniform(np.log(300), np.log(300_000))))  # requests/hour
    peak_hour = rng.uniform(13, 17)
    swing = rng.uniform(0.3, 0.8)
    daily = 1 + swing * np.cos(2 * np.pi * (local_hour - peak_hour) / 24)
    daily += 0.25 * swing * np.cos(4 * np.pi * (local_hour - peak_hour) / 24)
    weekend = rng.uniform(0.55, 0.95)
    weekly = np.where(local_dow >= 5, weekend, 1.0)
    trend = 1 + rng.uniform(-0.15, 0.35) * t / n
    noise = rng.lognormal(0.0, rng.uniform(0.03, 0.15), n)
    requests = level * daily * weekly * trend * noise
    for start in rng.choice(n, size=rng.integers(0, 4), replace=False):
        width = int(rng.integers(1, 4))
        requests[start : start + width] *= rng.uniform(1.5, 3.5)  # launch, retry storm, batch
    tokens_per_request = rng.uniform(300, 3000)
    prompt_share = rng.uniform(0.6, 0.9)
    total = requests * tokens_per_request * rng.lognormal(0.0, 0.08, n)
    requests = np.round(requests)
    prompt = np.round(total * prompt_share)
    completion = np.round(total) - prompt
    peak_rps = np.ceil(requests / 3600 * rng.uniform(1.5, 3.0, n))
    keep = np.ones(n, dtype=bool)
    if rng.random() < 0.5:  # an outage: the exporter recorded nothing for a few hours
        start = int(rng.integers(24, n - 48))
        keep[start : start + int(rng.integers(2, 10))] = False
    return {
        "hour": hours[keep],
        "requests": requests[keep],
        "prompt_tokens": prompt[keep],
        "completion_tokens": completion[keep],
        "total_tokens": prompt[keep] + completion[keep],
        "peak_rps": peak_rps[keep],
    }


def synthetic_fleet(count: int, *, days: int, seed: int, extra_hours: int = 0) -> pd.DataFrame:
    """A canonical hourly frame with ``count`` series of ``days`` days ending yesterday 23:00,
    and ``extra_hours`` more hours after that (bench/refresh_speed.py holds them back to append
    hour by hour; 0 here, so the series are the ones this benchmark has always generated)."""
    rng = np.random.default_rng(seed)
    end = pd.Timestamp("2026-11-30T23:00", tz="UTC") + pd.Timedelta(hours=extra_hours)
    hours = pd.date_range(end=end, periods=days * 24 + extra_hours, freq="h", name="hour")
    frames = []
    for i in range(count):
        region = REGIONS[i % len(REGIONS)]
        name = f"{region}/{MODELS[(i // len(REGIONS)) % len(MODELS)]}-{i:03d}"
        frames.append(pd.DataFrame(synthetic_series(rng, hours, region)).assign(series=name))
    frame = pd.concat(frames, ignore_index=True)
    return frame[["series", "hour", "requests", "prompt_tokens", "completion_tokens",
                  "total_tokens", "peak_rps"]]  # fmt: skip


@dataclass
class Outcome:
    name: str
    workers: int
    report: JobReport
    stored: int
    problems: list[str]


def load(database: Database, frame: pd.DataFrame) -> None:
    with database.transaction() as session:
        ingest.store(session, frame, create_series=True)


def clear_forecasts(database: Database) -> None:
    with database.transaction() as session:
        session.execute(delete(ForecastPoint))
        session.execute(delete(ForecastRun))


def stored_complete_runs(database: Database) -> int:
    with database.transaction() as session:
        return session.scalar(
            select(func.count()).select_from(ForecastRun).where(ForecastRun.status == "complete")
        )


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_config(
    database: Database, name: str, options: ForecastOptions, *, expected: int, workers: int
) -> Outcome:
    clear_forecasts(database)
    print(f"[{datetime.now(UTC):%H:%M:%S}Z] {name}: running, load {loadavg()}", flush=True)
    report = run_forecasts(database, options)
    stored = stored_complete_runs(database)
    problems = [f"{r.series} {r.metric}: {r.error}" for r in report.failed]
    problems += [f"skipped {note}" for note in report.skipped]
    if len(report.results) != expected:
        problems.append(f"{len(report.results)} results, expected {expected}")
    if stored != expected:
        problems.append(f"{stored} complete runs stored, expected {expected}")
    print(
        f"[{datetime.now(UTC):%H:%M:%S}Z] {name}: {report.wall_s:.1f}s, "
        f"{len(report.failed)} failed, {stored} stored, load {loadavg()}",
        flush=True,
    )
    return Outcome(name, workers, report, stored, problems)


def warm_up(database: Database, metrics: tuple[str, ...]) -> None:
    """Import and JIT-compile the model stack in the parent, outside every timing."""
    items, _ = build_items(database, ForecastOptions(metrics=metrics[:1], workers=1))
    run_item(items[0])


def print_table(outcomes: list[Outcome]) -> None:
    base = outcomes[0].report.wall_s
    print()
    print("| configuration | workers | wall time | forecasts/s | speed-up vs 1 worker | failed |")
    print("|---|---:|---:|---:|---:|---:|")
    for o in outcomes:
        n = len(o.report.results)
        print(
            f"| {o.name} | {o.workers} | {o.report.wall_s:.1f} s | {n / o.report.wall_s:.2f} "
            f"| {base / o.report.wall_s:.2f}x | {len(o.problems)} |"
        )
    for o in outcomes:
        for problem in o.problems:
            print(f"  {o.name}: {problem}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200, help="number of series (200)")
    parser.add_argument("--days", type=int, default=30, help="days of hourly history (30)")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument(
        "--metrics", choices=("both", "requests"), default="both", help="metrics to forecast"
    )
    parser.add_argument("--database-url", help="an empty database (default: temp SQLite file)")
    parser.add_argument("--skip", action="append", default=[], choices=("one", "pool", "dask"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    warnings.simplefilter("ignore")
    metrics = ("requests", "tokens") if args.metrics == "both" else ("requests",)
    cores = os.cpu_count() or 1
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M}Z, {cores} cores, load average at start {loadavg()}")
    with tempfile.TemporaryDirectory(prefix="gpucast-bench-") as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'nightly.db'}"
        database = open_database(url)
        database.ensure_schema(auto_migrate=True)
        started = time.perf_counter()
        frame = synthetic_fleet(args.series, days=args.days, seed=args.seed)
        load(database, frame)
        gaps = args.series * args.days * 24 - len(frame)
        took = time.perf_counter() - started
        print(
            f"loaded {args.series} series x {args.days * 24} h ({len(frame)} rows, {gaps} hours "
            f"missing in outage gaps) on {database.engine.dialect.name} in {took:.1f}s"
        )
        expected = args.series * len(metrics)
        warm_up(database, metrics)
        outcomes = []
        if "one" not in args.skip:
            options = ForecastOptions(metrics=metrics, workers=1)
            outcomes.append(run_config(database, "1 worker", options, expected=expected, workers=1))
        if "pool" not in args.skip:
            options = ForecastOptions(metrics=metrics, workers=cores)
            name = f"process pool, {cores} workers"
            outcomes.append(run_config(database, name, options, expected=expected, workers=cores))
        if "dask" not in args.skip:
            outcomes.append(run_dask(database, metrics, expected=expected))
        database.dispose()
    print_table(outcomes)
    print(f"load average at end {loadavg()}")
    return 1 if any(o.problems for o in outcomes) else 0


def run_dask(database: Database, metrics: tuple[str, ...], *, expected: int) -> Outcome:
    from distributed import LocalCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)  # its import sets INFO
    started = time.perf_counter()
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        print(f"Dask LocalCluster started in {time.perf_counter() - started:.1f}s", flush=True)
        options = ForecastOptions(metrics=metrics, scheduler=cluster)
        return run_config(database, "Dask LocalCluster, 2 workers", options,
                          expected=expected, workers=2)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
