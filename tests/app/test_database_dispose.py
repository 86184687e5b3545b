"""Disposing the database closes every pooled connection, also one still checked out then (a
worker finishing an abandoned read when the server stops): it is closed when it comes back,
not left open in the discarded pool until the garbage collector finds it."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from sqlalchemy import text

from app.db import Database


def _is_closed(dbapi_connection: object) -> bool:
    if isinstance(dbapi_connection, psycopg.Connection):
        return bool(dbapi_connection.closed)
    assert isinstance(dbapi_connection, sqlite3.Connection)
    try:
        dbapi_connection.execute("SELECT 1")
    except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
        return True
    return False


def test_a_connection_out_at_dispose_is_closed_when_it_comes_back(database: Database) -> None:
    idle = database.engine.connect()
    busy = database.engine.connect()
    idle_dbapi = idle.connection.dbapi_connection
    idle.close()  # back in the pool before the dispose
    busy.execute(text("SELECT 1"))
    busy_dbapi = busy.connection.dbapi_connection
    assert busy_dbapi is not idle_dbapi
    assert busy_dbapi is not None and not _is_closed(busy_dbapi)

    database.dispose()
    assert idle_dbapi is not None and _is_closed(idle_dbapi)
    assert not _is_closed(busy_dbapi)  # its worker is still using it
    busy.execute(text("SELECT 1"))
    busy.close()
    assert _is_closed(busy_dbapi)


def test_the_database_serves_again_after_a_dispose(database: Database) -> None:
    database.dispose()
    with database.engine.connect() as connection:
        assert connection.execute(text("SELECT 1")).scalar() == 1
    with database.engine.connect() as connection:  # the new pool keeps its connections
        dbapi = connection.connection.dbapi_connection
    assert dbapi is not None and not _is_closed(dbapi)


@pytest.mark.parametrize("round_trips", [1, 3])
def test_dispose_closes_what_each_round_left(database: Database, round_trips: int) -> None:
    returned = []
    for _ in range(round_trips):
        connection = database.engine.connect()
        returned.append(connection.connection.dbapi_connection)
        database.dispose()
        connection.close()
    assert all(_is_closed(dbapi) for dbapi in returned)
