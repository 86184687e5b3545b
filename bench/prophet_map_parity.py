"""Prophet's posterior mode in process against cmdstan's optimiser, fit by fit.

    python bench/prophet_map_parity.py [--data-dir DIR] [--m4 60] [--smooth 12] [--real]

For every series (``--m4`` M4 Hourly series, evenly spaced over the 414, their last 720 h;
``--smooth`` synthetic series with smooth daily and weekly cycles; with ``--real`` the real
hourly series of ``bench/real_traffic.py``, their last 720 h, gaps interpolated) and two
histories each (all of it, and 96 h less; at least Prophet's 48 h), Prophet's model as
gpucast configures it is fitted three ways on the same Stan data from the same initial
values: in process (:mod:`forecasting.models._prophet_map`),
by cmdstan's L-BFGS with the looser tolerances gpucast used (``_prophet_backend``), and by
cmdstan's L-BFGS with its default tolerances. Prints, per fit kind, the negative log posterior
of each estimate relative to cmdstan-default (lower is better), the gap of the in-sample fit
``yhat`` to cmdstan-default's (mean and max, relative to the mean level), and the CPU per
fit (child processes included).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads: one BLAS thread, as in a worker process

import argparse  # noqa: E402
import logging  # noqa: E402
import resource  # noqa: E402
from pathlib import Path  # noqa: E402

import forecast_data  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from forecasting.models._prophet_backend import FastCmdStanBackend  # noqa: E402
from forecasting.models._prophet_design import nanoseconds  # noqa: E402
from forecasting.models._prophet_map import map_estimate  # noqa: E402
from forecasting.models.prophet import ProphetModel, event_columns  # noqa: E402

HOURS = 720


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def objective(data: dict, params: dict) -> float:
    """The negative log posterior Stan's optimiser minimises (constants dropped)."""
    y, t = np.asarray(data["y"]), np.asarray(data["t"])
    x, t_change = np.asarray(data["X"]), np.asarray(data["t_change"])
    k, m = float(params["k"].ravel()[0]), float(params["m"].ravel()[0])
    delta, beta = params["delta"].ravel(), params["beta"].ravel()
    sigma = float(params["sigma_obs"].ravel()[0])
    a = (t[:, None] >= t_change[None, :]).astype(float)
    trend = (k + a @ delta) * t + (m + a @ (-t_change * delta))
    mu = trend * (1 + x @ (beta * np.asarray(data["s_m"])))
    mu = mu + x @ (beta * np.asarray(data["s_a"]))
    return float(
        k**2 / 50
        + m**2 / 50
        + np.abs(delta).sum() / data["tau"]
        + 2 * sigma**2
        + (beta**2 / (2 * np.asarray(data["sigmas"]) ** 2)).sum()
        + len(y) * np.log(sigma)
        + ((y - mu) ** 2).sum() / (2 * sigma**2)
    )


def series_set(args: argparse.Namespace) -> list[tuple[str, pd.Series]]:
    out: list[tuple[str, pd.Series]] = []
    if args.m4:
        m4 = forecast_data.m4_hourly(args.data_dir)
        for sid, train, _ in m4[:: max(1, len(m4) // args.m4)][: args.m4]:
            out.append((f"m4_{sid}", forecast_data.synthetic_hourly(train[-HOURS:])))
    for i, y in enumerate(forecast_data.smooth_daily_weekly(args.smooth, HOURS)):
        out.append((f"smooth_{i}", y))
    if args.real:
        for name, y in forecast_data.real_series(args.data_dir).items():
            y = y.asfreq("h").interpolate(limit_direction="both")
            out.append((name, y.iloc[-HOURS:]))
    return out


def fit_three_ways(y: pd.Series) -> dict[str, float] | None:
    values = y.to_numpy(dtype=float)
    if np.ptp(values) == 0:
        return None
    flags = event_columns(y.index, None)
    design = ProphetModel()._design(values, flags)
    rows = nanoseconds(y.index)
    data, init = design.stan_inputs(rows, values, flags.to_numpy(dtype=float))
    defaults = {} if data["T"] < 100 else {"tol_rel_grad": 1e7, "tol_rel_obj": 1e4}
    estimates, cpu = {}, {}
    for name, fit in (
        ("in_process", lambda: map_estimate(data, init)),
        ("cmdstan_loose", lambda: FastCmdStanBackend().fit(init, data)),
        ("cmdstan_default", lambda: FastCmdStanBackend().fit(init, data, **defaults)),
    ):
        started = cpu_seconds()
        estimates[name] = fit()
        cpu[name] = cpu_seconds() - started
    reference = objective(data, estimates["cmdstan_default"])
    flat = np.zeros((len(rows), 0))
    level = design.yhat(estimates["cmdstan_default"], rows, flat)
    row: dict[str, float] = {"mode": design.mode}
    for name, params in estimates.items():
        row[f"{name}_objective"] = objective(data, params) - reference
        gap = np.abs(design.yhat(params, rows, flat) - level) / np.mean(np.abs(level))
        row[f"{name}_gap_mean"], row[f"{name}_gap_max"] = gap.mean(), gap.max()
        row[f"{name}_cpu"] = cpu[name]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=forecast_data.DEFAULT_DATA_DIR)
    parser.add_argument("--m4", type=int, default=60)
    parser.add_argument("--smooth", type=int, default=12)
    parser.add_argument("--real", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    rows = []
    for name, y in series_set(args):
        for history in (y, y.iloc[:-96]):
            if len(history) < ProphetModel().min_history():
                continue
            row = fit_three_ways(history)
            if row is not None:
                rows.append({"series": name, "kind": name.split("_")[0], **row})
    frame = pd.DataFrame(rows)
    print(f"{len(frame)} fits of {frame['series'].nunique()} series")
    print(
        "\n| fits | estimate | objective − cmdstan default: median | min | max | "
        "yhat gap mean (median) | yhat gap max (max) | CPU per fit, median ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind, group in [("all", frame), *frame.groupby("kind")]:
        for name in ("in_process", "cmdstan_loose", "cmdstan_default"):
            objective_gap = group[f"{name}_objective"]
            print(
                f"| {kind} ({len(group)}) | {name} | {objective_gap.median():+.4f} | "
                f"{objective_gap.min():+.4f} | {objective_gap.max():+.4f} | "
                f"{group[f'{name}_gap_mean'].median():.2e} | "
                f"{group[f'{name}_gap_max'].max():.2e} | "
                f"{1e3 * group[f'{name}_cpu'].median():.1f} |"
            )
    worse = frame[frame["in_process_objective"] > 1e-6]
    print(f"\nfits where the in-process estimate is worse than cmdstan default: {len(worse)}")
    if not worse.empty:
        print(worse[["series", "mode", "in_process_objective"]].to_string(index=False))


if __name__ == "__main__":
    main()
