"""Forecasts of one series: run now, read the latest, list runs, accuracy."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from app.api.deps import DatabaseDep, ReadAuth, SessionDep, WriteAuth
from app.common import options
from app.db import Database, repository
from app.db.models import ForecastRun
from app.errors import InputError
from app.forecasts import store as forecast_store
from app.forecasts.work import ItemResult, run_item
from app.jobs import ForecastOptions
from app.jobs.nightly import build_items
from app.plans import accuracy
from app.profiles.deployments import optional_binding

router = APIRouter(prefix="/v1/series", tags=["forecasts"])

MetricParam = Annotated[Literal["requests", "tokens"], Query(description="forecast metric")]


def run_dict(run: ForecastRun, series: str, points: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": run.id,
        "series": series,
        "metric": run.metric,
        "status": run.status,
        "model": run.model,
        "reason": run.reason,
        "trained_until": run.trained_until,
        "horizon": run.horizon,
        "backtest_metric": run.backtest_metric,
        "backtest_error": run.backtest_error,
        "duration_s": run.duration_s,
        "created_at": run.created_at,
        "error": run.error,
        "kind": run.kind,
        "parent_id": run.parent_id,
    }
    if points is not None:
        out["scores"] = run.scores
        out["notes"] = run.notes
        out["anomalies"] = run.anomalies
        values = [c for c in points.columns if c != "ds"]  # bands, and quantiles if stored
        out["points"] = [
            {"ds": row["ds"].to_pydatetime(), **{c: float(row[c]) for c in values}}
            for row in points.to_dict(orient="records")
        ]
    return out


@router.post("/{name:path}/forecast", dependencies=[WriteAuth], responses={404: {}, 422: {}})
async def run_forecast_now(
    name: str,
    database: DatabaseDep,
    metric: Annotated[
        Literal["requests", "tokens", "prompt_tokens", "completion_tokens"] | None,
        Query(
            description="one metric (default: requests and tokens, and the prompt/completion "
            "mix of a series deployed at an SLO on a load-test profile)"
        ),
    ] = None,
    models: Annotated[str | None, Query(description="comma-separated candidates")] = None,
    windows: Annotated[
        int | None,
        Query(
            ge=1,
            le=options.FORECAST_WINDOWS_MAX,
            description=f"backtest windows (default {options.FORECAST_WINDOWS})",
        ),
    ] = None,
) -> dict[str, Any]:
    """Backtest, select and forecast this series now (synchronously); returns the new runs."""
    options = ForecastOptions(
        series=(name,),
        metrics=(metric,) if metric else ("requests", "tokens"),
        models=tuple(m.strip() for m in models.split(",") if m.strip()) if models else None,
        windows=windows,
        workers=1,
    )
    options.validate()
    items, skipped = await run_in_threadpool(build_items, database, options)
    if not items:
        raise InputError(f"series {name!r} has no history to forecast ({'; '.join(skipped)})")
    results = [await run_in_threadpool(run_item, item) for item in items]
    runs = await run_in_threadpool(_save_runs, database, name, results)
    return {"series": name, "runs": runs, "skipped": skipped}


def _save_runs(database: Database, name: str, results: list[ItemResult]) -> list[dict[str, Any]]:
    runs = []
    with database.transaction() as session:
        series = repository.get_series(session, name=name)
        for result in results:
            run = forecast_store.save_run(session, series_id=series.id, result=result)
            # A failed run has no points: an empty frame, so it is reported like a complete one.
            points = forecast_store.run_points(session, run_id=run.id)
            runs.append(run_dict(run, name, points))
    return runs


@router.get("/{name:path}/forecast/runs", dependencies=[ReadAuth], responses={404: {}})
def list_forecast_runs(
    name: str,
    session: SessionDep,
    metric: Annotated[
        Literal["requests", "tokens", "prompt_tokens", "completion_tokens"] | None, Query()
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> list[dict[str, Any]]:
    """Every stored run, newest first (complete and failed), for audit."""
    series = repository.get_series(session, name=name)
    return [
        run_dict(r, name)
        for r in forecast_store.list_runs(session, series_id=series.id, metric=metric, limit=limit)
    ]


@router.get("/{name:path}/forecast/accuracy", dependencies=[ReadAuth], responses={404: {}})
def forecast_accuracy(
    name: str,
    session: SessionDep,
    metric: MetricParam = "requests",
    limit: Annotated[int, Query(ge=1, le=365)] = 30,
    profile: Annotated[str | None, Query(max_length=100)] = None,
) -> dict[str, Any]:
    """How past runs fared against the actuals that arrived since: WAPE, MASE, hours above the
    80/95 % bands and, with a GPU profile (given, else the series' deployment), hours where
    actual load exceeded planned capacity."""
    series = repository.get_series(session, name=name)
    binding = optional_binding(
        session, series_name=name, profile_name=profile or None, fallback="none"
    )
    gpu_profile = (
        repository.get_gpu_profile(session, name=binding.profile) if binding is not None else None
    )
    return accuracy.series_accuracy(
        session,
        series_id=series.id,
        series_name=name,
        metric=metric,
        limit=limit,
        profile=gpu_profile,
    )


@router.get("/{name:path}/forecast", dependencies=[ReadAuth], responses={404: {}})
def latest_forecast(
    name: str, session: SessionDep, metric: MetricParam = "requests"
) -> dict[str, Any]:
    """The freshest complete run (a nightly fit, or its hourly refresh: ``kind``,
    ``parent_id``): points with bands and quantiles q50 … q99, the chosen model and every
    candidate's backtest scores."""
    series = repository.get_series(session, name=name)
    run = forecast_store.require_latest_run(
        session, series_id=series.id, series_name=name, metric=metric
    )
    return run_dict(run, name, forecast_store.run_points(session, run_id=run.id))
