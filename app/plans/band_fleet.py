"""The expected fleet of an explicit band (``band=hi_80``, ``yhat``, ``q70``, …), measured as
band auto's is: the deployment replayed over the calibration window with the band's own
sizing (the band x the peak factors x its safety factor, no headroom search: one replay), and
the replayed fleet measured against the load each hour was sized for
(:func:`capacity.fleet_ratios`, base "load").

The measurement is a :class:`~app.plans.calibration.BandChoice` of that band (no headroom),
stored and reused exactly as band auto's choice (:mod:`app.plans.auto_band`: per nightly
run, under a key naming the band, within the same read bounds and single flight, and made
again by the nightly recalibration for every set asked for in the last days). A band's
default parameters are free for reads, as band auto's are: there are as many as bands.
"""

from __future__ import annotations

import pandas as pd

import capacity
from app.plans.calibration import POINT_BAND, RISK_WORDS, BandChoice, HeadroomReplay
from app.plans.params import PlanParams

AUTO = "auto"


def band_key(params: PlanParams) -> str:
    """What a stored measurement of ``params`` is found by: band auto's key, or, for an
    explicit band, the band and that key (the band changes the replayed plans)."""
    key = params.calibration_key()
    return key if params.band == AUTO else f"band={params.band},{key}"


#: The keys reads calibrate without counting against the read budget: the default
#: parameters of band auto and of every explicit band.
FREE_KEYS = frozenset(band_key(PlanParams(band=band)) for band in (AUTO, *capacity.PLAN_BANDS))


def sized_band(params: PlanParams) -> str:
    """The forecast column the replayed plans size on: the point forecast under auto (times
    the candidate headroom), the band itself otherwise."""
    return POINT_BAND if params.band == AUTO else params.band


def replayed_band(replay: HeadroomReplay, params: PlanParams) -> BandChoice:
    """The explicit band of ``params`` replayed once, as sized (headroom 1): its risk, its
    GPU-hours and the fleet ratios its expected fleet is published from."""
    target = params.max_over_capacity
    if not replay.long_enough:
        hours = (replay.end - replay.start) / pd.Timedelta(hours=1)
        return BandChoice.uncalibrated(target, f"{hours:.0f} h of past plans to replay")
    row = replay.row(1.0)
    risk = row[replay.risk_kpi]
    days = (replay.end - replay.start) / pd.Timedelta(days=1)
    factor = params.sizing_safety_factor
    return BandChoice(
        band=params.band,
        met=row["risk_upper_bound"] <= target,
        max_over_capacity=target,
        risk=risk,
        gpu_hours=row["gpu_hours"],
        window_start=replay.start,
        window_end=replay.end,
        table=[row],
        note=(
            f"{params.band} at safety factor {factor:g} replayed over the last {days:.1f} days: "
            f"{RISK_WORDS[replay.risk_kpi]} {risk:.2%}, {row['gpu_hours']:,.0f} GPU-hours"
        ),
        risk_kpi=replay.risk_kpi,
        fleet_ratios=replay.fleet_ratios(1.0),
        reactive_alone=replay.reactive_alone(1.0),
    )


__all__ = ["AUTO", "FREE_KEYS", "band_key", "replayed_band", "sized_band"]
