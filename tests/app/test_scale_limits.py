"""Scale limits are not outages: a file with more distinct series than a statement can carry
bind parameters (65,535 on PostgreSQL, 32,766 on SQLite) is stored and refreshed in batches,
and exit code 3 ("database unavailable") is kept for a database that cannot be reached."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from app.cli import main
from app.db import Database
from app.db.models import Observation, Series

MANY = 66_000


@pytest.fixture
def db_args(database_url: str) -> list[str]:
    return ["--database-url", database_url]


def _many_series_file(path: Path, count: int) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["timestamp", "series", "requests"])
        for index in range(count):
            writer.writerow(["2026-11-30T00:00:00Z", f"svc-{index:05d}", 10])
    return path


def test_ingest_of_more_series_than_bind_parameters_is_stored(
    db_args: list[str], database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _many_series_file(tmp_path / "many.csv", MANY)
    code = main([*db_args, "ingest", "hourly", str(path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    with database.transaction() as session:
        assert session.scalar(select(func.count()).select_from(Series)) == MANY
        assert session.scalar(select(func.count()).select_from(Observation)) == MANY
    # again: every series exists now and is locked, in batches, by the upsert
    assert main([*db_args, "ingest", "hourly", str(path)]) == 0, capsys.readouterr().err


def test_a_refused_statement_on_a_reachable_database_is_not_an_outage(
    db_args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from app import ingest

    def refused(*_args: object, **_kwargs: object) -> None:
        raise OperationalError(
            "INSERT ...", {}, Exception("number of parameters must be between 0 and 65535")
        )

    monkeypatch.setattr(ingest, "store", refused)
    path = _many_series_file(tmp_path / "few.csv", 3)
    code = main([*db_args, "ingest", "hourly", str(path)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "internal database error" in err and "unavailable" not in err
