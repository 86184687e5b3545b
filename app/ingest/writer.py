"""Write a canonical hourly frame into ``observations``: an idempotent upsert.

PostgreSQL: COPY into a temporary staging table, then one ``INSERT … ON CONFLICT DO UPDATE``.
SQLite: a batched ``INSERT … ON CONFLICT DO UPDATE``. Both run inside the caller's transaction,
so a failure leaves nothing behind.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from sqlalchemy import insert, select, text
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.db.models import Observation, Series

VALUE_COLUMNS = ("requests", "prompt_tokens", "completion_tokens", "total_tokens", "peak_rps")
SQLITE_BATCH_ROWS = 5_000


def resolve_series_ids(session: Session, names: list[str], *, create: bool) -> dict[str, int]:
    """Map series names to ids, creating the missing ones when ``create`` is true."""
    from app.errors import NotFoundError

    ids = dict(session.execute(select(Series.name, Series.id).where(Series.name.in_(names))).all())
    missing = [name for name in names if name not in ids]
    if missing and not create:
        raise NotFoundError(f"series {missing[0]!r} does not exist; create it first")
    if missing:
        session.execute(insert(Series), [{"name": name, "labels": {}} for name in missing])
        ids.update(
            session.execute(select(Series.name, Series.id).where(Series.name.in_(missing))).all()
        )
    return ids


def upsert_observations(session: Session, frame: pd.DataFrame, series_ids: dict[str, int]) -> int:
    """Insert or replace the frame's hours; returns the number of rows written."""
    rows = pd.DataFrame(
        {"series_id": frame["series"].map(series_ids).astype("int64"), "hour": frame["hour"]}
    )
    for column in VALUE_COLUMNS:
        rows[column] = frame[column].astype("float64")
    if session.get_bind().dialect.name == "postgresql":
        _copy_upsert(session, rows)
    else:
        _sqlite_upsert(session, rows)
    return len(rows)


def _copy_upsert(session: Session, rows: pd.DataFrame) -> None:
    columns = ("series_id", "hour", *VALUE_COLUMNS)
    session.execute(
        text(
            "CREATE TEMP TABLE IF NOT EXISTS gpucast_obs_staging "
            "(series_id integer, hour timestamptz, requests double precision, "
            "prompt_tokens double precision, completion_tokens double precision, "
            "total_tokens double precision, peak_rps double precision) ON COMMIT DELETE ROWS"
        )
    )
    session.execute(text("TRUNCATE gpucast_obs_staging"))
    buffer = _to_copy_text(rows)
    raw = session.connection().connection.driver_connection
    copy_sql = f"COPY gpucast_obs_staging ({', '.join(columns)}) FROM STDIN"
    with raw.cursor() as cursor, cursor.copy(copy_sql) as copy:  # type: ignore[union-attr]
        while block := buffer.read(1 << 20):
            copy.write(block)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in VALUE_COLUMNS)
    session.execute(
        text(
            f"INSERT INTO observations ({', '.join(columns)}) "
            f"SELECT {', '.join(columns)} FROM gpucast_obs_staging "
            f"ON CONFLICT (series_id, hour) DO UPDATE SET {updates}"
        )
    )
    session.execute(text("TRUNCATE gpucast_obs_staging"))


def _to_copy_text(rows: pd.DataFrame) -> io.StringIO:
    """Rows in PostgreSQL's text COPY format (tab separated, \\N for NULL)."""
    out = pd.DataFrame(
        {
            "series_id": rows["series_id"].astype(str),
            "hour": rows["hour"].dt.strftime("%Y-%m-%d %H:%M:%S+00"),
        }
    )
    for column in VALUE_COLUMNS:
        values = rows[column].to_numpy()
        text_values = np.char.mod("%.17g", values).astype(object)
        text_values[np.isnan(values)] = "\\N"
        out[column] = text_values
    buffer = io.StringIO()
    out.to_csv(buffer, sep="\t", header=False, index=False, quoting=3, na_rep="\\N")
    buffer.seek(0)
    return buffer


def _sqlite_upsert(session: Session, rows: pd.DataFrame) -> None:
    records = rows.astype(object).where(rows.notna(), None)
    records["hour"] = [ts.to_pydatetime() for ts in rows["hour"]]
    payload = records.to_dict("records")
    statement = sqlite_insert(Observation)
    statement = statement.on_conflict_do_update(
        index_elements=["series_id", "hour"],
        set_={c: statement.excluded[c] for c in VALUE_COLUMNS},
    )
    for start in range(0, len(payload), SQLITE_BATCH_ROWS):
        session.execute(statement, payload[start : start + SQLITE_BATCH_ROWS])
