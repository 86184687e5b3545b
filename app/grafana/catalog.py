"""The registry of targets the datasource serves, their payload editors and variable queries.

``TARGETS`` is the single source of truth: ``/metrics`` lists it, ``/query`` dispatches on it
and the tests check the provisioned dashboard against it.

Plan targets (``gpus``, ``cost``, ``scale_events``, ``plan_backtest``, ``plan_status``) take
the plan parameters of the REST API as payload (band, utilization_target, safety_factor,
min_gpus, max_gpus, cold_start_s, scale_down_hold_s, and for band auto max_over_capacity and
reactive_backstop). ``gpus`` and ``cost`` serve the executed schedule, named
``"{series} gpus ({profile})"`` (``replicas``, ``raw_gpus`` and ``cost usd/h`` likewise); for
band auto the name says the quantile the plan was sized on, ``"{series} gpus ({profile},
auto → q70)"``. When the plan's forecast was trained more than 36 h ago every such name ends
in ``" STALE: forecast older than 36 h"`` (``plan_targets.STALE_SUFFIX``), so the legend shows
it, and scale-event annotations carry the tag ``stale``. ``plan_backtest`` is a table of the
plan replay's KPIs per policy, served from the stored replay while it is current.
``plan_status`` is a table, one row per series, of the freshest forecast run behind the plan
(kind, trained-until, ages), its fitted nightly run and the band sized on with its calibration.

``profile_compare`` is a table of a series' plan on each of several profiles at one SLO, the
cheapest that meets it marked (:mod:`.compare_targets`).

Pool targets (``pool_nodes``, ``pool_cost``, ``pool_shortfall``, ``pool_migrations``,
``pool_throttled``) take ``pool`` (every stored pool without one), ``hours`` and the same plan
parameters, and need no series: the pool's members are its series (:mod:`.pool_targets`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app import pools
from app.common.names import echo
from app.common.words import count
from app.db import repository
from app.forecasts import store as forecast_store
from app.grafana import (
    compare_targets,
    plan_targets,
    pool_targets,
    profile_targets,
    replay_targets,
    series_targets,
    status_targets,
    tables,
)
from app.grafana.protocol import GrafanaInputError, QueryContext, text_list
from app.pools.plan import DEFAULT_PLAN_HOURS

Handler = Callable[[QueryContext, dict[str, Any]], list[dict[str, Any]]]


@dataclass(frozen=True)
class Payload:
    name: str
    label: str
    kind: str = "select"  # select | multi-select | input | textarea
    placeholder: str | None = None
    reload_metric: bool = False


@dataclass(frozen=True)
class Target:
    """A target: its handler, its payload editors, and how the query's range applies to it
    (:mod:`app.grafana.ranges`): ``reads_range`` targets read data by the range (computed on
    the range widened to whole hours), the others are computed once for every range;
    ``downsampled`` ones are averaged down to the query's ``maxDataPoints``."""

    name: str
    label: str
    handler: Handler
    payloads: tuple[Payload, ...]
    annotation: bool = False
    reads_range: bool = False
    downsampled: bool = False


