"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.deps import DatabaseDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "database unreachable"}})
def readyz(database: DatabaseDep) -> JSONResponse:
    """The database is reachable."""
    try:
        database.ping()
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
