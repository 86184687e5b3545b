"""Per-series GPU plans in ``/metrics``, for alerting rules that compare planned and running
replicas. Labels ``series`` and ``profile`` (the series' deployment, else the only profile):

- ``gpucast_plan_desired_replicas``: what ``/desired-replicas`` answers now (what the KEDA
  trigger polls; while the plan is stale its fallback: the expected fleet's P99 peak, never
  below the floor's peak, :func:`app.plans.fallback_replicas`);
- ``gpucast_plan_gpus``: GPUs the executed schedule holds in the current hour;
- ``gpucast_plan_cost_usd``: the plan's cost of the current hour (absent without prices);
- ``gpucast_expected_fleet_gpus_p50`` / ``_p90``: the fleet the deployment is expected to run
  in the current hour (the floor above plus what the reactive trigger and the scale-down hold
  add, as the replay of the plan's band measured: :mod:`app.plans.expected`; absent when not
  measured).

All but the first are absent when the current hour is outside the plan. Under the default plan
parameters; a scrape reads the stored forecasts and band choices only, never fits, replays or
calibrates (a band auto series whose choice is not stored yet is sized on hi_80, as on the
overview page). A series without a forecast or a profile has no gauges.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime
from types import SimpleNamespace

import pandas as pd
from prometheus_client.core import GaugeMetricFamily, Metric

from app import plans
from app.db import Database, repository
from app.errors import AppError
from app.plans import PlanCache, PlanParams
from app.plans.auto_band import STORED
from app.pools.plan import StoredBands
from app.profiles.deployments import optional_binding

__all__ = ["series_plan_metrics"]

logger = logging.getLogger(__name__)

LABELS = ["series", "profile"]


def series_plan_metrics(
    database: Database, *, cache: PlanCache | None, now: datetime
) -> Iterator[Metric]:
    gpus = GaugeMetricFamily(
        "gpucast_plan_gpus", "GPUs the series' plan holds in the current hour", labels=LABELS
    )
    replicas = GaugeMetricFamily(
        "gpucast_plan_desired_replicas",
        "Replicas the series' plan wants now (what desired-replicas answers; the fallback, "
        "the expected fleet's P99 peak, when the plan is stale)",
        labels=LABELS,
    )
    cost = GaugeMetricFamily(
        "gpucast_plan_cost_usd", "Cost of the current hour of the series' plan", labels=LABELS
    )
    expected = {
        level: GaugeMetricFamily(
            f"gpucast_expected_fleet_gpus_{level}",
            f"GPUs the deployment is expected to run in the current hour ({level.upper()}): "
            "the plan's floor plus what the reactive trigger and the hold add",
            labels=LABELS,
        )
        for level in ("p50", "p90")
    }
    hour = pd.Timestamp(now).floor("h")
    with database.read_transaction() as session:
        bands = StoredBands(session, PlanParams())
        for series in repository.list_series(session):
            binding = optional_binding(session, series_name=series.name, fallback="only")
            if binding is None:
                continue
            # StoredBands reads a member's series, its id and the profile only
            member = SimpleNamespace(
                series=series.name, series_id=series.id, profile=binding.profile
            )
            params = bands(member)  # type: ignore[arg-type]
            try:
                plan = plans.series_plan(
                    session,
                    series_name=series.name,
                    profile_name=binding.profile,
                    params=params,
                    cache=cache,
                    calibrated_by=STORED,
                )
            except AppError as exc:  # no forecast yet, an unusable profile: no gauges
                logger.debug("no plan gauges for %s: %s", series.name, exc)
                continue
            labels = [series.name, binding.profile]
            answer = plans.desired_replicas(plan, now=now)
            replicas.add_metric(labels, answer["desired_replicas"])
            frame = plan.plan.frame
            at = pd.DatetimeIndex(frame["hour"]).get_indexer([hour])[0]
            if at < 0:
                continue
            gpus.add_metric(labels, int(frame["gpus"].iloc[at]))
            fleet = plan.expected.fleet if plan.expected is not None else None
            if fleet is not None:
                expected["p50"].add_metric(labels, int(fleet.p50[at]))
                expected["p90"].add_metric(labels, int(fleet.p90[at]))
            if plan.cost is not None and len(plan.cost.hourly_usd) == len(frame):
                cost.add_metric(labels, plan.cost.hourly_usd[at])
    yield from (gpus, replicas, cost, *expected.values())
