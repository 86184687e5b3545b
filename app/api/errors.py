"""HTTP translation of errors, in one place: handlers keyed by exception base class."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from app.errors import AppError

logger = logging.getLogger(__name__)


def _json(status: int, detail: object, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail}, headers=headers)


async def app_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AppError)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
    return _json(exc.status_code, str(exc), headers)


async def database_unavailable(_: Request, exc: Exception) -> JSONResponse:
    logger.warning("database unavailable: %s", type(exc).__name__)
    return _json(503, "database unavailable; retry shortly", {"Retry-After": "5"})


async def database_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DBAPIError)
    if exc.connection_invalidated:
        return await database_unavailable(request, exc)
    logger.exception("database error")
    return _json(500, "internal database error")


async def validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]
    return _json(422, errors)


async def library_input_error(_: Request, exc: Exception) -> JSONResponse:
    """capacity/ and forecasting/ raise their own errors for unusable input: a 422."""
    return _json(422, str(exc))


def install(app: FastAPI) -> None:
    from capacity import CapacityError
    from forecasting import ForecastingError

    app.add_exception_handler(AppError, app_error)
    app.add_exception_handler(CapacityError, library_input_error)
    app.add_exception_handler(ForecastingError, library_input_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(OperationalError, database_unavailable)
    app.add_exception_handler(PoolTimeoutError, database_unavailable)
    app.add_exception_handler(DBAPIError, database_error)
