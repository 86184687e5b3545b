"""Selection rules replayed offline: every candidate's backtest folds and test forecast, once.

    python bench/selection_replay.py [--m4-limit 104] [--workers 2] [--out DIR]

For M4 Hourly (every k-th series, horizon 48) and the real-traffic days of
``bench/real_traffic.py`` (horizon 24), every default candidate is backtested on all five
folds (no racing) with the causal per-fold cleaning ``auto_forecast`` uses, and fitted on the
whole cleaned history for the test forecast. Selection and combination rules are then scored
on the same material: the test error of what each rule would have forecast. Used to choose
the rule in :mod:`forecasting.nested`; the held-out figures are those of
``bench/m4_hourly.py`` and ``bench/real_traffic.py`` on all series.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import pickle  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import forecast_data  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from forecasting import MODELS, clean_history  # noqa: E402
from forecasting import race as race_module  # noqa: E402
from forecasting._series import as_hourly, regular  # noqa: E402
from forecasting.backtest import cutoff_positions, fold_histories  # noqa: E402
from forecasting.metrics import mase_scale  # noqa: E402
from forecasting.selection import DEFAULT_MODELS  # noqa: E402

CANDIDATES = [m for m in DEFAULT_MODELS if m != "ensemble"]


def material(item: tuple[str, pd.Series, np.ndarray, int]) -> dict:
    """Fold scores (MASE), fold frames and test forecasts of every candidate."""
    key, y, actual, horizon = item
    race_module.RACE_MARGIN = float("inf")
    history = clean_history(y)
    raw = regular(as_hourly(y))
    n = len(history.y)
    ends = cutoff_positions(n, horizon, min(5, (n - horizon - 24) // 24 + 1), 24)
    histories = fold_histories(raw, ends)
    entries = race_module.race(
        {m: MODELS[m] for m in CANDIDATES},
        history.y,
        history.observed,
        histories,
        ends,
        horizon=horizon,
        events=None,
        metric="mase",
    )
    out = {"key": key, "actual": actual, "scale": mase_scale(y.to_numpy()), "models": {}}
    for entry in entries:
        if entry.status != "ok":
            continue
        try:
            test = MODELS[entry.name]().fit(history.y).predict(horizon)
        except Exception:  # noqa: BLE001
            continue
        out["models"][entry.name] = {
            "scores": entry.scores.to_numpy(),
            "folds": entry.frame[["cutoff", "y", "yhat", "lo_80", "hi_80", "lo_95", "hi_95"]],
            "test": test[["yhat", "lo_80", "hi_80", "lo_95", "hi_95"]].to_numpy(),
        }
    return out


def items(m4_limit: int) -> list:
    data_dir = forecast_data.DEFAULT_DATA_DIR
    out = []
    m4 = forecast_data.m4_hourly(data_dir)
    step = max(1, len(m4) // m4_limit)
    for sid, train, test in m4[::step][:m4_limit]:
        out.append((f"m4/{sid}", forecast_data.synthetic_hourly(train), test[:48], 48))
    for name, series in forecast_data.real_series(data_dir).items():
        if len(series) < 14 * 24:
            continue
        end = series.index[-1].floor("D") + pd.Timedelta(days=1)
        if series.index[-1] < end - pd.Timedelta(hours=1):
            end -= pd.Timedelta(days=1)
        for k in range(7, 0, -1):
            origin = end - pd.Timedelta(days=k)
            history = series[
                (series.index < origin) & (series.index >= origin - pd.Timedelta(days=56))
            ]
            actual = series.reindex(pd.date_range(origin, periods=24, freq="h")).to_numpy()
            out.append((f"real/{name}/{origin:%m-%d}", history, actual, 24))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m4-limit", type=int, default=104)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("build/selection_replay.pkl"))
    args = parser.parse_args()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(material, items(args.m4_limit)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(pickle.dumps(results))
    print(f"{len(results)} items written to {args.out}")


if __name__ == "__main__":
    main()
