"""Writing ingested history: idempotent upsert and all-or-nothing, on SQLite and PostgreSQL."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from sqlalchemy import func, select

from app import ingest
from app.db import Database, repository
from app.db.models import Observation, Series
from app.errors import IngestError

HOURS = pd.date_range("2026-11-01T00:00Z", periods=72, freq="h")


def hourly_csv(values: list[float], hours: pd.DatetimeIndex = HOURS) -> bytes:
    lines = ["timestamp,requests,prompt_tokens,completion_tokens,peak_rps"]
    for hour, value in zip(hours, values, strict=True):
        lines.append(f"{hour:%Y-%m-%dT%H:%M:%SZ},{value},{value * 100},{value * 20},{value / 600}")
    return ("\n".join(lines) + "\n").encode()


def ingest_bytes(
    database: Database, body: bytes, series: str = "prod/chat"
) -> ingest.IngestSummary:
    frame = ingest.read_hourly_csv(io.BytesIO(body), ingest.HourlyOptions(series=series))
    with database.transaction() as session:
        return ingest.store(session, frame, create_series=True)


def snapshot(database: Database) -> pd.DataFrame:
    with database.engine.connect() as connection:
        rows = connection.execute(
            select(
                Observation.series_id,
                Observation.hour,
                Observation.requests,
                Observation.prompt_tokens,
                Observation.completion_tokens,
                Observation.total_tokens,
                Observation.peak_rps,
            ).order_by(Observation.series_id, Observation.hour)
        ).all()
    return pd.DataFrame(rows)


def test_ingest_twice_leaves_database_as_after_once(database: Database) -> None:
    body = hourly_csv([float(i) for i in range(72)])
    first = ingest_bytes(database, body)
    after_once = snapshot(database)
    second = ingest_bytes(database, body)
    assert first.rows_written == second.rows_written == 72
    pd.testing.assert_frame_equal(snapshot(database), after_once)
    with database.transaction() as session:
        assert session.scalar(select(func.count()).select_from(Observation)) == 72
        assert session.scalar(select(func.count()).select_from(Series)) == 1


def test_reingest_replaces_hours(database: Database) -> None:
    ingest_bytes(database, hourly_csv([1.0] * 72))
    ingest_bytes(database, hourly_csv([5.0] * 24, HOURS[:24]))
    with database.transaction() as session:
        series = repository.get_series(session, name="prod/chat")
        frame = repository.observations_frame(session, series_id=series.id)
    assert len(frame) == 72
    assert frame["requests"].tolist() == [5.0] * 24 + [1.0] * 48
    assert frame["total_tokens"].iloc[0] == pytest.approx(5.0 * 120)
    assert frame["hour"].iloc[0] == HOURS[0]


def test_failing_row_in_the_middle_writes_nothing(database: Database) -> None:
    ingest_bytes(database, hourly_csv([1.0] * 72))
    before = snapshot(database)
    lines = hourly_csv([9.0] * 72).decode().splitlines()
    lines[36] = lines[36].replace(",9.0,", ",-9.0,", 1)
    with pytest.raises(IngestError, match=r"row 36 \(line 37\), column 'requests'"):
        ingest_bytes(database, ("\n".join(lines) + "\n").encode())
    pd.testing.assert_frame_equal(snapshot(database), before)


def test_database_error_mid_write_rolls_back_series_creation(database: Database) -> None:
    frame = ingest.read_hourly_csv(
        io.BytesIO(hourly_csv([1.0] * 72)), ingest.HourlyOptions(series="new/series")
    )
    with pytest.raises(RuntimeError, match="boom"), database.transaction() as session:
        ingest.store(session, frame, create_series=True)
        raise RuntimeError("boom")
    with database.transaction() as session:
        assert session.scalar(select(func.count()).select_from(Series)) == 0
        assert session.scalar(select(func.count()).select_from(Observation)) == 0


def test_summary_reports_gaps(database: Database) -> None:
    hours = HOURS.delete([10, 11, 12, 40])
    summary = ingest_bytes(database, hourly_csv([1.0] * len(hours), hours))
    (coverage,) = summary.series
    assert coverage.rows == 68
    assert coverage.missing_hours == 4
    assert [(a.hour, b.hour) for a, b in coverage.gaps] == [(10, 12), (16, 16)]
    assert "4 missing hours in 2 gaps" in "\n".join(summary.lines())


def test_null_tokens_and_peak_are_stored_as_null(database: Database) -> None:
    body = b"timestamp,requests\n2026-11-01T00:00:00Z,10\n"
    ingest_bytes(database, body)
    with database.transaction() as session:
        row = session.scalars(select(Observation)).one()
    assert row.requests == 10.0
    assert row.prompt_tokens is None and row.total_tokens is None and row.peak_rps is None
    assert row.hour.isoformat() == "2026-11-01T00:00:00+00:00"
