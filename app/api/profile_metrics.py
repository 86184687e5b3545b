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

A scrape reads stored rows only, never fits a model (:mod:`app.profiles.drift`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily, Metric

from app.db import Database
from app.profiles.drift import DRIFT_FACTOR, DRIFT_HOURS, profile_drifts

__all__ = ["DRIFT_FACTOR", "DRIFT_HOURS", "profile_drift_metrics"]


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
        drifts = profile_drifts(session, now=now)
    for name, found in drifts.items():
        stored.add_metric([name], found.stored_hours)
        if not found.judged:
            continue
        for latency in ("ttft", "tpot"):
            if (value := found.ratio(latency)) is not None:
                ratio.add_metric([name, latency], value)
        drift.add_metric([name], found.drift_hours)
    yield from (stored, ratio, drift)
