"""What a replay is asked and reads: its options, the series' values (history, events,
profile, SLO), the nightly decision times, and the history before a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from app.common.options import FALLBACK_BEHAVIOR, FALLBACK_BEHAVIORS
from app.errors import InputError
from app.forecasts.work import METRIC_COLUMNS
from app.plans.sizing import (
    ProfileFigures,
)
from app.plans.slo_sizing import SloSizing

HOUR = pd.Timedelta(hours=1)
DAY = pd.Timedelta(days=1)
STATIC_PEAK_DAYS = 7
MIN_HISTORY = pd.Timedelta(days=2)  # before the first decision
#: Risk targets of the trade-off table (share of time over capacity).
TRADEOFF_TARGETS = (0.001, 0.005, 0.01, 0.02, 0.05)
POLICY_ORDER = (
    "gpucast",
    "static-peak",
    "reactive-hpa",
    "reactive-at-equal-risk",
    "seasonal-mean",
    "hourly-perfect-foresight",
    "instant-bound",
)
#: The reactive HPA's utilization targets replayed as its cost/risk frontier: 0.30 … 0.99 in
#: steps of 0.01, fine enough to read the HPA at gpucast's own risk between two of them.
HPA_TARGETS = tuple(round(0.30 + 0.01 * k, 2) for k in range(70))
EQUAL_RISK = "reactive-at-equal-risk"


@dataclass(frozen=True)
class ReplayOptions:
    days: int = 7
    nightly_hour_utc: int = 2
    models: tuple[str, ...] | None = None
    windows: int | None = None
    tradeoff: bool = False  # also replay gpucast at each of TRADEOFF_TARGETS (band auto)
    # the fallback.behavior the replayed ScaledObject runs (app.common.options)
    fallback_behavior: str = FALLBACK_BEHAVIOR

    def validate(self) -> None:
        if not 1 <= self.days <= 90:
            raise InputError(f"days must be 1..90, got {self.days}")
        if not 0 <= self.nightly_hour_utc <= 23:
            raise InputError(f"nightly_hour_utc must be 0..23, got {self.nightly_hour_utc}")
        if self.fallback_behavior not in FALLBACK_BEHAVIORS:
            raise InputError(
                f"fallback_behavior must be one of {', '.join(FALLBACK_BEHAVIORS)}, "
                f"got {self.fallback_behavior!r}"
            )


def candidate_models(text: str | None) -> tuple[str, ...] | None:
    """Comma-separated model names, checked against the registry (None: every candidate)."""
    if text is None:
        return None
    from forecasting import MODELS

    names = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in names if m not in MODELS]
    if unknown or not names:
        raise InputError(
            f"unknown model {unknown[0] if unknown else text!r}; choose from "
            f"{', '.join(sorted(MODELS))}"
        )
    return names


@dataclass(frozen=True)
class SeriesInputs:
    """What a replay reads from the database, as values."""

    series: str
    history: pd.DataFrame  # observations_frame columns
    events: tuple[dict[str, Any], ...]
    profile: ProfileFigures
    slo: SloSizing | None = None  # a load-test profile with an SLO: the replay scores it


def decision_times(start: pd.Timestamp, end: pd.Timestamp, nightly_hour: int) -> list:
    first = start.floor("D") + pd.Timedelta(hours=nightly_hour)
    if first > start:
        first -= DAY
    times = []
    moment = first
    while moment < end:
        times.append(moment)
        moment += DAY
    return times


def history_before(history: pd.DataFrame, moment: pd.Timestamp) -> pd.DataFrame:
    return history[history["hour"] < moment]


def metric_history(history: pd.DataFrame, metric: str) -> pd.Series:
    column = history[METRIC_COLUMNS[metric]]
    present = column.notna().to_numpy()
    return pd.Series(
        column.to_numpy(dtype="float64")[present],
        index=pd.DatetimeIndex(history["hour"].to_numpy()[present], tz=None).tz_localize("UTC")
        if history["hour"].dt.tz is None
        else pd.DatetimeIndex(history["hour"])[present],
    )
