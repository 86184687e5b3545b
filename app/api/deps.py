"""Dependencies shared by the routes: settings, database session, API-key checks."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator, Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.db import Database
from app.errors import AuthError, InputError
from app.settings import Settings


async def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_database(request: Request) -> Database:
    database: Database = request.app.state.database
    return database


async def sqlite_write_turn(
    request: Request, database: Annotated[Database, Depends(get_database)]
) -> AsyncIterator[None]:
    """On SQLite, one write request of this process at a time holds a database session, from
    its first statement to its commit, and the others wait here, on the event loop, holding no
    worker thread. SQLite runs one writer at a time anyway; without this turn, writers blocked
    on its lock (up to its busy timeout) held every worker thread while the writer holding the
    lock waited for one to commit (45 concurrent writers: 503s and a p99 of 30 s)."""
    if request.method in ("GET", "HEAD") or database.engine.dialect.name != "sqlite":
        yield
        return
    state = request.app.state.__dict__
    turn: asyncio.Lock = state.setdefault("sqlite_write_turn", asyncio.Lock())
    async with turn:
        yield


def get_session(
    request: Request,
    database: Annotated[Database, Depends(get_database)],
    _turn: Annotated[None, Depends(sqlite_write_turn, scope="function")],
) -> Iterator[Session]:
    """The request's unit of work. Function-scoped: it commits when the route returns, before
    the status line is sent, so a 2xx means stored and a failed commit is answered (503/5xx)
    instead of being logged after the client was told "created". GET and HEAD requests read
    (on SQLite without taking the write lock)."""
    reads = request.method in ("GET", "HEAD")
    with database.read_transaction() if reads else database.transaction() as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
DatabaseDep = Annotated[Database, Depends(get_database)]
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def _presented_key(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    header = request.headers.get("x-api-key")
    return header.strip() if header else None


def check_key_config(keys: list[str]) -> None:
    """Refuse to start with a key a client cannot send as typed: HTTP header values are bytes,
    which clients encode differently beyond ASCII (Latin-1, UTF-8 or not at all), so a key
    must be visible ASCII (``!`` to ``~``), e.g. from ``openssl rand -hex 32``."""
    for position, key in enumerate(keys, start=1):
        bad = next((c for c in key if not "!" <= c <= "~"), None)
        if bad is not None:
            raise InputError(
                f"GPUCAST_API_KEYS: key {position} of {len(keys)} contains U+{ord(bad):04X}; "
                "API keys must be visible ASCII characters (no spaces, no accents), e.g. from "
                "'openssl rand -hex 32'"
            )


def _key_is_valid(presented: str, keys: list[str]) -> bool:
    # Compare against every key so timing does not reveal which one matched.
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(presented.encode(), key.encode())
    return matched


def check_key(request: Request, settings: Settings) -> None:
    keys = settings.api_key_list
    if not keys:
        return
    presented = _presented_key(request)
    if presented is None:
        raise AuthError("missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key'")
    if not _key_is_valid(presented, keys):
        raise AuthError("invalid API key")


async def require_write_key(request: Request, settings: SettingsDep) -> None:
    check_key(request, settings)


async def require_read_key(request: Request, settings: SettingsDep) -> None:
    if settings.read_requires_key:
        check_key(request, settings)


WriteAuth = Depends(require_write_key)
ReadAuth = Depends(require_read_key)
