"""Per-profile drift in ``/metrics``: is the running fleet as fast as its load test says?

Each production hour posted to a load-test profile stores the p95 TTFT and TPOT the profile's
model gives at that hour's load and mix (:func:`capacity.expected_p95`; none near the model's
saturation, where latency moves with a hair of load). Labels ``profile``:

- ``gpucast_profile_production_hours``: production hours stored for the last 14 days (what the
  SLO answers may fold in);
- ``gpucast_profile_latency_ratio{profile,latency="ttft"|"tpot"}``: the median, over the newest
  ``DRIFT_HOURS`` hours with an expectation, of the p95 served ÷ the model's p95;
- ``gpucast_profile_drift_hours``: of those hours, how many served a p95 TTFT or TPOT more than
  ``DRIFT_FACTOR`` times the model's. Alert on ``>= 3``: the fleet has been slower than its load
  test for three of its last six hours.

A scrape reads stored rows only, never fits a model.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import select

from app.db import Database
from app.db.models import GpuProfile, ProfileObservation

__all__ = ["DRIFT_FACTOR", "DRIFT_HOURS", "profile_drift_metrics"]

DRIFT_HOURS = 6
DRIFT_FACTOR = 1.2
WINDOW = timedelta(days=14)


def profile_drift_metrics(database: Database, *, now: datetime) -> Iterator[Metric]:
    stored = GaugeMetricFamily(
        "gpucast_profile_production_hours",
        "Production hours of the profile's fleet stored for the last 14 days",
        labels=["profile"],
    )
    ratio = GaugeMetricFamily(
        "gpucast_profile_latency_ratio",
        f"Median over the profile's newest {DRIFT_HOURS} production hours of the p95 served "
        "over the load-test model's p95 at the hour's load and mix",
        labels=["profile", "latency"],
    )
    drift = GaugeMetricFamily(
        "gpucast_profile_drift_hours",
        f"Of the profile's newest {DRIFT_HOURS} production hours, those that served a p95 TTFT "
        f"or TPOT over {DRIFT_FACTOR:g}x the load-test model's",
        labels=["profile"],
    )
    with database.transaction() as session:
        rows = session.execute(
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
        ).all()
    counts: dict[str, int] = defaultdict(int)
    judged: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for name, ttft, tpot, expected_ttft, expected_tpot in rows:
        counts[name] += 1
        if expected_ttft and expected_tpot and len(judged[name]) < DRIFT_HOURS:
            judged[name].append((ttft / expected_ttft, tpot / expected_tpot))
    for name, count in counts.items():
        stored.add_metric([name], count)
        if not judged[name]:
            continue
        for index, latency in enumerate(("ttft", "tpot")):
            ratio.add_metric([name, latency], statistics.median(r[index] for r in judged[name]))
        drift.add_metric([name], sum(max(r) > DRIFT_FACTOR for r in judged[name]))
    yield from (stored, ratio, drift)
