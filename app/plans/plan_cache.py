"""The served plans' cache: a small thread-safe LRU of computed plans, keyed by what they
were computed from (:func:`cache_key_row`: one query, read by
:func:`app.plans.service.series_plan`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session

from app.db.models import (
    ForecastRun,
    GpuProfile,
    GpuProfileLoadTest,
    Observation,
    ProfileObservation,
    Series,
    SeriesDeployment,
)
from app.plans.slo_sizing import MIX_METRICS
from app.profiles.slo_capacity import PRODUCTION_WINDOW

__all__ = ["PlanCache", "cache_key_row"]


class PlanCache:
    """A small thread-safe LRU of computed plans (:class:`app.plans.service.SeriesPlan`)."""

    def __init__(self, size: int = 256) -> None:
        self._items: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Any | None:
        with self._lock:
            plan = self._items.get(key)
            if plan is not None:
                self._items.move_to_end(key)
            return plan

    def put(self, key: tuple[Any, ...], plan: Any) -> None:
        with self._lock:
            self._items[key] = plan
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_PROFILE_FIELDS = (
    GpuProfile.name,
    GpuProfile.tokens_per_s_per_gpu,
    GpuProfile.gpus_per_replica,
    GpuProfile.usd_per_hour_on_demand,
    GpuProfile.usd_per_hour_reserved,
    GpuProfile.usd_per_hour_spot,
)


def _latest_run_id(metric: str) -> Any:
    return (
        select(func.max(ForecastRun.id))
        .where(
            ForecastRun.series_id == Series.id,
            ForecastRun.metric == metric,
            ForecastRun.status == "complete",
        )
        .scalar_subquery()
    )


def _newest_hour() -> Any:
    return (
        select(func.max(Observation.hour))
        .where(Observation.series_id == Series.id)
        .scalar_subquery()
    )


def _loadtest_id() -> Any:
    return (
        select(GpuProfileLoadTest.id)
        .where(GpuProfileLoadTest.gpu_profile_id == GpuProfile.id)
        .scalar_subquery()
    )


def _production_stamp() -> Any:
    """When the profile's production hours last changed (a plan at an SLO sizes on them and
    notes drift)."""
    return (
        select(func.max(ProfileObservation.created_at))
        .where(ProfileObservation.gpu_profile_id == GpuProfile.id)
        .scalar_subquery()
    )


def _production_in_window(now: datetime) -> Any:
    """How many of the profile's production hours are inside the window a plan sizes on: an
    hour ageing out (or removed) changes it where the stamp would not."""
    return (
        select(func.count())
        .select_from(ProfileObservation)
        .where(
            ProfileObservation.gpu_profile_id == GpuProfile.id,
            ProfileObservation.hour >= now - PRODUCTION_WINDOW,
        )
        .scalar_subquery()
    )


def cache_key_row(
    session: Session, *, series_name: str, profile_name: str | None
) -> Row[Any] | None:
    """Latest complete run ids (tokens, requests), the newest observed hour (peak factors are
    learned from the history), the series' deployment SLO and the profile's figures (the
    given one, else the deployment's), in one query; None when the series or the profile does
    not exist or no profile is given or deployed (the full path then says which)."""
    profile_join = (
        GpuProfile.name == profile_name
        if profile_name is not None
        else GpuProfile.id == SeriesDeployment.gpu_profile_id
    )
    return session.execute(
        select(
            # id and created_at: a series deleted and created again is a different series
            Series.id,
            Series.created_at,
            _latest_run_id("tokens"),
            _latest_run_id("requests"),
            *(_latest_run_id(metric) for metric in MIX_METRICS),
            _newest_hour(),
            SeriesDeployment.ttft_p95_s,
            SeriesDeployment.tpot_p95_s,
            _loadtest_id(),
            _production_stamp(),
            _production_in_window(datetime.now(UTC)),
            *_PROFILE_FIELDS,
        )
        .select_from(Series)
        .outerjoin(SeriesDeployment, SeriesDeployment.series_id == Series.id)
        .join(GpuProfile, profile_join)
        .where(Series.name == series_name)
    ).first()
