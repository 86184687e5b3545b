"""Chart of one series as PNG: history, forecast with its 80/95 % bands, the GPU plan."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from app import plans
from app.api.deps import DatabaseDep, ReadAuth
from app.api.plan_query import BandParam
from app.common import options
from app.db import Database
from app.views import charts

router = APIRouter(prefix="/v1/series", tags=["charts"])

CACHE_CONTROL = "private, max-age=60"
DaysParam = Annotated[
    int,
    Query(
        ge=options.PLOT_DAYS_MIN, le=options.PLOT_DAYS_MAX, description="days of history to show"
    ),
]
ProfileParam = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=100,
        description="GPU profile (default: the series' deployment, else the first by name)",
    ),
]


@router.get(
    "/{name:path}/plot.png",
    dependencies=[ReadAuth],
    response_class=Response,
    responses={200: {"content": {"image/png": {}}}, 404: {}, 422: {}, 429: {}},
)
async def series_plot(
    name: str,
    request: Request,
    database: DatabaseDep,
    metric: Annotated[Literal["requests", "tokens"], Query()] = "requests",
    days: DaysParam = options.PLOT_DAYS,
    profile: ProfileParam = None,
    band: BandParam = options.PLOT_BAND,
) -> Response:
    """PNG chart: the last ``days`` days of history in QPS or tokens/s, the latest forecast with
    its 80 % and 95 % intervals, and tomorrow's GPU plan on the right axis (sized on ``band``,
    as the capacity endpoint sizes it; the overview passes the band its card shows)."""
    cache = getattr(request.app.state, "plan_cache", None)
    params = plans.PlanParams(band=band)
    data = await run_in_threadpool(_load, database, name, metric, days, profile, params, cache)
    etag = f'"{charts.fingerprint(data)}"'
    headers = {"Cache-Control": CACHE_CONTROL, "ETag": etag}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    png = await run_in_threadpool(charts.render_png, data)
    return Response(content=png, media_type="image/png", headers=headers)


def _load(
    database: Database,
    name: str,
    metric: str,
    days: int,
    profile: str | None,
    params: plans.PlanParams,
    cache: plans.PlanCache | None,
) -> charts.ChartData:
    # The session closes before drawing, so no connection is held while matplotlib works.
    with database.read_transaction() as session:
        return charts.load_chart_data(
            session,
            series_name=name,
            metric=metric,
            days=days,
            profile_name=profile,
            params=params,
            plan_cache=cache,
        )
