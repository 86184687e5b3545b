"""Forecasting speed: CPU per series of ``auto_forecast`` against Prophet's own backtest.

    python bench/forecast_speed.py [--data-dir DIR] [--series 40] [--smooth 12] [--windows 5]

On 30-day (720 h) hourly series — slices of M4 Hourly, bike sharing, ETT and NYC taxi, and
``--smooth`` synthetic series with smooth daily and weekly cycles (where Prophet survives the
race) — one process times, per series: ``auto_forecast`` with every candidate and the default
backtest; Prophet's ``diagnostics.cross_validation`` (default Prophet, fitted once plus once
per cutoff, the same cutoffs as our backtest, 24 h ahead); and statsforecast
``AutoARIMA(season_length=24)`` cross-validation over the same cutoffs if statsforecast is
installed. CPU time includes child
processes (Prophet's cmdstan optimiser runs as one). Imports are warmed up before timing.
Reported per series type (M4, real, smooth; smooth also where Prophet survived the race):
median and p90 CPU of ``auto_forecast`` and the Prophet fits it made.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads: one BLAS thread, as in a worker process

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import logging  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import forecast_data  # noqa: E402
import pandas as pd  # noqa: E402

from forecasting import auto_forecast  # noqa: E402
from forecasting.backtest import cutoff_positions  # noqa: E402
from forecasting.selection import DEFAULT_WINDOWS  # noqa: E402

HOURS = 720
HORIZON = 24


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn) -> tuple[float, float, object]:
    cpu, wall = cpu_seconds(), time.perf_counter()
    out = fn()
    return cpu_seconds() - cpu, time.perf_counter() - wall, out


def series_set(data_dir: Path, count: int, smooth: int) -> list[tuple[str, pd.Series]]:
    m4 = [(sid, tr) for sid, tr, _ in forecast_data.m4_hourly(data_dir) if len(tr) >= HOURS]
    picked = [
        (f"m4_{sid}", forecast_data.synthetic_hourly(tr[-HOURS:]))
        for sid, tr in m4[:: max(1, len(m4) // max(1, count - 9))]
    ][: count - 9]
    real = forecast_data.real_series(data_dir)
    for name in ("bike_sharing_cnt", "ett_h1_ot", "nyc_taxi"):
        series, found = real[name], 0
        for k in range(12):
            end = len(series) - k * 24 * 45
            window = series.iloc[end - HOURS : end]
            if found < 3 and (window >= 0).all():  # ETT oil temperature dips below zero
                picked.append((f"{name}_{k}", window))
                found += 1
    smooth_series = forecast_data.smooth_daily_weekly(smooth, HOURS)
    picked += [(f"smooth_{i}", y) for i, y in enumerate(smooth_series)]
    return picked


def series_type(name: str) -> str:
    return "m4" if name.startswith("m4_") else "smooth" if name.startswith("smooth_") else "real"


class FitCounter:
    """Counts gpucast's Prophet fits (optimisations of its model, in process or by Stan)
    while installed."""

    def __init__(self) -> None:
        from forecasting.models.prophet import ProphetModel

        self.count = 0
        original = ProphetModel._optimise

        def counted(model, *args, **kwargs):
            self.count += 1
            return original(model, *args, **kwargs)

        ProphetModel._optimise = counted  # type: ignore[method-assign]


def prophet_cv(y: pd.Series, cutoffs: list[pd.Timestamp]) -> None:
    from prophet import Prophet
    from prophet.diagnostics import cross_validation

    df = pd.DataFrame({"ds": y.index.tz_localize(None), "y": y.to_numpy()})
    model = Prophet().fit(df)
    cross_validation(model, horizon=f"{HORIZON} hours", cutoffs=cutoffs, disable_tqdm=True)


def statsforecast_cv(y: pd.Series, windows: int) -> None:
    from statsforecast import StatsForecast
    from statsforecast.models import AutoARIMA

    df = pd.DataFrame({"unique_id": "s", "ds": y.index.tz_localize(None), "y": y.to_numpy()})
    sf = StatsForecast(models=[AutoARIMA(season_length=24)], freq="h", n_jobs=1)
    sf.cross_validation(df=df, h=HORIZON, step_size=24, n_windows=windows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=forecast_data.DEFAULT_DATA_DIR)
    parser.add_argument("--series", type=int, default=40)
    parser.add_argument("--smooth", type=int, default=12)
    parser.add_argument("--windows", type=int, default=DEFAULT_WINDOWS)
    parser.add_argument("--no-prophet-cv", action="store_true", help="skip Prophet's own CV")
    args = parser.parse_args()
    for name in ("prophet", "cmdstanpy"):
        logging.getLogger(name).disabled = True  # a bench script may configure logging
    warnings.simplefilter("ignore")
    series = series_set(args.data_dir, args.series, args.smooth)
    has_sf = importlib.util.find_spec("statsforecast") is not None
    # warm-up: imports and compiled code out of the timings
    auto_forecast(series[0][1], HORIZON, windows=args.windows)
    fits = FitCounter()
    rows = []
    for name, y in series:
        ends = cutoff_positions(len(y), HORIZON, args.windows, 24)
        cutoffs = [y.index[e - 1].tz_localize(None) for e in ends]
        row = {"series": name, "type": series_type(name)}
        before = fits.count
        row["auto_cpu"], row["auto_wall"], result = timed(
            lambda y=y: auto_forecast(y, HORIZON, windows=args.windows)
        )
        row["prophet_fits"] = fits.count - before
        row["chosen"] = result.model
        status = result.scores.set_index("model")["status"]
        row["prophet_ok"] = status.get("prophet") == "ok"
        for _, r in result.scores.iterrows():
            row[f"cpu_{r.model}"] = r.cpu_seconds
        if not args.no_prophet_cv:
            row["prophet_cv_cpu"], row["prophet_cv_wall"], _ = timed(
                lambda y=y, c=cutoffs: prophet_cv(y, c)
            )
        if has_sf:
            row["sf_cpu"], row["sf_wall"], _ = timed(lambda y=y: statsforecast_cv(y, args.windows))
        rows.append(row)
    report(pd.DataFrame(rows), args, has_sf)


def report(frame: pd.DataFrame, args: argparse.Namespace, has_sf: bool) -> None:
    print(
        f"{len(frame)} series of {HOURS} h, horizon {HORIZON}, {args.windows} backtest "
        "windows, one process, CPU incl. child processes"
    )
    print("| what | median CPU s | p90 CPU s | median wall s |")
    print("|---|---|---|---|")
    cols = [("auto_forecast (all candidates + refit)", "auto")]
    if not args.no_prophet_cv:
        cols.append(("Prophet diagnostics.cross_validation", "prophet_cv"))
    if has_sf:
        cols.append(("statsforecast AutoARIMA(24) cross_validation", "sf"))
    for label, key in cols:
        cpu = frame[f"{key}_cpu"]
        print(
            f"| {label} | {cpu.median():.2f} | {cpu.quantile(0.9):.2f} | "
            f"{frame[f'{key}_wall'].median():.2f} |"
        )
    per_model = [c for c in frame.columns if c.startswith("cpu_")]
    print(
        "\nmedian in-process CPU s per candidate backtest (Prophet's cmdstan child excluded):",
        ", ".join(f"{c[4:]} {frame[c].median():.3f}" for c in per_model),
    )
    if not args.no_prophet_cv:
        ratio = frame.prophet_cv_cpu / frame.auto_cpu
        print(f"Prophet CV / auto_forecast CPU: median ratio {ratio.median():.2f}")
    if has_sf:
        print(
            f"statsforecast CV / auto_forecast CPU: median ratio "
            f"{(frame.sf_cpu / frame.auto_cpu).median():.2f}"
        )
    else:
        print("statsforecast is not installed: its comparison was skipped")
    print("\nauto_forecast per series type (Prophet fits: optimisations of its model)")
    print("| series type | series | median CPU s | p90 CPU s | Prophet fits (median, max) |")
    print("|---|---|---|---|---|")
    groups = [(kind, frame[frame.type == kind]) for kind in ("m4", "real", "smooth")]
    groups.append(
        ("smooth, Prophet survived the race", frame[(frame.type == "smooth") & frame.prophet_ok])
    )
    groups.append(("all", frame))
    for label, group in groups:
        if group.empty:
            continue
        cpu, n_fits = group.auto_cpu, group.prophet_fits
        print(
            f"| {label} | {len(group)} | {cpu.median():.2f} | {cpu.quantile(0.9):.2f} | "
            f"{n_fits.median():.0f}, {n_fits.max()} |"
        )
    for label, group in (
        ("all series", frame),
        ("smooth series where Prophet survived", groups[3][1]),
    ):
        if group.empty:
            continue
        target = group.auto_cpu.median()
        print(
            f"target median ≤ 0.30 s CPU per series, {label}: "
            f"{'met' if target <= 0.30 else 'missed'} ({target:.2f} s)"
        )


if __name__ == "__main__":
    main()
