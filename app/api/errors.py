"""HTTP translation of errors, in one place: handlers keyed by exception base class."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.db import is_unavailable
from app.errors import AppError

logger = logging.getLogger(__name__)


def _json(status: int, detail: object, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail}, headers=headers)


async def app_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AppError)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
    return _json(exc.status_code, str(exc), headers)


async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """503 for a database that cannot be reached; an error on a database that still answers
    (a statement the driver refused) is a 500, not an outage."""
    database = getattr(request.app.state, "database", None)
    if not isinstance(exc, PoolTimeoutError) and not await run_in_threadpool(
        is_unavailable, exc, database
    ):
        logger.error("database error on a reachable database", exc_info=exc)
        return _json(500, "internal database error")
    logger.warning("database unavailable: %s", type(exc).__name__)
    return _json(503, "database unavailable; retry shortly", {"Retry-After": "5"})


async def database_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DBAPIError)
    if exc.connection_invalidated:
        return await database_unavailable(request, exc)
    logger.exception("database error")
    return _json(500, "internal database error")


async def integrity_error(request: Request, exc: Exception) -> JSONResponse:
    """A unique key or a foreign key refused a write: the routes check both first, so what
    reaches here is a concurrent request that created (or deleted) the same thing in between
    the check and the write. That is a conflict (409), never a server error."""
    assert isinstance(exc, IntegrityError)
    if exc.connection_invalidated:
        return await database_unavailable(request, exc)
    logger.info("integrity conflict: %s", exc.orig)
    return _json(409, conflict_message(exc))


def conflict_message(exc: IntegrityError) -> str:
    """What collided, in words: PostgreSQL names the constraint, SQLite the columns."""
    diag = getattr(exc.orig, "diag", None)
    constraint = getattr(diag, "constraint_name", None) if diag is not None else None
    sqlstate = getattr(exc.orig, "sqlstate", None)
    text = str(exc.orig).splitlines()[0] if exc.orig is not None else ""
    if sqlstate == "23503" or "FOREIGN KEY" in text:
        what = "a row it refers to was deleted or is still referred to"
    else:
        what = "it already exists (created by a concurrent request)"
    where = f" ({constraint})" if constraint else ""
    return f"conflicting write{where}: {what}; read the current state and retry"


async def validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]
    return _json(422, errors)


async def http_error(request: Request, exc: Exception) -> Response:
    """FastAPI answers a JSON body that is not UTF-8 with a bare 400; like any other invalid
    JSON (FastAPI's own ``json_invalid``) it is invalid input: a 422 that says what is wrong."""
    assert isinstance(exc, HTTPException)
    cause = exc.__cause__
    if exc.status_code == 400 and isinstance(cause, UnicodeDecodeError):
        return _json(422, f"request body is not valid UTF-8 JSON (byte {cause.start})")
    return await http_exception_handler(request, exc)


async def number_overflow(_: Request, exc: Exception) -> JSONResponse:
    """The last net under :func:`app.common.numbers.bounded_number`: a number too large to compute
    with came from the request (a float conversion overflowed); never a plain-text 500."""
    logger.warning("number overflow answered 422: %s", exc)
    return _json(422, "a number in the request is too large to compute with; use values below 1e15")


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
    app.add_exception_handler(OverflowError, number_overflow)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(OperationalError, database_unavailable)
    app.add_exception_handler(PoolTimeoutError, database_unavailable)
    app.add_exception_handler(IntegrityError, integrity_error)
    app.add_exception_handler(DBAPIError, database_error)
    document_errors(app)


ERROR_SCHEMA: dict[str, Any] = {
    "title": "Error",
    "type": "object",
    "required": ["detail"],
    "properties": {
        "detail": {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"$ref": "#/components/schemas/ValidationError"}},
            ]
        }
    },
}
_ERROR_REF = {"$ref": "#/components/schemas/Error"}
_DEFAULT_422 = "#/components/schemas/HTTPValidationError"


def _document_operation(operation: dict[str, Any]) -> None:
    for code, response in operation.get("responses", {}).items():
        if not code.startswith(("4", "5")):
            continue
        content = response.setdefault("content", {}).setdefault("application/json", {})
        if content.get("schema", {}).get("$ref") in (None, _DEFAULT_422):
            content["schema"] = _ERROR_REF


def document_errors(app: FastAPI) -> None:
    """Document every 4xx/5xx body as what the handlers above send: ``{"detail": str}``, or a
    list of field errors for request validation (FastAPI's default 422 schema has only the
    list, but a 422 from a route's own checks carries a message)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()
        schema.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
        for path in schema.get("paths", {}).values():
            for method, operation in path.items():
                if method in ("post", "put", "delete"):
                    # integrity_error: a write racing another write on the same key
                    operation.setdefault("responses", {}).setdefault(
                        "409", {"description": "Conflict"}
                    )
                _document_operation(operation)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
