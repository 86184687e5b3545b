"""The HTML overview page at ``/``: every series with its chart, model and peak GPUs."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from app import plans
from app.api.deps import DatabaseDep, ReadAuth
from app.api.routes.charts import DaysParam, ProfileParam
from app.db import Database
from app.views import overview

router = APIRouter(tags=["ui"])
MAX_PAGE = 200_000


@router.get("/", dependencies=[ReadAuth], response_class=HTMLResponse, include_in_schema=False)
async def overview_page(
    request: Request,
    database: DatabaseDep,
    metric: Annotated[Literal["requests", "tokens"], Query()] = "requests",
    days: DaysParam = 7,
    profile: ProfileParam = None,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE, description="page of series cards")] = 1,
) -> HTMLResponse:
    cache = getattr(request.app.state, "plan_cache", None)
    data = await run_in_threadpool(_load, database, profile, cache, page)
    html = overview.render_page(data, metric=metric, days=days)
    return HTMLResponse(html, headers={"Cache-Control": "no-cache"})


def _load(
    database: Database, profile: str | None, cache: plans.PlanCache | None, page: int
) -> overview.Overview:
    with database.read_transaction() as session:
        return overview.load_overview(
            session,
            profile_name=profile,
            plan_cache=cache,
            offset=(page - 1) * overview.PAGE_SIZE,
            limit=overview.PAGE_SIZE,
        )