SERIES = Payload(
    "series", "Series", placeholder="every series (or the ad-hoc filter)", reload_metric=True
)
PROFILE = Payload(
    "profile",
    "GPU profiles (one result each)",
    "multi-select",
    "the series' deployment",
)
PLAN_PARAMETERS = (
    Payload("band", "Sized for", placeholder="auto"),
    Payload("utilization_target", "Utilization target", "input", "0.75"),
    Payload("safety_factor", "Safety factor", "input", "1.0 with auto, else 1.2"),
    Payload("min_gpus", "Min GPUs", "input", "1"),
    Payload("max_gpus", "Max GPUs (quota)", "input", "no quota"),
    Payload("cold_start_s", "Cold start (s)", "input", "300"),
    Payload("scale_down_hold_s", "Scale-down hold (s)", "input", "1800"),
    Payload("max_over_capacity", "Band auto: max time over capacity", "input", "0.01"),
    Payload("reactive_backstop", "Band auto: reactive trigger beside the plan", placeholder="true"),
    Payload("hpa_tolerance", "Band auto: the HPA's tolerance on the plan trigger", "input", "0"),
)
PLAN_PAYLOADS = (SERIES, PROFILE, *PLAN_PARAMETERS)
POOL_PAYLOADS = (
    Payload("pool", "Pool", placeholder="every pool"),
    Payload("hours", "Plan hours", "input", str(DEFAULT_PLAN_HOURS)),
    *PLAN_PARAMETERS,
)

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "history",
            "History (hourly observations)",
            series_targets.history,
            (SERIES, Payload("metric", "Metric", placeholder="requests")),
            reads_range=True,
            downsampled=True,
        ),
        Target(
            "forecast",
            "Forecast (latest run, point and bands)",
            series_targets.forecast,
            (
                SERIES,
                Payload("metric", "Metric", placeholder="requests"),
                Payload("band", "Band", placeholder="yhat"),
            ),
        ),
        Target(
            "gpus",
            "GPU plan (the floor KEDA polls, per hour; expected_fleet adds what the deployment "
            "is expected to run; legend ends in STALE when the forecast is old)",
            plan_targets.gpus,
            (
                *PLAN_PAYLOADS,
                Payload("replicas", "Also replicas", placeholder="false"),
                Payload("raw_gpus", "Also unconstrained GPUs", placeholder="false"),
                Payload("expected_fleet", "Also the expected fleet", placeholder="false"),
            ),
        ),
        Target(
            "cost",
            "GPU plan cost (USD per hour of the floor's schedule; expected_fleet adds the "
            "expected fleet's)",
            plan_targets.cost,
            (
                *PLAN_PAYLOADS,
                Payload("expected_fleet", "Also the expected fleet", placeholder="false"),
            ),
        ),
        Target(
            "backtest",
            "Backtest scores of every candidate (table)",
            tables.backtest,
            (SERIES, Payload("metric", "Metric", placeholder="all")),
        ),
        Target(
            "accuracy",
            "Forecast accuracy of past runs against actuals",
            series_targets.forecast_accuracy,
            (
                SERIES,
                Payload("metric", "Metric", placeholder="requests"),
                Payload("measure", "Measure", placeholder="wape"),
            ),
        ),
        Target(
            "events",
            "Annotations: business events",
            tables.events,
            (SERIES,),
            annotation=True,
            reads_range=True,
        ),
        Target(
            "anomalies",
            "Annotations: detected anomalies",
            tables.anomalies,
            (SERIES, Payload("metric", "Metric", placeholder="all")),
            True,
        ),
        Target(
            "scale_events",
            "Annotations: executed GPU scale events (rises ordered one cold start early)",
            plan_targets.scale_events,
            PLAN_PAYLOADS,
            True,
        ),
        Target(
            "profile_drift",
            "Annotations: production hours slower than the profile's load test",
            profile_targets.profile_drift,
            (Payload("profile", "GPU profiles", "multi-select", "every profile"),),
            annotation=True,
            reads_range=True,
        ),
        Target(
            "plan_backtest",
            "Plan replay: KPIs of every policy over the last days (table)",
            replay_targets.plan_backtest,
            (
                Payload("series", "Series", placeholder="one series (or the ad-hoc filter)"),
                PROFILE,
                Payload("days", "Days replayed", "input", str(replay_targets.DEFAULT_DAYS)),
                *PLAN_PARAMETERS,
            ),
        ),
        Target(
            "plan_status",
            "Plan status: freshest forecast run, its age and the band sized on (table)",
            status_targets.plan_status,
            PLAN_PAYLOADS,
        ),
        Target(
            "profile_compare",
            "Cheapest GPU type: each profile's plan and cost at the SLO (table)",
            compare_targets.profile_compare,
            (
                SERIES,
                Payload(
                    "profiles",
                    "GPU profiles",
                    "multi-select",
                    "the deployed profile's model",
                ),
                Payload("ttft_p95_s", "SLO: p95 TTFT (s)", "input", "the deployment's"),
                Payload("tpot_p95_s", "SLO: p95 TPOT (s)", "input", "the deployment's"),
                *PLAN_PARAMETERS,
            ),
        ),
        Target(
            "pool_nodes",
            "Shared pool: nodes per hour (and the lower bound, reserved nodes)",
            pool_targets.pool_nodes,
            (
                *POOL_PAYLOADS,
                Payload("lower_bound", "Also lower bound", placeholder="false"),
                Payload("reserved", "Also reserved nodes", placeholder="false"),
            ),
        ),
        Target(
            "pool_cost",
            "Shared pool: cost (USD per hour of its nodes)",
            pool_targets.pool_cost,
            POOL_PAYLOADS,
        ),
        Target(
            "pool_shortfall",
            "Shared pool: GPUs short of each member's plan under the quota",
            pool_targets.pool_shortfall,
            (*POOL_PAYLOADS, Payload("per", "One series per", placeholder="member")),
        ),
        Target(
            "pool_migrations",
            "Annotations: shared pool migrations that free a node",
            pool_targets.pool_migrations,
            POOL_PAYLOADS,
            True,
        ),
        Target(
            "pool_throttled",
            "Annotations: shared pool hours throttled under the quota (classes queued)",
            pool_targets.pool_throttled,
            POOL_PAYLOADS,
            True,
        ),
    )
}
POOL_TARGETS = ("pool_nodes", "pool_cost", "pool_shortfall", "pool_migrations", "pool_throttled")
PLAN_TARGETS = (
    "gpus",
    "cost",
    "scale_events",
    "plan_backtest",
    "plan_status",
    "profile_compare",
    *POOL_TARGETS,
)

