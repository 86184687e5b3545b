"""``/metrics`` in Prometheus text format: HTTP traffic, job and forecast freshness, and the
plans of shared pools.

HTTP counters live in a registry owned by the app (several apps in one process — tests — do
not collide). Job and forecast gauges are read from the database at scrape time, because the
nightly job runs in another process (cron, a CronJob or ``gpucast schedule``).

For alerts: ``gpucast_plan_stale{series,metric} == 1`` when the latest complete forecast was
trained more than 36 h ago (the plans built from it are served as stale), and
``gpucast_forecast_trained_age_seconds`` for a threshold of your own. The hourly loop:
``gpucast_source_import_failures{series} > 0`` when a series' last import from its source
failed (the value counts the failures in a row), ``gpucast_source_last_success_timestamp_seconds``
and ``gpucast_hourly_last_run_*`` for the cycle as a whole; the same three named
``gpucast_serving_source_*`` for deployments' serving sources, with
``gpucast_serving_source_hours_skipped`` (hours measured without traffic, p95 or replicas).
Trained-age and staleness follow the latest complete run of any kind, so an hourly refresh
keeps them low between nights.

Band auto, under the default plan parameters: ``gpucast_plan_band_headroom{series,profile}``
is the headroom over the point forecast the newest stored choice sizes on (for a deployed
series, the choice of its deployment: its profile, at its SLO) (1.15 for
yhat x 1.15; absent while auto is not calibrated; ``gpucast_plan_band_quantile`` only for a
choice stored before auto calibrated a headroom) and ``gpucast_plan_band_met`` is 1 when its
replay met the risk target, 0 when no candidate did or auto could not be calibrated. All read
stored choices only: a scrape never calibrates.

Shared pools, under the default plan parameters (:mod:`app.api.pool_metrics`):
``gpucast_pool_nodes{pool}`` this hour, ``gpucast_pool_peak_nodes``,
``gpucast_pool_reserved_nodes``, ``gpucast_pool_cost_usd`` (the plan's total),
``gpucast_pool_throttled_hours``, ``gpucast_pool_member_shortfall_gpus{pool,member,priority}``
and ``gpucast_pool_member_rate_limit_rps{pool,member}`` this hour, and
``gpucast_pool_planned{pool} == 0`` while none of a pool's members can be planned.

Drift of load-test profiles against their production hours (:mod:`app.api.profile_metrics`):
``gpucast_profile_drift_hours{profile} >= 3`` when three of the newest six hours served a p95
more than 1.2x what the load test predicts at their load and mix;
``gpucast_profile_latency_ratio{profile,latency}`` and ``gpucast_profile_production_hours``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.band_metrics import band_choice_metrics, stored_band_choices
from app.api.deps import ReadAuth
from app.api.plan_metrics import series_plan_metrics
from app.api.pool_metrics import pool_metrics
from app.api.profile_metrics import profile_drift_metrics
from app.db.models import ForecastRun, JobRun, Series, SeriesSource
from app.db.serving_models import ServingSource
from app.plans import STALE_AFTER

logger = logging.getLogger(__name__)


def _latest_trained_until(session: Session) -> list[Row[Any]]:
    """(series, metric, trained_until) of the latest complete run of every series x metric."""
    latest = (
        select(func.max(ForecastRun.id).label("id"))
        .where(ForecastRun.status == "complete")
        .group_by(ForecastRun.series_id, ForecastRun.metric)
        .subquery()
    )
    return list(
        session.execute(
            select(Series.name, ForecastRun.metric, ForecastRun.trained_until)
            .join(latest, latest.c.id == ForecastRun.id)
            .join(Series, Series.id == ForecastRun.series_id)
        ).all()
    )


def _freshness(rows: list[Row[Any]], now: datetime) -> Iterator[Metric]:
    trained_age = GaugeMetricFamily(
        "gpucast_forecast_trained_age_seconds",
        "Now minus trained-until (the newest hour of history) of the latest complete forecast",
        labels=["series", "metric"],
    )
    stale = GaugeMetricFamily(
        "gpucast_plan_stale",
        f"1 when the latest complete forecast was trained more than "
        f"{STALE_AFTER.total_seconds() / 3600:g} h ago (its plans are stale), else 0",
        labels=["series", "metric"],
    )
    for name, metric, trained_until in rows:
        if trained_until is None:  # a plan without a training cut-off is stale
            stale.add_metric([name, metric], 1)
            continue
        trained = trained_until if trained_until.tzinfo else trained_until.replace(tzinfo=UTC)
        age = now - trained
        trained_age.add_metric([name, metric], age.total_seconds())
        stale.add_metric([name, metric], 1 if age > STALE_AFTER else 0)
    yield from (trained_age, stale)


def _last_job(session: Session, name: str) -> JobRun | None:
    return session.scalar(
        select(JobRun)
        .where(JobRun.name == name, JobRun.finished_at.is_not(None))
        .order_by(JobRun.id.desc())
        .limit(1)
    )


def _hourly(job: JobRun | None) -> Iterator[Metric]:
    last = GaugeMetricFamily(
        "gpucast_hourly_last_run_timestamp_seconds",
        "When the last finished hourly cycle (import, refresh, retention) ended (Unix time)",
    )
    duration = GaugeMetricFamily(
        "gpucast_hourly_last_run_duration_seconds", "Wall time of the last finished hourly cycle"
    )
    failures = GaugeMetricFamily(
        "gpucast_hourly_last_run_failures",
        "Source imports, refreshes and steps that failed in the last hourly cycle",
    )
    if job is not None and job.finished_at is not None:
        last.add_metric([], job.finished_at.timestamp())
        duration.add_metric([], job.duration_s or 0.0)
        failures.add_metric([], job.failed)
    yield from (last, duration, failures)


def _sources(
    rows: list[Row[Any]], *, prefix: str = "gpucast_source", whose: str = "the series' source"
) -> Iterator[Metric]:
    streak = GaugeMetricFamily(
        f"{prefix}_import_failures",
        f"Failed imports in a row from {whose} (0 after a successful one)",
        labels=["series"],
    )
    total = CounterMetricFamily(
        f"{prefix}_imports_failed",
        f"Failed imports from {whose} since it was set",
        labels=["series"],
    )
    success = GaugeMetricFamily(
        f"{prefix}_last_success_timestamp_seconds",
        f"When the last successful import from {whose} ran (Unix time)",
        labels=["series"],
    )
    for name, consecutive, failures_total, last_success, *_ in rows:
        streak.add_metric([name], consecutive or 0)
        total.add_metric([name], failures_total or 0)
        if last_success is not None:
            stamp = last_success if last_success.tzinfo else last_success.replace(tzinfo=UTC)
            success.add_metric([name], stamp.timestamp())
    yield from (streak, total, success)


def _serving_sources(rows: list[Row[Any]]) -> Iterator[Metric]:
    yield from _sources(
        rows, prefix="gpucast_serving_source", whose="the deployment's serving source"
    )
    skipped = CounterMetricFamily(
        "gpucast_serving_source_hours_skipped",
        "Closed hours the serving source measured without traffic, p95 or replicas (not stored)",
        labels=["series"],
    )
    for name, *_, hours_skipped in rows:
        skipped.add_metric([name], hours_skipped or 0)
    yield skipped


def _import_state(session: Session, model: Any, *extra: Any) -> list[Row[Any]]:
    return list(
        session.execute(
            select(
                Series.name,
                model.consecutive_failures,
                model.failures_total,
                model.last_success_at,
                *extra,
            ).join(Series, Series.id == model.series_id)
        ).all()
    )


class DatabaseCollector(Collector):
    def __init__(self, app: FastAPI) -> None:
        self._app = app

    def collect(self) -> Iterator[Metric]:
        database = getattr(self._app.state, "database", None)
        if database is None:
            return
        now = datetime.now(UTC)
        last = GaugeMetricFamily(
            "gpucast_nightly_last_run_timestamp_seconds",
            "When the last finished nightly run ended (Unix time)",
        )
        duration = GaugeMetricFamily(
            "gpucast_nightly_last_run_duration_seconds",
            "Wall time of the last finished nightly run",
        )
        failures = GaugeMetricFamily(
            "gpucast_nightly_last_run_failures",
            "Series x metric forecasts that failed in the last run",
        )
        age = GaugeMetricFamily(
            "gpucast_forecast_age_seconds",
            "Age of the latest complete forecast",
            labels=["series", "metric"],
        )
        try:
            with database.transaction() as session:
                job = _last_job(session, "nightly")
                hourly = _last_job(session, "hourly")
                sources = _import_state(session, SeriesSource)
                serving = _import_state(session, ServingSource, ServingSource.hours_skipped_total)
                latest = session.execute(
                    select(Series.name, ForecastRun.metric, func.max(ForecastRun.created_at))
                    .join(Series, Series.id == ForecastRun.series_id)
                    .where(ForecastRun.status == "complete")
                    .group_by(Series.name, ForecastRun.metric)
                ).all()
                trained = _latest_trained_until(session)
                choices = stored_band_choices(session)
        except Exception:  # a scrape must not fail because the database is down
            return
        if job is not None and job.finished_at is not None:
            last.add_metric([], job.finished_at.timestamp())
            duration.add_metric([], job.duration_s or 0.0)
            failures.add_metric([], job.failed)
        for name, metric, created in latest:
            created = created if created.tzinfo else created.replace(tzinfo=UTC)
            age.add_metric([name, metric], (now - created).total_seconds())
        yield from (last, duration, failures, age)
        yield from _freshness(trained, now)
        yield from band_choice_metrics(choices)
        yield from _hourly(hourly)
        yield from _sources(sources)
        yield from _serving_sources(serving)
        cache = getattr(self._app.state, "plan_cache", None)
        try:
            yield from series_plan_metrics(database, cache=cache, now=now)
        except Exception:  # a scrape must not fail because one plan cannot be read
            logger.warning("per-series plan gauges failed", exc_info=True)
        yield from pool_metrics(database, cache=cache, now=now)
        try:
            yield from profile_drift_metrics(database, now=now)
        except Exception:  # a scrape must not fail because the database is down
            logger.warning("per-profile drift gauges failed", exc_info=True)


class MeasureMiddleware:
    """Counts and times every HTTP request by route template. A plain ASGI middleware: the
    ``@app.middleware("http")`` form wraps each request in extra tasks and streams, which cost
    more than the cached reads it measures."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        requests_total: Counter,
        latency: Histogram,
        routes: Callable[[], list[BaseRoute]],
    ) -> None:
        self.app = app
        self.requests_total = requests_total
        self.latency = latency
        self._routes = routes
        self._templates: dict[int, str] | None = None

    def _template(self, scope: Scope) -> str:
        """The route template that served ``scope``: FastAPI routes put themselves in the scope;
        plain Starlette routes (/openapi.json) and mounts (the docs' assets) only their
        endpoint, which is looked up among the app's routes."""
        route = scope.get("route")
        if route is not None and hasattr(route, "path"):
            return str(route.path)
        endpoint = scope.get("endpoint")
        if endpoint is None:
            return "unmatched"
        if self._templates is None:  # routes are all added before the first request
            self._templates = {
                id(r.app if isinstance(r, Mount) else getattr(r, "endpoint", None)): (
                    f"{r.path}/{{path}}" if isinstance(r, Mount) else r.path
                )
                for r in self._routes()
                if isinstance(r, Mount | Route)
            }
        return self._templates.get(id(endpoint), "unmatched")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before starting a response

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            template = self._template(scope)
            method = scope["method"]
            self.requests_total.labels(method, template, str(status)).inc()
            self.latency.labels(method, template).observe(time.perf_counter() - started)


def install(app: FastAPI) -> None:
    registry = CollectorRegistry()
    requests_total = Counter(
        "gpucast_http_requests_total",
        "HTTP requests",
        ["method", "route", "status"],
        registry=registry,
    )
    latency = Histogram(
        "gpucast_http_request_duration_seconds",
        "HTTP request latency",
        ["method", "route"],
        registry=registry,
        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    )
    registry.register(DatabaseCollector(app))

    app.add_middleware(
        MeasureMiddleware,
        requests_total=requests_total,
        latency=latency,
        routes=lambda: list(app.routes),
    )

    # It lists every series name, so with GPUCAST_READ_REQUIRES_KEY it needs a key like any
    # other read (Prometheus: ``authorization: {credentials: <key>}`` in the scrape config).
    @app.get("/metrics", include_in_schema=False, dependencies=[ReadAuth])
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
