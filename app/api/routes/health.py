"""Liveness and readiness. Neither waits behind application work: liveness runs on the event
loop, readiness pings the database on worker threads of its own."""

from __future__ import annotations

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.deps import DatabaseDep

router = APIRouter(tags=["health"])


#: Readiness pings at once; more wait on the event loop.
READINESS_THREADS = 2


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "database unreachable"}})
async def readyz(request: Request, database: DatabaseDep) -> JSONResponse:
    """The database is reachable."""
    state = request.app.state.__dict__
    limiter = state.get("readiness_threads")
    if limiter is None:
        limiter = state["readiness_threads"] = anyio.CapacityLimiter(READINESS_THREADS)
    try:
        await anyio.to_thread.run_sync(database.ping, limiter=limiter)
    except Exception as exc:  # any driver error means "not ready"
        return JSONResponse(
            status_code=503,
            content={
                "status": "unavailable",
                "detail": f"database unreachable: {type(exc).__name__}",
            },
            headers={"Retry-After": "5"},
        )
    return JSONResponse(content={"status": "ok", "database": "reachable"})
