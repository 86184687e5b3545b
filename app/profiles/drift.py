"""Drift of a profile's running fleet from its load test: the production hours posted to a
load-test profile (:mod:`app.profiles.observations`) each store the p95 TTFT and TPOT the
profile's model expects at that hour's load and mix; an hour *drifts* when it served either
more than ``DRIFT_FACTOR`` times slower. Over the newest ``DRIFT_HOURS`` judged hours of the
last 14 days, ``DRIFT_ALERT_HOURS`` or more drifting hours mean the fleet is slower than its
load test: ``/metrics`` exposes the counts, and plans sized at an SLO on the profile say so.

Reads stored rows only, never fits a model.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import GpuProfile, ProfileObservation

__all__ = [
    "DRIFT_ALERT_HOURS",
    "DRIFT_FACTOR",
    "DRIFT_HOURS",
    "WINDOW",
    "Drift",
    "DriftHour",
    "drifting_hours",
    "profile_drifts",
]

DRIFT_HOURS = 6
DRIFT_FACTOR = 1.2
DRIFT_ALERT_HOURS = 3
WINDOW = timedelta(days=14)


@dataclass(frozen=True)
class Drift:
    """A profile's production hours of the last 14 days: how many are stored, and the newest
    ``DRIFT_HOURS`` judged ones as (served ÷ expected p95 TTFT, served ÷ expected p95 TPOT)."""

    profile: str
    stored_hours: int
    judged: tuple[tuple[float, float], ...]

    @property
    def drift_hours(self) -> int:
        return sum(max(ratios) > DRIFT_FACTOR for ratios in self.judged)

    def ratio(self, latency: str) -> float | None:
        """The median served ÷ expected p95 of ``latency`` ("ttft" or "tpot")."""
        if not self.judged:
            return None
        index = ("ttft", "tpot").index(latency)
        return float(statistics.median(r[index] for r in self.judged))

    @property
    def alerting(self) -> bool:
        return self.drift_hours >= DRIFT_ALERT_HOURS

    def note(self) -> str:
        ttft, tpot = self.ratio("ttft"), self.ratio("tpot")
        return (
            f"production is slower than profile {self.profile}'s load test: "
            f"{self.drift_hours} of its newest {len(self.judged)} production hours served a "
            f"p95 over {DRIFT_FACTOR:g}x what the load test gives at their load and mix "
            f"(median TTFT {ttft:.2f}x, TPOT {tpot:.2f}x); this plan sizes each hour on the "
            "production hours near its mix (production_hours), on the load test alone where "
            "there are none — check the fleet, or measure the profile again"
        )


def profile_drifts(
    session: Session, *, now: datetime, profile_name: str | None = None
) -> dict[str, Drift]:
    """Every profile with production hours in the 14 days before ``now`` (or only
    ``profile_name``), by name."""
    query = (
        select(
            GpuProfile.name,
            ProfileObservation.ttft_p95_s,
            ProfileObservation.tpot_p95_s,
            ProfileObservation.expected_ttft_p95_s,
            ProfileObservation.expected_tpot_p95_s,
        )
        .join(GpuProfile, GpuProfile.id == ProfileObservation.gpu_profile_id)
        .where(ProfileObservation.hour >= now - WINDOW)
        .order_by(GpuProfile.name, ProfileObservation.hour.desc())
    )
    if profile_name is not None:
        query = query.where(GpuProfile.name == profile_name)
    counts: dict[str, int] = defaultdict(int)
    judged: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for name, ttft, tpot, expected_ttft, expected_tpot in session.execute(query):
        counts[name] += 1
        if expected_ttft and expected_tpot and len(judged[name]) < DRIFT_HOURS:
            judged[name].append((ttft / expected_ttft, tpot / expected_tpot))
    return {
        name: Drift(profile=name, stored_hours=count, judged=tuple(judged[name]))
        for name, count in counts.items()
    }


@dataclass(frozen=True)
class DriftHour:
    """A production hour that served a p95 over ``DRIFT_FACTOR`` times its load test's."""

    profile: str
    hour: datetime
    ttft_ratio: float
    tpot_ratio: float
    requests_per_s_per_replica: float
    prompt_tokens: float  # per request
    completion_tokens: float  # per request

    def text(self) -> str:
        return (
            f"p95 TTFT {self.ttft_ratio:.2f}x, TPOT {self.tpot_ratio:.2f}x what profile "
            f"{self.profile}'s load test gives at {self.requests_per_s_per_replica:.3g} "
            f"requests/s per replica, {self.prompt_tokens:,.0f} prompt / "
            f"{self.completion_tokens:,.0f} completion tokens per request"
        )


def drifting_hours(
    session: Session,
    *,
    start: datetime,
    end: datetime,
    profile_names: Sequence[str] | None = None,
) -> list[DriftHour]:
    """The production hours in [start, end) that drifted, oldest first (of ``profile_names``,
    else of every profile)."""
    query = (
        select(GpuProfile.name, ProfileObservation)
        .join(GpuProfile, GpuProfile.id == ProfileObservation.gpu_profile_id)
        .where(ProfileObservation.hour >= start, ProfileObservation.hour < end)
        .where(ProfileObservation.expected_ttft_p95_s.is_not(None))
        .where(ProfileObservation.expected_tpot_p95_s.is_not(None))
        .order_by(ProfileObservation.hour, GpuProfile.name)
    )
    if profile_names is not None:
        query = query.where(GpuProfile.name.in_(list(profile_names)))
    found = []
    for name, row in session.execute(query):
        ttft = row.ttft_p95_s / row.expected_ttft_p95_s
        tpot = row.tpot_p95_s / row.expected_tpot_p95_s
        if max(ttft, tpot) <= DRIFT_FACTOR or row.requests <= 0:
            continue
        found.append(
            DriftHour(
                profile=name,
                hour=row.hour,
                ttft_ratio=ttft,
                tpot_ratio=tpot,
                requests_per_s_per_replica=row.requests / 3600.0 / row.replicas,
                prompt_tokens=row.prompt_tokens / row.requests,
                completion_tokens=row.completion_tokens / row.requests,
            )
        )
    return found
