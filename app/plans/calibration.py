"""``band=auto``: the one margin, calibrated to a stated risk on the series' own recent past.

The margin is one continuous **headroom** ``h`` over the point forecast (``yhat``): the plan
sizes ``yhat x h x peak factor x safety factor / (per-GPU tokens/s x utilization target)``.
For candidate headrooms on a geometric grid (``HEADROOMS``: 0.25 … 2.38 in 5 % steps, so the
margin can go below the point forecast) replay the hourly plans gpucast would have served over
the last ``CALIBRATION_DAYS`` days — at every past hour the forecast refreshed from the data
before it, sized by the same formula, peak factors and schedule rules as the live plan, with
the same cold start and reactive trigger — against the load that followed, and choose the
**cheapest headroom whose time over capacity is at most ``max_over_capacity``**; when none
meets it, the largest, saying so. The risk falls as the headroom grows, so the grid is
searched by bisection (a handful of replays, not 47).

How the factors combine under auto: the peak factor (hour-of-day busiest minute ÷ hourly
mean) shapes the plan inside each hour and stays; the calibrated headroom is the whole margin
on top of it, so the default safety factor is 1.0; a ``safety_factor`` given explicitly
multiplies on purpose (the calibration then picks the headroom over that stacked plan, so the
replayed risk still lands at the target). Explicit bands are sized exactly as before
(``band x peak factor x safety factor``, default 1.2).

Everything here works on values (forecast arrays, a load series, plan parameters); the
service (:mod:`app.plans.service`) and the plan replay (:mod:`app.plans.replay`) read the
database and call it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

import capacity
from app.common import options
from app.plans.past_plans import REFRESH_LAG

CALIBRATION_DAYS = options.BAND_AUTO_DAYS
MIN_CALIBRATION_HOURS = 24
MAX_OVER_CAPACITY = 0.01
#: The risks band auto calibrates: time over capacity, or time over the SLO under an SLO.
RISK_CAPACITY = "time_over_capacity_share"
RISK_WORDS = {RISK_CAPACITY: "time over capacity", "time_over_slo_share": "time over the SLO"}
#: The column band auto sizes on: the point forecast, times the calibrated headroom.
POINT_BAND = "yhat"
#: Candidate headrooms over the point forecast: 0.25 … 2.38, each 5 % above the previous (the
#: grid reaches down to a quarter of the point forecast so that the floor never binds where
#: the risk allows less: a floor at the lowest candidate on most nights is a margin the risk
#: did not ask for).
HEADROOM_STEP = 1.05
HEADROOMS = tuple(round(0.5 * HEADROOM_STEP**k, 4) for k in range(-14, 33))
FALLBACK_BAND = "hi_80"
HOUR = pd.Timedelta(hours=1)
#: The expected fleet's upper quantiles also look at the last two days of the replay alone.
RECENT_HOURS = 48


@dataclass
class BandChoice:
    """The calibrated margin: the band sized on (``yhat`` under auto) and its headroom,
    whether it met the target, and every replayed candidate's figures (risk = time over
    capacity share). ``headroom`` is None for a fallback band sized as asked."""

    band: str
    met: bool
    max_over_capacity: float
    risk: float | None
    gpu_hours: float | None
    window_start: pd.Timestamp | None
    window_end: pd.Timestamp | None
    table: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""
    headroom: float | None = None
    risk_kpi: str = RISK_CAPACITY  # the replayed risk held to max_over_capacity
    # the replayed fleet ÷ the plan's floor at the chosen headroom (capacity.FleetRatios)
    fleet_ratios: capacity.FleetRatios | None = None
    # the reactive trigger alone replayed over the same days ({"gpu_hours", the risk KPI}):
    # what the plan's floor adds to it; None without a reactive trigger
    reactive_alone: dict[str, float] | None = None

    @property
    def calibrated(self) -> bool:
        return bool(self.table)

    @property
    def label(self) -> str:
        """``yhat x 1.16`` (the point forecast times the calibrated headroom), or the band."""
        return self.band if self.headroom is None else f"{self.band} x {self.headroom:.2f}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "band": self.band,
            "headroom": self.headroom,
            "label": self.label,
            "met": self.met,
            "max_over_capacity": self.max_over_capacity,
            "calibrated_risk": self.risk_kpi,
            "replayed_time_over_capacity_share": self._chosen(RISK_CAPACITY),
            **({} if self.risk_kpi == RISK_CAPACITY else {f"replayed_{self.risk_kpi}": self.risk}),
            "replayed_gpu_hours": self.gpu_hours,
            "window_start": _iso(self.window_start),
            "window_end": _iso(self.window_end),
            "days": (
                (self.window_end - self.window_start) / pd.Timedelta(days=1)
                if self.window_start is not None and self.window_end is not None
                else None
            ),
            "candidates": self.table,
            "note": self.note,
            "fleet_ratios": None if self.fleet_ratios is None else self.fleet_ratios.as_dict(),
            "reactive_alone": self.reactive_alone,
        }

    def _chosen(self, kpi: str) -> float | None:
        """The chosen candidate's replayed ``kpi`` (the calibrated risk is ``risk``)."""
        if kpi == self.risk_kpi:
            return self.risk
        rows = [r for r in self.table if r.get("headroom") == self.headroom]
        return rows[0].get(kpi) if rows else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BandChoice:
        headroom = data.get("headroom")
        return cls(
            band=data["band"],
            met=bool(data["met"]),
            max_over_capacity=float(data["max_over_capacity"]),
            risk=data.get(f"replayed_{data.get('calibrated_risk', RISK_CAPACITY)}"),
            gpu_hours=data.get("replayed_gpu_hours"),
            window_start=_stamp(data.get("window_start")),
            window_end=_stamp(data.get("window_end")),
            table=list(data.get("candidates") or data.get("quantiles") or []),
            note=data.get("note") or "",
            headroom=None if headroom is None else float(headroom),
            risk_kpi=data.get("calibrated_risk", RISK_CAPACITY),
            fleet_ratios=capacity.FleetRatios.from_dict(data.get("fleet_ratios")),
            reactive_alone=data.get("reactive_alone"),
        )

    def forecast_adds(self) -> str | None:
        """What the plan's floor adds to the reactive trigger alone over the replayed days
        (GPU-hours and the calibrated risk), or None when not measured."""
        alone = self.reactive_alone
        if alone is None or self.gpu_hours is None or self.risk is None:
            return None
        if self.window_start is None or self.window_end is None:
            return None
        added = self.gpu_hours - alone["gpu_hours"]
        share = added / alone["gpu_hours"] if alone["gpu_hours"] > 0 else 0.0
        days = (self.window_end - self.window_start) / pd.Timedelta(days=1)
        return (
            f"{added:+,.0f} GPU-h ({share:+.1%}) to the reactive trigger alone over the "
            f"{days:.1f} replayed days and moves {RISK_WORDS[self.risk_kpi]} from "
            f"{alone[self.risk_kpi]:.2%} to {self.risk:.2%}"
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


def _standard_error(result: capacity.ReplayResult, end: pd.Timestamp) -> float:
    """The standard error of the mean daily time over capacity (the replay's line: the SLO
    capacity when it was given one) of a one-policy replay, per tick: the sample standard
    deviation of the shares of its days (24 h blocks back from ``end``) divided by the square
    root of their number (0 with fewer than two days)."""
    timeline = result.timelines["candidate"]
    timeline = timeline[timeline.index >= result.start]
    over = (timeline["load_tokens_per_s"] > timeline["capacity_tokens_per_s"]).to_numpy()
    block = ((end - timeline.index) // pd.Timedelta(days=1)).to_numpy()
    full = block < (end - result.start) // pd.Timedelta(days=1)
    days = pd.Series(over[full]).groupby(block[full]).mean()
    if len(days) < 2:
        return 0.0
    return float(days.std(ddof=1) / np.sqrt(len(days)))


class HeadroomReplay:
    """The past replayed for candidate headrooms, each at most once: ``decisions_for(h)`` the
    hourly plans sized at headroom ``h``, replayed on ``load`` over [start, end) by the fleet
    the deployment runs (its cold start, hold and, when ``backstop`` is given, the reactive
    trigger beside the plan: the fleet holds the larger of the two, as KEDA does)."""

    def __init__(
        self,
        decisions_for: Callable[[float], Sequence[capacity.PlanDecision]],
        load: pd.Series,
        *,
        fleet: capacity.Fleet,
        start: pd.Timestamp,
        end: pd.Timestamp,
        backstop: capacity.ReactiveSpec | None = None,
        slo_tokens_per_s_per_replica: pd.Series | None = None,
    ) -> None:
        self._decisions_for = decisions_for
        self._slo = slo_tokens_per_s_per_replica
        #: The risk calibrated: time over the SLO when the SLO capacity is given.
        self.risk_kpi = RISK_CAPACITY if self._slo is None else capacity.SLO_KPI
        self._load = load
        self._fleet, self._backstop = fleet, backstop
        self.start, self.end = start, end
        observed = load.dropna()
        before = observed[observed.index < start]
        self._initial = float(before.iloc[-60:].mean()) if len(before) else float(observed.iloc[0])
        self._rows: dict[float, dict[str, Any]] = {}
        self._alone: dict[str, float] | None = None
        self._ratios: dict[float, capacity.FleetRatios | None] = {}

    @property
    def long_enough(self) -> bool:
        return self.end - self.start >= pd.Timedelta(hours=MIN_CALIBRATION_HOURS)

    def _run(self, decisions: Sequence[capacity.PlanDecision]) -> capacity.ReplayResult:
        """``decisions`` with the deployment's reactive trigger, replayed as ``candidate``."""
        policy = capacity.PlanPolicy("candidate", tuple(decisions), reactive=self._backstop)
        return capacity.replay(
            self._load,
            [policy],
            fleet=self._fleet,
            start=self.start,
            end=self.end,
            initial_tokens_per_s=self._initial,
            slo_tokens_per_s_per_replica=self._slo,
        )

    def row(self, headroom: float) -> dict[str, Any]:
        if headroom not in self._rows:
            result = self._run(self._decisions_for(headroom))
            kpis = result.table.loc["candidate"]
            hourly = capacity.hourly_fleet(result.timelines["candidate"], self.start, self.end)
            self._ratios[headroom] = capacity.recent_and_window_ratios(hourly, RECENT_HOURS)
            share = float(kpis[self.risk_kpi])
            error = _standard_error(result, self.end)
            self._rows[headroom] = {
                "headroom": headroom,
                "time_over_capacity_share": float(kpis[RISK_CAPACITY]),
                **({} if self._slo is None else {capacity.SLO_KPI: share}),
                "risk_upper_bound": share + error,
                "requests_over_capacity_share": float(kpis["requests_over_capacity_share"]),
                "gpu_hours": float(kpis["gpu_hours"]),
            }
        return self._rows[headroom]

    def fleet_ratios(self, headroom: float) -> capacity.FleetRatios | None:
        """The replayed fleet ÷ the load sized at ``headroom`` (replayed once, as ``row``)."""
        self.row(headroom)
        return self._ratios[headroom]

    def reactive_alone(self, headroom: float) -> dict[str, float] | None:
        """The reactive trigger alone on the same fleet and days — the plans at ``headroom``
        with their floor at the minimum, so the fleet starts and runs as the candidates do
        but only the reactive trigger lifts it: its GPU-hours and risk, or None without a
        reactive trigger."""
        if self._backstop is None:
            return None
        if self._alone is None:
            lowest = self._fleet.rules.min_gpus
            kpis = self._run(
                [
                    replace(d, gpus=np.full(len(d.gpus), lowest), load_gpus=None)
                    for d in self._decisions_for(headroom)
                ]
            ).table.loc["candidate"]
            self._alone = {
                "gpu_hours": float(kpis["gpu_hours"]),
                self.risk_kpi: float(kpis[self.risk_kpi]),
            }
        return self._alone

    def choose(self, max_over_capacity: float) -> BandChoice:
        """The cheapest headroom of HEADROOMS whose replayed risk meets the target (bisection:
        the risk falls as the headroom grows), or the largest when none does."""
        if not self.long_enough:
            hours = (self.end - self.start) / HOUR
            return BandChoice.uncalibrated(
                max_over_capacity, f"{hours:.0f} h of past plans; needs {MIN_CALIBRATION_HOURS}"
            )
        meets = lambda k: self.row(HEADROOMS[k])["risk_upper_bound"] <= max_over_capacity  # noqa: E731
        low, high = -1, len(HEADROOMS) - 1  # HEADROOMS[high] meets it (checked first)
        met = meets(high)
        while met and high - low > 1:
            middle = (low + high) // 2
            if meets(middle):
                high = middle
            else:
                low = middle
        chosen = self.row(HEADROOMS[high])
        table = [self._rows[h] for h in sorted(self._rows)]
        days = (self.end - self.start) / pd.Timedelta(days=1)
        risk = chosen[self.risk_kpi]
        what = RISK_WORDS[self.risk_kpi]
        if met:
            note = (
                f"{POINT_BAND} x {chosen['headroom']:.2f}: the cheapest headroom over the point "
                f"forecast whose replayed {what} ({risk:.2%}) met "
                f"{max_over_capacity:.2%} over the last {days:.1f} days"
            )
        else:
            note = (
                f"no headroom met {max_over_capacity:.2%} over the last {days:.1f} days; sized "
                f"on the largest, {POINT_BAND} x {chosen['headroom']:.2f} ({risk:.2%} replayed)"
            )
        return BandChoice(
            band=POINT_BAND,
            met=met,
            max_over_capacity=max_over_capacity,
            risk=risk,
            gpu_hours=chosen["gpu_hours"],
            window_start=self.start,
            window_end=self.end,
            table=table,
            note=note,
            headroom=chosen["headroom"],
            risk_kpi=self.risk_kpi,
            fleet_ratios=self._ratios[chosen["headroom"]],
            reactive_alone=self.reactive_alone(chosen["headroom"]),
        )


def decision_window(
    moments: pd.DatetimeIndex, lag: pd.Timedelta = REFRESH_LAG
) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The replay window [start, end) covered by hourly decisions at ``moments``: from the
    first decision being served to one hour after the last moment."""
    return moments[0] + lag, moments[-1] + HOUR


__all__ = [
    "CALIBRATION_DAYS",
    "FALLBACK_BAND",
    "HEADROOMS",
    "MAX_OVER_CAPACITY",
    "POINT_BAND",
    "BandChoice",
    "HeadroomReplay",
    "decision_window",
]
