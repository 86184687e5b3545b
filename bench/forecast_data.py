"""Loaders for the public data used by the forecasting evaluations (bench only).

The data lives next to the repository (``../shared/data``; see its SOURCES.md) unless
``--data-dir`` says otherwise. Series without calendar dates (M4, ServeGen) get a synthetic
hourly UTC index starting on a Monday, so positions keep their daily and weekly phase.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SYNTHETIC_START = pd.Timestamp("2024-01-01", tz="UTC")  # a Monday


def synthetic_hourly(values: np.ndarray) -> pd.Series:
    index = pd.date_range(SYNTHETIC_START, periods=len(values), freq="h")
    return pd.Series(np.asarray(values, dtype=float), index=index)


def smooth_daily_weekly(count: int, hours: int, seed: int = 20261203) -> list[pd.Series]:
    """``count`` synthetic hourly series with smooth daily and weekly cycles — LLM traffic of
    one region: a cosine day (peak 13–17 h) with its second harmonic, weekends 55–95 % of
    weekdays, a trend of −15 to +35 % over the span and 3–8 % lognormal noise — on which
    Prophet's smooth seasonality competes with the seasonal models."""
    rng = np.random.default_rng(seed)
    index = pd.date_range(SYNTHETIC_START, periods=hours, freq="h")
    hour = index.hour.to_numpy()
    weekend = index.dayofweek.to_numpy() >= 5
    out = []
    for _ in range(count):
        peak, swing = rng.uniform(13, 17), rng.uniform(0.3, 0.8)
        daily = 1 + swing * np.cos(2 * np.pi * (hour - peak) / 24)
        daily += 0.25 * swing * np.cos(4 * np.pi * (hour - peak) / 24)
        weekly = np.where(weekend, rng.uniform(0.55, 0.95), 1.0)
        trend = 1 + rng.uniform(-0.15, 0.35) * np.arange(hours) / hours
        noise = rng.lognormal(0.0, rng.uniform(0.03, 0.08), hours)
        level = float(np.exp(rng.uniform(np.log(300), np.log(300_000))))
        out.append(pd.Series(level * daily * weekly * trend * noise, index=index))
    return out


def m4_hourly(data_dir: Path) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(id, train, test)`` for the 414 M4 Hourly series (train 700–960 h, test 48 h)."""
    train = pd.read_csv(data_dir / "m4_hourly_train.csv", index_col=0)
    test = pd.read_csv(data_dir / "m4_hourly_test.csv", index_col=0)
    out = []
    for sid in train.index:
        tr = train.loc[sid].dropna().to_numpy(dtype=float)
        te = test.loc[sid].dropna().to_numpy(dtype=float)
        out.append((str(sid), tr, te))
    return out


def m4_official(data_dir: Path) -> pd.DataFrame:
    return pd.read_csv(data_dir / "m4_hourly_official_results.csv")


def _resampled(path: Path, per_hour: int) -> pd.Series:
    """Hourly sums of a sub-hourly count series; an hour missing some samples is scaled up
    from its mean (at least half of its ``per_hour`` samples needed, else it stays missing)."""
    frame = pd.read_csv(path, parse_dates=["timestamp"])
    series = frame.set_index("timestamp")["value"].astype(float)
    series.index = series.index.tz_localize("UTC")
    grouped = series.resample("h")
    hourly = grouped.mean() * per_hour
    return hourly[grouped.count() >= per_hour / 2]


def servegen_10min_hourly(data_dir: Path, name: str) -> dict[str, pd.Series] | None:
    """Requests and tokens per hour from a ServeGen 10-minute trace (six windows summed per
    hour; hours with a missing window dropped), or None when the file is absent."""
    path = data_dir / "servegen" / f"servegen_{name}_10min.csv"
    if not path.exists():
        return None
    frame = pd.read_csv(path)
    hour = frame["window_start_s"].to_numpy() // 3600
    tokens = frame["est_input_tokens_covered"] + frame["est_output_tokens_covered"]
    grouped = pd.DataFrame(
        {"hour": hour, "requests": frame["requests_in_window"], "tokens": tokens}
    ).groupby("hour")
    complete = grouped.size() == 6
    sums = grouped.sum()[complete]
    index = SYNTHETIC_START + pd.to_timedelta(sums.index, unit="h")
    return {
        "requests": pd.Series(sums["requests"].to_numpy(dtype=float), index=index),
        "tokens": pd.Series(sums["tokens"].to_numpy(dtype=float), index=index),
    }


def real_series(data_dir: Path) -> dict[str, pd.Series]:
    """The real hourly series of the 24 h-ahead evaluation (gaps left as absent hours)."""
    bike = pd.read_csv(data_dir / "bike_sharing_dc_hourly.csv")
    bike_index = pd.to_datetime(bike["dteday"]) + pd.to_timedelta(bike["hr"], unit="h")
    ett = pd.read_csv(data_dir / "ett_h1.csv", parse_dates=["date"])
    m_small = servegen_10min_hourly(data_dir, "language_m-small")
    series = {
        "servegen_requests": m_small["requests"],
        "servegen_tokens": m_small["tokens"],
        "aws_elb_requests": _resampled(
            data_dir / "nab" / "nab_aws_elb_request_count_5min.csv", per_hour=12
        ),
        "bike_sharing_cnt": pd.Series(
            bike["cnt"].to_numpy(dtype=float), index=bike_index.dt.tz_localize("UTC")
        ),
        "ett_h1_ot": pd.Series(
            ett["OT"].to_numpy(dtype=float), index=ett["date"].dt.tz_localize("UTC")
        ),
        "nyc_taxi": _resampled(data_dir / "nab" / "nab_nyc_taxi_30min.csv", per_hour=2),
    }
    for trace in SERVEGEN_10MIN[1:]:
        hourly = servegen_10min_hourly(data_dir, trace)
        if hourly is None:
            continue
        short = trace.split("_", 1)[1]
        for metric, values in hourly.items():
            series[f"servegen_{short}_10min_{metric}"] = values
    return {name: s.dropna() for name, s in series.items()}


#: ServeGen 10-minute traces, aggregated to hours (m-small is ``servegen_requests`` and
#: ``servegen_tokens``; the evaluation keeps the others when they are long enough).
SERVEGEN_10MIN = ("language_m-small", "reason_deepseek-r1", "multimodal_mm-image")
