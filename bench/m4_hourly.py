"""M4 Hourly: every forecasting candidate alone and ``auto_forecast``, horizon 48.

    python bench/m4_hourly.py [--data-dir DIR] [--workers 2] [--limit N] [--windows 5]

Each model is fitted on a series' training part (700–960 h) and scored on its 48 test hours:
sMAPE (%) and MASE (seasonal naive m = 24 scale, in-sample), averaged over series as in M4;
OWA relative to the official Naive2 row. ``auto_forecast`` picks per series by its own rolling
backtest on the training part only. Runs on a process pool with one BLAS thread per worker.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads: one BLAS thread per worker process

import argparse  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import forecast_data  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from forecasting import MODELS, auto_forecast, coverage, mase, smape  # noqa: E402
from forecasting.selection import DEFAULT_WINDOWS  # noqa: E402

HORIZON = 48
SINGLE = (
    "profile_level",
    "seasonal_naive",
    "seasonal_ma",
    "seasonal_ma_weekly",
    "arima",
    "prophet",
)
NAIVE2 = {"smape": 18.383, "mase": 2.395}  # official M4 Hourly Naive2 row


def _score(name: str, train: np.ndarray, test: np.ndarray, frame: pd.DataFrame, cpu: float):
    return {
        "method": name,
        "smape": smape(test, frame.yhat),
        "mase": mase(test, frame.yhat, y_insample=train, season=24),
        "coverage_80": coverage(test, frame.lo_80, frame.hi_80),
        "coverage_95": coverage(test, frame.lo_95, frame.hi_95),
        "cpu_s": cpu,
    }


def evaluate(item: tuple[str, np.ndarray, np.ndarray, int, tuple[str, ...]]) -> list[dict]:
    sid, train, test, windows, singles = item
    y = forecast_data.synthetic_hourly(train)
    rows = []
    for name in singles:
        started = time.process_time()
        try:
            frame = MODELS[name]().fit(y).predict(HORIZON)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports, never stops
            rows.append({"id": sid, "method": name, "error": str(exc)})
            continue
        rows.append({"id": sid, **_score(name, train, test, frame, time.process_time() - started)})
    started = time.process_time()
    result = auto_forecast(y, HORIZON, windows=windows)
    row = _score("auto_forecast", train, test, result.forecast, time.process_time() - started)
    rows.append({"id": sid, **row, "chosen": result.model})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=forecast_data.DEFAULT_DATA_DIR)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="every k-th series for N")
    parser.add_argument("--windows", type=int, default=DEFAULT_WINDOWS)
    parser.add_argument("--models", default=",".join(SINGLE))
    parser.add_argument("--out", type=Path, default=None, help="per-series CSV")
    args = parser.parse_args()

    series = forecast_data.m4_hourly(args.data_dir)
    if args.limit:
        series = series[:: max(1, len(series) // args.limit)][: args.limit]
    singles = tuple(m for m in args.models.split(",") if m)
    items = [(sid, tr, te, args.windows, singles) for sid, tr, te in series]
    wall = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = [row for chunk in pool.map(evaluate, items, chunksize=2) for row in chunk]
    wall = time.perf_counter() - wall
    frame = pd.DataFrame(rows)
    if args.out:
        frame.to_csv(args.out, index=False)
    report(frame, args, len(series), wall)


def report(frame: pd.DataFrame, args: argparse.Namespace, n: int, wall: float) -> None:
    failed = frame[frame.get("error").notna()] if "error" in frame else frame.iloc[:0]
    ok = frame.drop(failed.index)
    table = ok.groupby("method", sort=False).agg(
        sMAPE=("smape", "mean"),
        MASE=("mase", "mean"),
        cov80=("coverage_80", "mean"),
        cov95=("coverage_95", "mean"),
        cpu_s_median=("cpu_s", "median"),
        series=("id", "count"),
    )
    table["OWA"] = 0.5 * (table.sMAPE / NAIVE2["smape"] + table.MASE / NAIVE2["mase"])
    print(
        f"M4 Hourly, {n} series, horizon {HORIZON}, auto_forecast windows={args.windows}, "
        f"{args.workers} workers, wall {wall:.0f} s"
    )
    print("| method | sMAPE % | MASE | OWA | 80 % cov | 95 % cov | median CPU s | series |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in table.iterrows():
        print(
            f"| {name} | {r.sMAPE:.3f} | {r.MASE:.3f} | {r.OWA:.3f} | {r.cov80:.1%} | "
            f"{r.cov95:.1%} | {r.cpu_s_median:.2f} | {r.series} |"
        )
    official = forecast_data.m4_official(args.data_dir)
    benchmarks = official.method_id.astype(str).isin(["sNaive", "Naive2", "Theta", "SES"])
    leaders = official.team.str.contains("Doornik|Smyl|Montero|Pawlikowski", regex=True)
    for _, r in official[benchmarks | leaders].iterrows():
        label = (
            r.method_id if r.team == "The M4 Team" else f"{r.team.split(',')[0]} ({r.method_id})"
        )
        print(
            f"| official: {label} | {r.hourly_sMAPE:.3f} | {r.hourly_MASE:.3f} | "
            f"{r.hourly_OWA:.3f} | | | | 414 |"
        )
    report_series_coverage(ok[ok.method == "auto_forecast"])
    if "chosen" in ok:
        counts = Counter(ok.chosen.dropna())
        print("auto_forecast choices:", ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    if len(failed):
        print(f"{len(failed)} single-model fits failed:", failed.groupby("method").size().to_dict())


COVERAGE_TOLERANCE = 0.05


def within_tolerance_share(level: int, hours: int = HORIZON) -> float:
    """The chance that a forecaster whose bands are exactly calibrated, with independent
    hours, covers a share of ``hours`` within ``COVERAGE_TOLERANCE`` of ``level``: the
    binomial probability of the covered counts in that range."""
    from scipy.stats import binom

    counts = np.arange(hours + 1)
    near = np.abs(counts / hours - level / 100) <= COVERAGE_TOLERANCE + 1e-12
    return float(binom.pmf(counts[near], hours, level / 100).sum())


def report_series_coverage(auto: pd.DataFrame) -> None:
    """Per series (48 test hours each): how many series' coverage is within ±5 points of
    nominal, against how many an exactly calibrated forecaster would be expected to have."""
    print(f"\nauto_forecast per-series coverage within ±{COVERAGE_TOLERANCE:.0%} of nominal:")
    print("| level | series within | share | expected if exactly calibrated (independent hours) |")
    print("|---|---|---|---|")
    for level in (80, 95):
        near = (auto[f"coverage_{level}"] - level / 100).abs() <= COVERAGE_TOLERANCE + 1e-12
        print(
            f"| {level} % | {int(near.sum())} of {len(auto)} | {near.mean():.1%} | "
            f"{within_tolerance_share(level):.1%} |"
        )


if __name__ == "__main__":
    main()
