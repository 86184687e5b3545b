"""The FastAPI application, built by :func:`create_app`."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi_offline import FastAPIOffline

from app import __version__
from app.api import errors, guard, metrics
from app.api.deadline import ReadDeadlineMiddleware
from app.api.deps import check_key_config
from app.api.response_cache import ClearOnWriteMiddleware, ResponseCache
from app.api.routes import (
    calculators,
    capacity,
    charts,
    deployments,
    events,
    forecasts,
    gpu_profiles,
    grafana,
    health,
    loadtests,
    observations,
    overview,
    pools,
    profile_observations,
    series,
    sources,
)
from app.db import open_database
from app.plans import PlanCache
from app.settings import Settings, get_settings

__all__ = ["create_app"]


_frozen = False


def _freeze_startup_objects() -> None:
    """Move what start-up made (modules, the app, the engine: most of the heap) out of the
    garbage collector's reach, once per process. A full collection otherwise walks all of it
    each time, a pause of 100-400 ms under load that every request in flight waits for; after
    this it walks only what serving made."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the gpucast API. The database engine is made in the lifespan, not at import."""
    settings = settings or get_settings()
    check_key_config(settings.api_key_list)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = open_database(settings.database_url, timeouts=settings.database_timeouts())
        try:
            database.ensure_schema(auto_migrate=settings.should_auto_migrate)
            app.state.database = database
            _freeze_startup_objects()
            yield
        finally:
            database.dispose()

    # /docs and /redoc load their scripts and styles from the package, never from a CDN: GPU
    # fleets often run on clusters without internet access.
    app = FastAPIOffline(
        static_url="/static/docs",
        swagger_ui_parameters={"validatorUrl": None},
        title="gpucast",
        version=__version__,
        summary="Forecast LLM inference load and turn it into GPU counts, costs and schedules.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.plan_cache = PlanCache()
    app.state.response_cache = ResponseCache(ttl_s=settings.read_cache_ttl_s)
    app.add_middleware(ClearOnWriteMiddleware, cache=app.state.response_cache)
    app.add_middleware(
        ReadDeadlineMiddleware,
        deadline_s=settings.read_deadline_s,
        write_deadline_s=settings.write_deadline_s,
    )
    guard.install(app, max_body_bytes=settings.max_body_bytes)
    if settings.cors_origin_list:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origin_list,
            allow_methods=["GET", "POST", "PUT", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
        )
    errors.install(app)
    metrics.install(app)
    app.include_router(health.router)
    app.include_router(series.collection)
    app.include_router(observations.router)
    app.include_router(events.router)
    app.include_router(gpu_profiles.router)
    app.include_router(loadtests.router)
    app.include_router(profile_observations.router)
    app.include_router(forecasts.router)
    app.include_router(capacity.router)
    app.include_router(calculators.router)
    app.include_router(grafana.router)
    app.include_router(charts.router)
    app.include_router(overview.router)
    app.include_router(sources.router)
    app.include_router(deployments.router)
    app.include_router(pools.collection)
    app.include_router(pools.item)  # after every /v1/pools/{name}/… route (pools.collection)
    app.include_router(series.item)  # last: its {name:path} would shadow sub-resources
    return app
