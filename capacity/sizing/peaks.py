"""Peak-to-mean factors: size each hour for its busy minutes, not for its mean.

An hour with a mean of 1,000 req/s and 5-minute bursts of 3,000 needs the GPUs of its bursts.
The factor of one past hour is its peak rate divided by its mean rate; the factor a plan uses
for an hour of the day is a robust quantile of those ratios for that hour of the day over the
last ``days`` days (UTC hours). An hour of the day with fewer than ``min_samples`` ratios
borrows the quantile of all hours. Factors are never below 1 (a peak below the mean is a
measurement artefact) and never above ``max_factor``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from capacity._checks import require_fraction, require_int, require_positive
from capacity.errors import InvalidParameterError

HOURS_PER_DAY = 24
PEAK_SOURCES = ("peak_rps", "load", "none")


@dataclass(frozen=True)
class PeakFactors:
    """One peak-to-mean factor per UTC hour of day (index 0 = 00:00-01:00 UTC).

    source: "peak_rps" (stored busiest-moment rates ÷ hourly means), "load" (a finer load
    series: each hour's maximum sample ÷ its mean) or "none" (no peak information: factor 1).
    samples: past hours whose ratio was used; note: one line saying where the factors came from.
    """

    by_hour: tuple[float, ...]
    source: str
    samples: int
    quantile: float
    days: int
    note: str

    def __post_init__(self) -> None:
        if len(self.by_hour) != HOURS_PER_DAY:
            raise InvalidParameterError(f"by_hour needs {HOURS_PER_DAY} factors")
        if self.source not in PEAK_SOURCES:
            raise InvalidParameterError(f"source must be one of {PEAK_SOURCES}")
        if any(not np.isfinite(f) or f < 1 for f in self.by_hour):
            raise InvalidParameterError("peak factors must be finite and >= 1")

    @classmethod
    def none(
        cls, note: str = "no peak information: peak factor 1 (sized for the mean)"
    ) -> PeakFactors:
        return cls(
            by_hour=(1.0,) * HOURS_PER_DAY,
            source="none",
            samples=0,
            quantile=0.5,
            days=0,
            note=note,
        )

    def for_hours(self, hours: pd.DatetimeIndex | pd.Series) -> np.ndarray:
        """The factor of each hour (by its UTC hour of day), as a float array."""
        index = pd.DatetimeIndex(pd.to_datetime(hours, utc=True))
        return np.asarray(self.by_hour, dtype=float)[index.hour]


def peak_factors(
    hours: pd.DatetimeIndex | pd.Series | np.ndarray,
    mean_per_s: np.ndarray | pd.Series,
    peak_per_s: np.ndarray | pd.Series,
    *,
    quantile: float = 0.5,
    days: int = 28,
    min_samples: int = 3,
    max_factor: float = 10.0,
    source: str = "peak_rps",
) -> PeakFactors:
    """Peak factors from past hours: their mean rate and their peak rate (same unit, per s).

    Hours without a peak (NaN) or without load (mean <= 0) carry no ratio. Only the last
    ``days`` days before the newest hour count. Returns PeakFactors.none() when no hour has
    a ratio.
    """
    q = require_fraction("quantile", quantile)
    window = require_int("days", days, minimum=1)
    needed = require_int("min_samples", min_samples, minimum=1)
    cap = require_positive("max_factor", max_factor)
    if cap < 1:
        raise InvalidParameterError(f"max_factor must be >= 1, got {max_factor!r}")
    index = pd.DatetimeIndex(pd.to_datetime(hours, utc=True))
    mean = np.asarray(mean_per_s, dtype=float)
    peak = np.asarray(peak_per_s, dtype=float)
    if not len(index) == len(mean) == len(peak):
        raise InvalidParameterError("hours, mean_per_s and peak_per_s must have the same length")
    if len(index) == 0:
        return PeakFactors.none()
    recent = index > index.max() - pd.Timedelta(days=window)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = peak / mean
    valid = recent & np.isfinite(ratio) & (mean > 0) & (peak >= 0)
    if not valid.any():
        return PeakFactors.none()
    ratios = np.clip(ratio[valid], 1.0, cap)
    hour_of_day = index.hour.to_numpy()[valid]
    overall = float(np.quantile(ratios, q))
    by_hour = []
    for hour in range(HOURS_PER_DAY):
        own = ratios[hour_of_day == hour]
        by_hour.append(float(np.quantile(own, q)) if len(own) >= needed else overall)
    what = "busiest-moment rate (peak_rps)" if source == "peak_rps" else "busiest load sample"
    note = (
        f"peak factor = {what} ÷ hourly mean, the {q:.0%} quantile per UTC hour of day over "
        f"{int(valid.sum())} hours of the last {window} days"
    )
    return PeakFactors(
        by_hour=tuple(by_hour),
        source=source,
        samples=int(valid.sum()),
        quantile=q,
        days=window,
        note=note,
    )


def peak_factors_from_load(
    load_per_s: pd.Series,
    *,
    quantile: float = 0.5,
    days: int = 28,
    min_samples: int = 3,
    max_factor: float = 10.0,
) -> PeakFactors:
    """Peak factors from a finer load series (rates on a regular DatetimeIndex, step < 1 h):
    each whole hour's maximum sample ÷ its mean sample. Hours with fewer than two samples
    carry no ratio; unobserved samples (NaN) are left out."""
    if not isinstance(load_per_s.index, pd.DatetimeIndex):
        raise InvalidParameterError("load_per_s needs a DatetimeIndex")
    if load_per_s.empty:
        return PeakFactors.none()
    values = pd.Series(load_per_s.to_numpy(dtype=float), index=load_per_s.index.tz_convert("UTC"))
    grouped = values.groupby(values.index.floor("h"))
    stats = pd.DataFrame({"mean": grouped.mean(), "peak": grouped.max(), "n": grouped.count()})
    stats = stats[stats["n"] >= 2]
    return peak_factors(
        stats.index,
        stats["mean"].to_numpy(),
        stats["peak"].to_numpy(),
        quantile=quantile,
        days=days,
        min_samples=min_samples,
        max_factor=max_factor,
        source="load",
    )
