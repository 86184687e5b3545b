"""Write a canonical hourly frame into ``observations``: an idempotent upsert.

PostgreSQL: COPY into a temporary staging table, then one ``INSERT … ON CONFLICT DO UPDATE``.
SQLite: a batched ``INSERT … ON CONFLICT DO UPDATE``. Both run inside the caller's transaction,
so a failure leaves nothing behind.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import insert, select, text
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.db import batches
from app.db.models import Observation, Series

VALUE_COLUMNS = ("requests", "prompt_tokens", "completion_tokens", "total_tokens", "peak_rps")
SQLITE_BATCH_ROWS = 5_000


def resolve_series_ids(session: Session, names: list[str], *, create: bool) -> dict[str, int]:
    """Map series names to ids, creating the missing ones when ``create`` is true. Any number
    of names: the statements go in batches of :data:`app.db.BIND_BATCH` values."""
    from app.errors import NotFoundError

    ids: dict[str, int] = {}
    for part in batches(names):
        found = select(Series.name, Series.id).where(Series.name.in_(part))
        ids.update({name: id_ for name, id_ in session.execute(found).all()})
    # Locking the series rows (in id order, so concurrent ingests cannot deadlock) serialises
    # ingests per series and keeps the series from being deleted until this transaction ends;
    # it stands in for a per-row foreign key check on observations (see models.Observation).
    names_by_id = {id_: name for name, id_ in ids.items()}
    for id_part in batches(sorted(names_by_id)):
        lock = select(Series.id).where(Series.id.in_(id_part)).order_by(Series.id).with_for_update()
        locked = set(session.scalars(lock))
        for id_ in id_part:
            if id_ not in locked:  # deleted while this ingest waited for its lock
                del ids[names_by_id[id_]]
    missing = [name for name in names if name not in ids]
    if missing and not create:
        raise NotFoundError(f"series {missing[0]!r} does not exist; create it first")
    if missing:
        session.execute(insert(Series), [{"name": name, "labels": {}} for name in missing])
        for name_part in batches(missing):
            created = select(Series.name, Series.id).where(Series.name.in_(name_part))
            ids.update({name: id_ for name, id_ in session.execute(created).all()})
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
    columns = ", ".join(("series_id", "hour", *VALUE_COLUMNS))
    payload = binary_copy_payload(rows)
    if not _overlaps_existing(session, rows):
        # Nightly appends touch only new hours: COPY straight into the table. The series rows
        # are locked FOR UPDATE (see resolve_series_ids), so no concurrent ingest can add the
        # same hours between this check and the COPY; a duplicate would still fail the key.
        _copy(session, f"COPY observations ({columns}) FROM STDIN WITH (FORMAT binary)", payload)
        return
    session.execute(
        text(
            "CREATE TEMP TABLE IF NOT EXISTS gpucast_obs_staging "
            "(series_id integer, hour timestamptz, requests double precision, "
            "prompt_tokens double precision, completion_tokens double precision, "
            "total_tokens double precision, peak_rps double precision) ON COMMIT DELETE ROWS"
        )
    )
    session.execute(text("TRUNCATE gpucast_obs_staging"))
    _copy(session, f"COPY gpucast_obs_staging ({columns}) FROM STDIN WITH (FORMAT binary)", payload)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in VALUE_COLUMNS)
    session.execute(
        text(
            f"INSERT INTO observations ({columns}) SELECT {columns} FROM gpucast_obs_staging "
            f"ON CONFLICT (series_id, hour) DO UPDATE SET {updates}"
        )
    )
    session.execute(text("TRUNCATE gpucast_obs_staging"))


def _overlaps_existing(session: Session, rows: pd.DataFrame) -> bool:
    """Whether any stored hour of these series lies within the new rows' hour range."""
    spans = rows.groupby("series_id")["hour"].agg(["min", "max"])
    probe = text(
        "SELECT EXISTS (SELECT 1 FROM observations o JOIN "
        "(SELECT unnest(CAST(:ids AS integer[])) AS sid, unnest(CAST(:lo AS timestamptz[])) AS lo,"
        " unnest(CAST(:hi AS timestamptz[])) AS hi) s "
        "ON o.series_id = s.sid AND o.hour BETWEEN s.lo AND s.hi)"
    )
    return bool(
        session.scalar(
            probe,
            {
                "ids": [int(i) for i in spans.index],
                "lo": [t.to_pydatetime() for t in spans["min"]],
                "hi": [t.to_pydatetime() for t in spans["max"]],
            },
        )
    )


def _copy(session: Session, sql: str, payload: bytes) -> None:
    raw = session.connection().connection.driver_connection
    with raw.cursor() as cursor, cursor.copy(sql) as copy:  # type: ignore[union-attr]
        view = memoryview(payload)
        for start in range(0, len(view), COPY_BLOCK_BYTES):
            copy.write(view[start : start + COPY_BLOCK_BYTES])


COPY_BLOCK_BYTES = 1 << 20
_PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01T00:00Z in Unix microseconds
_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
_BINARY_TRAILER = (-1).to_bytes(2, "big", signed=True)


def binary_copy_payload(rows: pd.DataFrame) -> bytes:
    """Rows in PostgreSQL's binary COPY format, built with numpy (no per-row Python).

    A row is a field count, an int4 series id, a timestamptz (int8 microseconds since
    2000-01-01 UTC) and five float8 values, each prefixed by its byte length; a NULL is a
    length of -1 with no data. Rows sharing the same NULL pattern share one fixed layout, so
    each pattern becomes one numpy structured array (COPY accepts rows in any order).
    """
    series_id = rows["series_id"].to_numpy(dtype="int64")
    hour_ns = rows["hour"].dt.tz_convert("UTC").to_numpy(dtype="datetime64[ns]").astype("int64")
    hour_us = hour_ns // 1_000 - _PG_EPOCH_US
    values = rows.loc[:, list(VALUE_COLUMNS)].to_numpy(dtype="float64")
    null = np.isnan(values)
    codes = null @ (1 << np.arange(len(VALUE_COLUMNS)))
    parts = [_BINARY_HEADER]
    for code in np.unique(codes):
        pattern = [bool(code >> position & 1) for position in range(len(VALUE_COLUMNS))]
        select_rows = np.flatnonzero(codes == code)
        fields = [
            ("count", ">i2"),
            ("len_id", ">i4"),
            ("series_id", ">i4"),
            ("len_hour", ">i4"),
            ("hour", ">i8"),
        ]
        for position, is_null in enumerate(pattern):
            fields.append((f"len_{position}", ">i4"))
            if not is_null:
                fields.append((f"v_{position}", ">f8"))
        record = np.empty(len(select_rows), dtype=np.dtype(fields))
        record["count"] = 2 + len(VALUE_COLUMNS)
        record["len_id"], record["len_hour"] = 4, 8
        record["series_id"] = series_id[select_rows]
        record["hour"] = hour_us[select_rows]
        for position, is_null in enumerate(pattern):
            record[f"len_{position}"] = -1 if is_null else 8
            if not is_null:
                record[f"v_{position}"] = values[select_rows, position]
        parts.append(record.tobytes())
    parts.append(_BINARY_TRAILER)
    return b"".join(parts)


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
