"""``band=auto``: the one margin, calibrated to a stated risk on the series' own recent past.

For each stored quantile (``q50 … q99``) replay the hourly plans gpucast would have served
over the last ``CALIBRATION_DAYS`` days — at every past hour the forecast refreshed from the
data before it, sized by the same formula, peak factors and schedule rules as the live plan —
against the load that followed, and choose the **lowest quantile whose time over capacity is
at most ``max_over_capacity``**; when none meets it, the highest, saying so.

Everything here works on values (forecast arrays, a load series, plan parameters); the
service (:mod:`app.plans.service`) and the plan replay (:mod:`app.plans.replay`) read the
database and call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

import capacity
from app.plans.params import PlanParams
from app.plans.sizing import ProfileFigures

CALIBRATION_DAYS = 14
MIN_CALIBRATION_HOURS = 24
MAX_OVER_CAPACITY = 0.01
AUTO_BANDS = ("q50", "q60", "q70", "q80", "q90", "q95", "q99")
FALLBACK_BAND = "hi_80"
#: The hourly refresh runs a few minutes past the hour (``gpucast schedule --hourly-minute``):
#: a plan built from the hours before ``t`` is served from ``t + REFRESH_LAG``.
REFRESH_LAG = pd.Timedelta(minutes=5)
HOUR = pd.Timedelta(hours=1)


@dataclass(frozen=True)
class FittedState:
    """A nightly fit's refresh state and the moment it became available."""

    available_at: pd.Timestamp
    state: dict[str, Any]


def hourly_forecasts(
    fits: Sequence[FittedState],
    y: pd.Series,
    moments: pd.DatetimeIndex,
    *,
    horizon: int = 24,
) -> dict[str, np.ndarray]:
    """The refreshed forecast in force at every moment (hour start): from the newest fit
    available by then (the earliest fit for moments before any), on the hours of ``y`` before
    the moment. Returns column arrays (n moments x horizon) as forecasting.refresh_many."""
    from forecasting.refresh import refresh_many

    if not fits:
        raise ValueError("hourly_forecasts needs at least one fitted state")
    ordered = sorted(fits, key=lambda f: f.available_at)
    at = np.array([f.available_at.value for f in ordered])
    owner = np.clip(np.searchsorted(at, moments.asi8, side="right") - 1, 0, None)
    out: dict[str, np.ndarray] = {}
    for index in np.unique(owner):
        rows = np.flatnonzero(owner == index)
        part = refresh_many(ordered[index].state, y, moments[rows], horizon=horizon)
        for key, values in part.items():
            if key not in out:
                shape = (len(moments), *values.shape[1:])
                out[key] = np.empty(shape, dtype=values.dtype)
            out[key][rows] = values
    return out


def backstop(params: PlanParams) -> capacity.ReactiveSpec | None:
    """The reactive trigger a plan with these parameters is deployed with (KEDA's second
    trigger, on the observed load at the plan's utilization target), or None."""
    if not params.reactive_backstop:
        return None
    return capacity.ReactiveSpec(target_utilization=params.utilization_target)


@dataclass(frozen=True)
class Sizing:
    """What turns a forecast row into executed GPUs: the profile, the plan parameters, the
    tokens per request (None when the forecast is of tokens) and the peak factors."""

    profile: ProfileFigures
    params: PlanParams
    tokens_per_request: float | None
    peak_factors: capacity.PeakFactors

    def factors(self, first_hour: pd.Timestamp, hours: int) -> np.ndarray:
        """The peak factor of each of ``hours`` hours from ``first_hour`` (by UTC hour)."""
        by_hour = np.asarray(self.peak_factors.by_hour, dtype=float)
        return by_hour[(first_hour.hour + np.arange(hours)) % 24]


def band_decisions(
    forecasts: dict[str, np.ndarray],
    moments: pd.DatetimeIndex,
    band: str,
    sizing: Sizing | Sequence[Sizing],
    *,
    lag: pd.Timedelta = REFRESH_LAG,
) -> list[capacity.PlanDecision]:
    """One plan decision per moment from the ``band`` column, served from moment + lag: the
    band x tokens per request x the peak factors, the user's formula, the schedule rules —
    the live plan's steps (capacity.plan_gpus), on all moments at once. ``sizing`` may differ
    per moment (a sequence as long as ``moments``)."""
    values = np.asarray(forecasts[band], dtype=float)
    rows = sizing if isinstance(sizing, Sequence) else [sizing] * len(moments)
    horizon = values.shape[1]
    scale = np.array([(r.tokens_per_request or 1.0) / 3600.0 for r in rows])
    factors = np.stack([r.factors(m, horizon) for r, m in zip(rows, moments, strict=True)])
    sized = values * scale[:, None] * factors
    first = rows[0]
    raw = capacity.gpus_for_load(
        sized.ravel(),
        first.profile.tokens_per_s_per_gpu,
        utilization_target=first.params.utilization_target,
        safety_factor=first.params.safety_factor,
        min_gpus=first.params.min_gpus,
        gpus_per_replica=first.profile.gpus_per_replica,
    ).reshape(sized.shape)
    rules = first.params.rules()
    decisions = []
    for row, moment in enumerate(moments):
        schedule = capacity.execute_schedule(
            raw[row], gpus_per_replica=first.profile.gpus_per_replica, rules=rules
        )
        decisions.append(capacity.PlanDecision(at=moment + lag, start=moment, gpus=schedule.gpus))
    return decisions