STATIC_OPTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("history", "metric"): tuple(series_targets.HISTORY_METRICS),
    ("forecast", "metric"): tuple(series_targets.FORECAST_METRICS),
    ("forecast", "band"): series_targets.FORECAST_BAND_CHOICES,
    ("gpus", "replicas"): ("false", "true"),
    ("gpus", "raw_gpus"): ("false", "true"),
    ("gpus", "expected_fleet"): ("false", "true"),
    ("cost", "expected_fleet"): ("false", "true"),
    ("pool_nodes", "lower_bound"): ("false", "true"),
    ("pool_nodes", "reserved"): ("false", "true"),
    ("pool_shortfall", "per"): pool_targets.SHORTFALL_PER,
    **{(name, "band"): plan_targets.PLAN_BANDS for name in PLAN_TARGETS},
    **{(name, "reactive_backstop"): ("true", "false") for name in PLAN_TARGETS},
    ("backtest", "metric"): tables.RUN_METRIC_CHOICES,
    ("anomalies", "metric"): tables.RUN_METRIC_CHOICES,
    ("accuracy", "metric"): series_targets.RUN_METRICS,
    ("accuracy", "measure"): series_targets.ACCURACY_MEASURES,
}


def get_target(name: str | None) -> Target:
    if not name or name not in TARGETS:
        raise GrafanaInputError(f"unknown target {echo(name)}; valid targets: {', '.join(TARGETS)}")
    return TARGETS[name]


def payload_options(
    session: Session, *, metric: str, name: str, payload: dict[str, Any]
) -> list[dict[str, str]] | None:
    """Drop-down options of one payload field, or None for a free-text input."""
    target = get_target(metric)
    if name not in {p.name for p in target.payloads}:
        valid = ", ".join(p.name for p in target.payloads)
        raise GrafanaInputError(
            f"target {echo(metric)} has no payload {echo(name)}; payloads: {valid}"
        )
    if name == "series":
        return [{"value": s.name} for s in repository.list_series(session)]
    if name in ("profile", "profiles"):
        return [
            {"label": f"{p.name} ({p.gpu_type}, {p.model})", "value": p.name}
            for p in repository.list_gpu_profiles(session)
        ]
    if name == "pool":
        return [
            {"label": f"{p.name} ({count(len(p.members), 'member')})", "value": p.name}
            for p in pools.list_pools(session)
        ]
    if metric == "forecast" and name == "metric":
        return [{"value": m} for m in _forecast_metrics(session, payload)]
    values = STATIC_OPTIONS.get((metric, name))
    return None if values is None else [{"value": v} for v in values]


def _forecast_metrics(session: Session, payload: dict[str, Any]) -> tuple[str, ...]:
    """With a series chosen, only the metrics it has a complete forecast for."""
    every = tuple(series_targets.FORECAST_METRICS)
    chosen = text_list(payload, "series")
    if len(chosen) != 1:
        return every
    try:
        series = repository.get_series(session, name=chosen[0])
    except LookupError:
        return every
    available = [
        m
        for m, (run_metric, _) in series_targets.FORECAST_METRICS.items()
        if forecast_store.latest_run(session, series_id=series.id, metric=run_metric)
    ]
    return tuple(available) or every


def metric_definitions(session: Session, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``/metrics`` answer: every target with its payload editors and their options."""
    out = []
    for target in TARGETS.values():
        payloads = []
        for item in target.payloads:
            entry: dict[str, Any] = {"label": item.label, "name": item.name, "type": item.kind}
            if item.placeholder:
                entry["placeholder"] = item.placeholder
            if item.reload_metric:
                entry["reloadMetric"] = True
            if item.kind != "input":
                options = payload_options(
                    session, metric=target.name, name=item.name, payload=payload
                )
                entry["options"] = options or []
            payloads.append(entry)
        out.append({"label": target.label, "value": target.name, "payloads": payloads})
    return out


VARIABLES: dict[str, Callable[[Session], list[str]]] = {
    "series": lambda s: [x.name for x in repository.list_series(s)],
    "profiles": lambda s: [p.name for p in repository.list_gpu_profiles(s)],
    "metrics": lambda _: list(series_targets.HISTORY_METRICS),
    "forecast_metrics": lambda _: list(series_targets.FORECAST_METRICS),
    "bands": lambda _: list(series_targets.FORECAST_BANDS),
    "plan_bands": lambda _: list(plan_targets.PLAN_BANDS),
    "pools": lambda s: [p.name for p in pools.list_pools(s)],
    "targets": lambda _: list(TARGETS),
}


def variable_values(session: Session, query: str) -> list[dict[str, str]]:
    if query not in VARIABLES:
        raise GrafanaInputError(
            f"unknown variable query {echo(query)}; valid queries: {', '.join(VARIABLES)}"
        )
    return [{"__text": v, "__value": v} for v in VARIABLES[query](session)]
