"""Per-series band coverage on M4 Hourly under other conformal factor rules (auto_forecast).

    python bench/calibration_variants.py [--data-dir DIR] [--workers 2] [--rules a,b]

``auto_forecast`` sizes its bands with one factor per level from its nested backtest errors
(:func:`forecasting.intervals.conformal_factors`: the conformal quantile of all points'
error ÷ half-width ratios; the 95 % one also on older folds and at least the 80 % one —
**current**). The other rules replace it whole (their own evidence, no floor, no older folds
for the 95 % level). The points of one backtest fold share its errors, so this script
also runs two rules that treat a fold as the unit: **cluster** (each fold's level-quantile of
the ratios, then the conformal quantile over the folds — finite-sample rank ceil((K+1)·level)/K)
and **fold mean** (the mean of the folds' level-quantiles); and two that give the factor more
or fresher evidence: **recency** (non-exchangeable split conformal, Barber et al. 2023: each
fold's points weighted ``RECENCY_RHO`` ** its age in folds, the newest fold's weight kept for
the test point) and **more folds** (the nested errors plus ARIMA's errors on the
``OLDER_FOLDS`` daily folds before the selection's, which did not drive the selection; each
fold cleaned from its own past). The series are split in two
halves (even and odd positions) so a rule can be judged on the half it was not looked at on.
Reported per rule and half: pooled coverage, the share of series within ±5 points of nominal,
and the series covered at or below 50 % and at 100 %. Point forecasts are the same in every
rule; only the bands change.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads: one BLAS thread per worker process

import argparse  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import forecast_data  # noqa: E402
import m4_hourly  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import forecasting.auto  # noqa: E402
from forecasting import MODELS, intervals  # noqa: E402
from forecasting._series import LEVELS, as_hourly, regular  # noqa: E402
from forecasting.backtest import backtest, cutoff_positions, fold_histories  # noqa: E402

RULES = ("current", "cluster", "fold_mean", "recency", "more_folds")
#: Weight of a fold one day older than the next (fixed before any run: a half-life of two folds).
RECENCY_RHO = 0.7
OLDER_FOLDS = 10


def fold_factors(backtest: pd.DataFrame, rule: str) -> dict[int, float] | None:
    """Factors from each fold's level-quantile of the error ÷ half-width ratios."""
    frame = intervals.scored_points(backtest)
    if frame is None:
        return None
    factors = {}
    for level in LEVELS:
        ratio = pd.Series(intervals.band_ratios(frame, level))
        per_fold = ratio.groupby(frame["cutoff"].to_numpy()).quantile(level / 100).to_numpy()
        if rule == "cluster":
            k = len(per_fold)
            rank = min(1.0, np.ceil((k + 1) * level / 100) / k)
            factor = float(np.quantile(per_fold, rank, method="higher"))
        else:
            factor = float(np.mean(per_fold))
        factors[level] = float(np.clip(factor, intervals.FACTOR_FLOOR, intervals.FACTOR_CAP))
    return factors


def recency_factors(backtest: pd.DataFrame, rho: float = RECENCY_RHO) -> dict[int, float] | None:
    """Weighted conformal quantile of the ratios, each fold weighted ``rho`` ** its age."""
    frame = intervals.scored_points(backtest)
    if frame is None:
        return None
    cutoffs = frame["cutoff"].to_numpy()
    order = np.sort(np.unique(cutoffs))
    weight = rho ** (len(order) - 1 - np.searchsorted(order, cutoffs))
    factors = {}
    for level in LEVELS:
        ratio = intervals.band_ratios(frame, level)
        sort = np.argsort(ratio)
        share = np.cumsum(weight[sort]) / (weight.sum() + weight.max())
        at = int(np.searchsorted(share, level / 100))
        factor = ratio[sort][at] if at < len(ratio) else intervals.FACTOR_CAP
        factors[level] = float(np.clip(factor, intervals.FACTOR_FLOOR, intervals.FACTOR_CAP))
    return factors


def older_arima_folds(train: np.ndarray, windows: int) -> pd.DataFrame:
    """ARIMA's backtest on the ``OLDER_FOLDS`` folds before the selection's ``windows``."""
    y = regular(as_hourly(forecast_data.synthetic_hourly(train)))
    ends = cutoff_positions(len(y), m4_hourly.HORIZON, windows + OLDER_FOLDS, 24)[:OLDER_FOLDS]
    histories = fold_histories(y, ends)
    return backtest(MODELS["arima"], y, m4_hourly.HORIZON, ends=ends, histories=histories)


def evaluate(item: tuple[str, tuple]) -> list[dict]:
    rule, series_item = item
    if rule == "current":
        forecasting.auto.conformal_factors = intervals.conformal_factors
    elif rule == "recency":
        forecasting.auto.conformal_factors = lambda nested, **_: recency_factors(nested)
    elif rule == "more_folds":
        older = older_arima_folds(series_item[1], series_item[3])
        forecasting.auto.conformal_factors = lambda nested, **_: intervals.conformal_factors(
            pd.concat([nested, older[nested.columns.intersection(older.columns)]])
        )
    else:
        forecasting.auto.conformal_factors = lambda nested, **_: fold_factors(nested, rule)
    rows = m4_hourly.evaluate(series_item)
    return [{**row, "rule": rule} for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=forecast_data.DEFAULT_DATA_DIR)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rules", default=",".join(RULES), help="comma-separated subset")
    args = parser.parse_args()
    rules = [rule.strip() for rule in args.rules.split(",") if rule.strip()]
    unknown = sorted(set(rules) - set(RULES))
    if unknown or not rules:
        parser.error(f"--rules: choose from {', '.join(RULES)} (got {args.rules!r})")
    series = forecast_data.m4_hourly(args.data_dir)
    items = [
        (rule, (sid, train, test, m4_hourly.DEFAULT_WINDOWS, ()))
        for rule in rules
        for sid, train, test in series
    ]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = [row for chunk in pool.map(evaluate, items, chunksize=2) for row in chunk]
    frame = pd.DataFrame(rows)
    frame = frame[frame.method == "auto_forecast"]
    position = {sid: i for i, (sid, _, _) in enumerate(series)}
    frame["half"] = np.where(frame["id"].map(position) % 2 == 0, "even", "odd")
    print(f"M4 Hourly, {len(series)} series, auto_forecast bands under {len(rules)} factor rules")
    print("| rule | half | level | pooled coverage | series within ±5 points | ≤ 50 % | 100 % |")
    print("|---|---|---|---|---|---|---|")
    for (rule, half), group in frame.groupby(["rule", "half"], sort=False):
        for level in LEVELS:
            cov = group[f"coverage_{level}"]
            near = ((cov - level / 100).abs() <= 0.05 + 1e-12).mean()
            print(
                f"| {rule} | {half} | {level} % | {cov.mean():.1%} | {near:.1%} | "
                f"{int((cov <= 0.5).sum())} | {int((cov >= 1).sum())} |"
            )


if __name__ == "__main__":
    main()