@dataclass
class BandChoice:
    """The calibrated band: chosen quantile, whether it met the target, and every quantile's
    replayed figures (risk = time over capacity share)."""

    band: str
    met: bool
    max_over_capacity: float
    risk: float | None
    gpu_hours: float | None
    window_start: pd.Timestamp | None
    window_end: pd.Timestamp | None
    table: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    @property
    def calibrated(self) -> bool:
        return bool(self.table)

    def as_dict(self) -> dict[str, Any]:
        return {
            "band": self.band,
            "met": self.met,
            "max_over_capacity": self.max_over_capacity,
            "replayed_time_over_capacity_share": self.risk,
            "replayed_gpu_hours": self.gpu_hours,
            "window_start": _iso(self.window_start),
            "window_end": _iso(self.window_end),
            "days": (
                (self.window_end - self.window_start) / pd.Timedelta(days=1)
                if self.window_start is not None and self.window_end is not None
                else None
            ),
            "quantiles": self.table,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BandChoice:
        return cls(
            band=data["band"],
            met=bool(data["met"]),
            max_over_capacity=float(data["max_over_capacity"]),
            risk=data.get("replayed_time_over_capacity_share"),
            gpu_hours=data.get("replayed_gpu_hours"),
            window_start=_stamp(data.get("window_start")),
            window_end=_stamp(data.get("window_end")),
            table=list(data.get("quantiles") or []),
            note=data.get("note") or "",
        )

    @classmethod
    def uncalibrated(cls, max_over_capacity: float, why: str) -> BandChoice:
        return cls(
            band=FALLBACK_BAND,
            met=False,
            max_over_capacity=max_over_capacity,
            risk=None,
            gpu_hours=None,
            window_start=None,
            window_end=None,
            note=f"not calibrated ({why}); sized on {FALLBACK_BAND}",
        )


def _iso(moment: pd.Timestamp | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _stamp(text: str | None) -> pd.Timestamp | None:
    return None if text is None else pd.Timestamp(text)


def choose_band(
    decisions: Mapping[str, Sequence[capacity.PlanDecision]],
    load: pd.Series,
    *,
    fleet: capacity.Fleet,
    start: pd.Timestamp,
    end: pd.Timestamp,
    max_over_capacity: float = MAX_OVER_CAPACITY,
    backstop: capacity.ReactiveSpec | None = None,
    prices: capacity.Prices | None = None,
) -> BandChoice:
    """Replay each band's decisions on ``load`` over [start, end) and pick the lowest band
    (in ``decisions`` order, lowest first) whose time over capacity <= max_over_capacity.
    ``backstop``: the reactive trigger the deployment runs beside the plan (the fleet then
    holds the larger of the two, as KEDA does with two triggers), or None for the plan alone."""
    if end - start < pd.Timedelta(hours=MIN_CALIBRATION_HOURS):
        return BandChoice.uncalibrated(
            max_over_capacity, f"{(end - start) / HOUR:.0f} h of past plans; needs 24"
        )
    policies = [
        capacity.PlanPolicy(band, tuple(d), reactive=backstop) for band, d in decisions.items()
    ]
    before = load[load.index < start]
    initial = float(before.iloc[-60:].mean()) if len(before) else float(load.iloc[0])
    result = capacity.replay(
        load,
        policies,
        fleet=fleet,
        start=start,
        end=end,
        initial_tokens_per_s=initial,
        prices=prices,
    )
    table = []
    for band in decisions:
        row = result.table.loc[band]
        table.append(
            {
                "band": band,
                "time_over_capacity_share": float(row["time_over_capacity_share"]),
                "requests_over_capacity_share": float(row["requests_over_capacity_share"]),
                "gpu_hours": float(row["gpu_hours"]),
            }
        )
    return select_band(table, max_over_capacity, start=start, end=end)


def select_band(
    table: list[dict[str, Any]],
    max_over_capacity: float,
    *,
    start: pd.Timestamp,
    end: pd.Timestamp,
) -> BandChoice:
    """The lowest band of a replayed ``table`` (lowest first) that meets the target, or the
    highest when none does."""
    meeting = [r for r in table if r["time_over_capacity_share"] <= max_over_capacity]
    chosen = meeting[0] if meeting else table[-1]
    days = (end - start) / pd.Timedelta(days=1)
    if meeting:
        note = (
            f"{chosen['band']}: the lowest quantile whose replayed time over capacity "
            f"({chosen['time_over_capacity_share']:.2%}) met {max_over_capacity:.2%} over the "
            f"last {days:.1f} days"
        )
    else:
        note = (
            f"no quantile met {max_over_capacity:.2%} over the last {days:.1f} days; sized on "
            f"the highest, {chosen['band']} ({chosen['time_over_capacity_share']:.2%} replayed)"
        )
    return BandChoice(
        band=chosen["band"],
        met=bool(meeting),
        max_over_capacity=max_over_capacity,
        risk=chosen["time_over_capacity_share"],
        gpu_hours=chosen["gpu_hours"],
        window_start=start,
        window_end=end,
        table=table,
        note=note,
    )


def decision_window(
    moments: pd.DatetimeIndex, lag: pd.Timedelta = REFRESH_LAG
) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The replay window [start, end) covered by hourly decisions at ``moments``: from the
    first decision being served to one hour after the last moment."""
    return moments[0] + lag, moments[-1] + HOUR


__all__ = [
    "AUTO_BANDS",
    "CALIBRATION_DAYS",
    "FALLBACK_BAND",
    "MAX_OVER_CAPACITY",
    "REFRESH_LAG",
    "BandChoice",
    "FittedState",
    "Sizing",
    "backstop",
    "band_decisions",
    "choose_band",
    "decision_window",
    "hourly_forecasts",
    "select_band",
]
