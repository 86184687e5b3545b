"""From a stored forecast to a GPU plan and its cost (the service side of capacity/).

Plans are computed from stored forecast runs only — nothing is refitted on read — and cached
per (series, latest run ids, profile, parameters). A cached read costs one query (the latest
complete run ids and the profile's figures, in one round trip) and a dict lookup.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd
from pydantic import TypeAdapter
from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session

import capacity
from app import forecast_store, repository
from app.db.models import ForecastRun, GpuProfile, Series
from app.errors import InputError, NotFoundError


@dataclass(frozen=True)
class PlanParams:
    band: str = "hi_80"
    utilization_target: float = 0.75
    safety_factor: float = 1.2
    min_gpus: int = 1


@dataclass
class SeriesPlan:
    series: str
    profile: str
    source: str  # "tokens forecast" | "requests forecast x tokens per request"
    run_ids: tuple[int, ...]
    model: str | None
    trained_until: Any
    tokens_per_request: float | None
    params: PlanParams
    plan: capacity.GPUPlan
    cost: capacity.PlanCost | None
    _json: bytes | None = field(default=None, repr=False, compare=False)

    def as_json(self) -> bytes:
        """:meth:`as_dict` encoded as JSON once per plan (cached plans are served as bytes)."""
        if self._json is None:
            self._json = _JSON.dump_json(self.as_dict())
        return self._json

    def as_dict(self) -> dict[str, Any]:
        frame = self.plan.frame
        return {
            "series": self.series,
            "profile": self.profile,
            "source": self.source,
            "forecast_run_ids": list(self.run_ids),
            "model": self.model,
            "trained_until": self.trained_until,
            "tokens_per_request": self.tokens_per_request,
            **asdict(self.params),
            "per_gpu_tokens_per_s": self.plan.per_gpu_tokens_per_s,
            "gpus_per_replica": self.plan.gpus_per_replica,
            "peak_gpus": int(self.plan.peak_gpus),
            "peak_replicas": int(self.plan.peak_replicas),
            "gpu_hours": float(self.plan.gpu_hours),
            "cost": _cost_dict(self.cost),
            "hours": [
                {
                    "hour": row.hour.to_pydatetime(),
                    "load_tokens_per_s": float(row.load_tokens_per_s),
                    "gpus": int(row.gpus),
                    "replicas": int(row.replicas),
                    "expected_utilization": float(row.expected_utilization),
                }
                for row in frame.itertuples(index=False)
            ],
        }


_JSON: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def _cost_dict(cost: capacity.PlanCost | None) -> dict[str, float] | None:
    if cost is None:
        return None
    return {k: (float(v) if isinstance(v, int | float) else v) for k, v in asdict(cost).items()}


class PlanCache:
    """A small thread-safe LRU of computed plans."""

    def __init__(self, size: int = 256) -> None:
        self._items: OrderedDict[tuple[Any, ...], SeriesPlan] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> SeriesPlan | None:
        with self._lock:
            plan = self._items.get(key)
            if plan is not None:
                self._items.move_to_end(key)
            return plan

    def put(self, key: tuple[Any, ...], plan: SeriesPlan) -> None:
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


def _cache_key_row(session: Session, *, series_name: str, profile_name: str) -> Row[Any] | None:
    """Latest complete run ids (tokens, requests) and the profile's figures, in one query;
    None when the series or the profile does not exist (the full path then says which)."""
    return session.execute(
        select(
            # id and created_at: a series deleted and created again is a different series
            Series.id,
            Series.created_at,
            _latest_run_id("tokens"),
            _latest_run_id("requests"),
            *_PROFILE_FIELDS,
        )
        .select_from(Series)
        .join(GpuProfile, GpuProfile.name == profile_name)
        .where(Series.name == series_name)
    ).first()


def series_plan(
    session: Session,
    *,
    series_name: str,
    profile_name: str,
    params: PlanParams,
    cache: PlanCache | None = None,
) -> SeriesPlan:
    """The GPU plan for tomorrow from the latest complete forecast of a series."""
    key = None
    if cache is not None:
        row = _cache_key_row(session, series_name=series_name, profile_name=profile_name)
        if row is not None:
            key = (series_name, *row, params)
            if (hit := cache.get(key)) is not None:
                return hit
    series = repository.get_series(session, name=series_name)
    profile = repository.get_gpu_profile(session, name=profile_name)
    tokens_run = forecast_store.latest_run(session, series_id=series.id, metric="tokens")
    requests_run = None
    if tokens_run is None:
        requests_run = forecast_store.latest_run(session, series_id=series.id, metric="requests")
        if requests_run is None:
            raise NotFoundError(
                f"series {series_name!r} has no complete forecast yet; run "
                f"'gpucast forecast {series_name}' or POST /v1/series/{series_name}/forecast"
            )
    run = tokens_run or requests_run
    assert run is not None
    plan = _build(
        session,
        series_name=series_name,
        series_id=series.id,
        run=run,
        uses_tokens=tokens_run is not None,
        profile=profile,
        params=params,
    )
    if cache is not None and key is not None:
        cache.put(key, plan)
    return plan


def _build(
    session: Session,
    *,
    series_name: str,
    series_id: int,
    run: ForecastRun,
    uses_tokens: bool,
    profile: GpuProfile,
    params: PlanParams,
) -> SeriesPlan:
    forecast = forecast_store.run_points(session, run_id=run.id)
    tokens_per_request = None
    if not uses_tokens:
        history = repository.observations_frame(session, series_id=series_id)
        try:
            tokens_per_request = capacity.tokens_per_request_from_history(
                history["requests"], history["total_tokens"]
            )
        except capacity.CapacityError as exc:
            raise InputError(
                f"series {series_name!r} has a requests forecast but no token history to convert "
                f"requests into tokens/s: {exc}"
            ) from exc
    try:
        plan = capacity.plan_gpus(
            forecast,
            per_gpu_tokens_per_s=profile.tokens_per_s_per_gpu,
            band=params.band,
            utilization_target=params.utilization_target,
            safety_factor=params.safety_factor,
            min_gpus=params.min_gpus,
            gpus_per_replica=profile.gpus_per_replica,
            tokens_per_request=tokens_per_request,
        )
    except capacity.CapacityError as exc:
        raise InputError(str(exc)) from exc
    cost = None
    if profile.usd_per_hour_on_demand:
        cost = capacity.plan_cost(
            plan,
            capacity.Prices(
                on_demand_usd_per_hour=profile.usd_per_hour_on_demand,
                reserved_usd_per_hour=profile.usd_per_hour_reserved,
                spot_usd_per_hour=profile.usd_per_hour_spot,
            ),
            reserved_gpus="baseline" if profile.usd_per_hour_reserved else None,
        )
    return SeriesPlan(
        series=series_name,
        profile=profile.name,
        source="tokens forecast" if uses_tokens else "requests forecast x tokens per request",
        run_ids=(run.id,),
        model=run.model,
        trained_until=run.trained_until,
        tokens_per_request=tokens_per_request,
        params=params,
        plan=plan,
        cost=cost,
    )


def history_frame(session: Session, *, series_name: str) -> pd.DataFrame:
    series = repository.get_series(session, name=series_name)
    return repository.observations_frame(session, series_id=series.id)
