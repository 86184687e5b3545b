"""Hostile data on every surface, on SQLite and PostgreSQL: dates the stack cannot hold, local
times a daylight-saving change skips or repeats, and numbers that would overflow later.

Each class is pinned with several inputs of its kind; every rejection is a 4xx JSON body (CLI:
one line and exit code 2) and leaves every table byte-for-byte unchanged.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app import ingest
from app.api import create_app
from app.cli import main
from app.db import Database
from app.db.models import Base, ForecastPoint, ForecastRun
from app.errors import IngestError
from app.forecasts.store import latest_run, save_run
from app.forecasts.work import ItemResult
from app.ingest.writer import resolve_series_ids
from app.settings import get_settings

SERIES = "prod/chat"
FAST = "seasonal_naive,seasonal_ma"


def checksum(database: Database) -> str:
    """SHA-256 over every row of every table, in primary-key order."""
    digest = hashlib.sha256()
    with database.engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            order = list(table.primary_key.columns) or list(table.columns)
            for row in connection.execute(select(table).order_by(*order)):
                digest.update(repr(tuple(row)).encode())
            digest.update(f"|{table.name}|".encode())
    return digest.hexdigest()


@pytest.fixture
def chat(client: TestClient) -> TestClient:
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    return client


def post_csv(client: TestClient, body: str, **params: str) -> object:
    return client.post(
        f"/v1/series/{SERIES}/observations",
        content=body.encode(),
        params=params,
        headers={"Content-Type": "text/csv"},
    )


def post_json(client: TestClient, body: str, **params: str) -> object:
    return client.post(
        f"/v1/series/{SERIES}/observations",
        content=body.encode(),
        params=params,
        headers={"Content-Type": "application/json"},
    )


def cli(database_url: str, *argv: str) -> int:
    return main(["--database-url", database_url, *argv])


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("gpucast: error: ") and err.count("\n") == 1, err
    return err


def history_csv(hours: int = 240, level: float = 3600.0) -> str:
    stamps = pd.date_range("2026-10-01T00:00Z", periods=hours, freq="h")
    shape = 1.0 + 0.5 * np.sin(np.arange(hours) * 2 * np.pi / 24)
    lines = [
        f"{t.isoformat()},{level * s:.9g},{level * s:.9g}"
        for t, s in zip(stamps, shape, strict=True)
    ]
    return "timestamp,requests,tokens\n" + "\n".join(lines) + "\n"


# -- 3. dates outside what the stack can hold ------------------------------------------------

OUT_OF_RANGE = [
    "0001-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "2100-01-01T00:00:00Z",
    "9999-12-31T23:59:59-23:59",
    "9999-12-31T23:59:59+00:00",
    "0001-01-01T00:00:00+23:59",
]
EDGES = ["1970-01-01T00:00:00Z", "2099-12-31T23:59:59-23:59"]
EVENT = {"name": "launch", "start": "2026-11-27T00:00:00Z", "end": "2026-11-28T00:00:00Z"}


@pytest.mark.parametrize("field", ["start", "end"])
@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_event_dates_out_of_range_are_422_and_store_nothing(
    chat: TestClient, database: Database, value: str, field: str
) -> None:
    before = checksum(database)
    body = EVENT | {field: value}
    if field == "start":
        body["end"] = "2099-12-31T00:00:00Z"  # keep end after start where it is in range
    response = chat.post("/v1/events", json=body)
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    assert any(e["loc"] == ["body", field] and "1970 to 2099" in e["msg"] for e in errors)
    assert checksum(database) == before


def test_events_at_the_edges_of_the_range_keep_forecasts_and_grafana_working(
    chat: TestClient,
) -> None:
    assert post_csv(chat, history_csv()).status_code == 200
    body = {"name": "forever", "start": EDGES[0], "end": EDGES[1], "multiplier": 2}
    created = chat.post("/v1/events", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["end"] == "2100-01-01T23:58:59Z"  # the offset, converted to UTC
    forecast = chat.post(f"/v1/series/{SERIES}/forecast", params={"models": FAST})
    assert forecast.status_code == 200, forecast.text
    assert [run["status"] for run in forecast.json()["runs"]] == ["complete", "complete"]
    grafana = chat.post(
        "/grafana/query",
        json={
            "range": {"from": "2026-10-01T00:00:00Z", "to": "2026-10-12T00:00:00Z"},
            "targets": [{"target": "events", "payload": {"series": SERIES}}],
        },
    )
    assert grafana.status_code == 200 and grafana.json()[0]["rows"][0][2] == "forever"


def test_events_can_be_replaced_and_deleted(chat: TestClient, database: Database) -> None:
    event_id = chat.post("/v1/events", json=EVENT).json()["id"]
    replaced = chat.put(
        f"/v1/events/{event_id}",
        json={"name": "sale", "start": "2026-12-01T00:00:00+01:00", "end": "2026-12-02T00:00Z",
              "series": SERIES, "multiplier": 1.5},
    )  # fmt: skip
    assert replaced.status_code == 200, replaced.text
    assert replaced.json() == {
        "id": event_id, "name": "sale", "start": "2026-11-30T23:00:00Z",
        "end": "2026-12-02T00:00:00Z", "series": SERIES, "multiplier": 1.5, "description": None,
    }  # fmt: skip
    assert chat.get("/v1/events").json() == [replaced.json()]

    before = checksum(database)
    bad = [
        (f"/v1/events/{event_id}", EVENT | {"start": "9999-12-31T23:59:59-23:59"}, 422, "2099"),
        (f"/v1/events/{event_id}", EVENT | {"end": "2026-11-26T00:00:00Z"}, 422, "end must be"),
        (f"/v1/events/{event_id}", EVENT | {"series": "ghost"}, 404, "'ghost' not found"),
        (
            f"/v1/events/{event_id}",
            EVENT | {"multiplier": -1},
            422,
            "greater than or equal to 0.001",
        ),
        ("/v1/events/999", EVENT, 404, "event 999 not found"),
        (f"/v1/events/{2**31}", EVENT, 422, "less than or equal to"),
        ("/v1/events/0", EVENT, 422, "greater than or equal to 1"),
        ("/v1/events/x", EVENT, 422, "integer"),
    ]
    for path, body, status, fragment in bad:
        response = chat.put(path, json=body)
        assert response.status_code == status, (path, body, response.text)
        assert fragment in json.dumps(response.json()["detail"]), response.text
    assert chat.delete("/v1/events/999").status_code == 404
    assert checksum(database) == before

    assert chat.delete(f"/v1/events/{event_id}").status_code == 204
    assert chat.get("/v1/events").json() == []
    missing = chat.delete(f"/v1/events/{event_id}")
    assert missing.status_code == 404 and missing.json() == {
        "detail": f"event {event_id} not found"
    }


def test_event_writes_need_a_key_when_keys_are_configured(database_url: str) -> None:
    settings = get_settings(database_url=database_url, auto_migrate=False, api_keys="k-1")
    with TestClient(create_app(settings)) as keyed:
        key = {"X-API-Key": "k-1"}
        event_id = keyed.post("/v1/events", json=EVENT, headers=key).json()["id"]
        assert keyed.put(f"/v1/events/{event_id}", json=EVENT).status_code == 401
        assert keyed.delete(f"/v1/events/{event_id}").status_code == 401
        assert keyed.put(f"/v1/events/{event_id}", json=EVENT, headers=key).status_code == 200
        assert keyed.delete(f"/v1/events/{event_id}", headers=key).status_code == 204


@pytest.mark.parametrize("param", ["start", "end"])
@pytest.mark.parametrize("path", ["/v1/events", f"/v1/series/{SERIES}/observations"])
@pytest.mark.parametrize(
    ("value", "fragment"),
    [*((v, "use a year from 1970 to 2099") for v in OUT_OF_RANGE),
     ("2026-11-30T00:00:00", "must include a UTC offset")],
)  # fmt: skip
def test_query_bounds_out_of_range_or_naive_are_422(
    chat: TestClient, path: str, param: str, value: str, fragment: str
) -> None:
    response = chat.get(path, params={param: value})
    assert response.status_code == 422, response.text
    assert fragment in json.dumps(response.json()["detail"])


@pytest.mark.parametrize("value", EDGES)
def test_query_bounds_at_the_edges_are_accepted(chat: TestClient, value: str) -> None:
    for path in ("/v1/events", f"/v1/series/{SERIES}/observations"):
        for param in ("start", "end"):
            response = chat.get(path, params={param: value})
            assert response.status_code == 200 and response.json() == [], response.text


@pytest.mark.parametrize("side", ["from", "to"])
@pytest.mark.parametrize("value", [*OUT_OF_RANGE, "+275760-09-13T00:00:00Z"])
def test_grafana_ranges_out_of_range_are_400(chat: TestClient, side: str, value: str) -> None:
    time_range = {"from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z", side: value}
    targets = [{"target": "events", "payload": {"series": SERIES}}]
    response = chat.post("/grafana/query", json={"range": time_range, "targets": targets})
    assert response.status_code == 400, response.text
    assert f"range.{side}" in response.json()["detail"]


@pytest.mark.parametrize(
    "stamp",
    [
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:00:00Z",
        "9999-12-31T23:00:00-23:00",
        "1600-01-01T00:00Z",
    ],  # fmt: skip
)
def test_hourly_rows_out_of_range_name_the_row(
    chat: TestClient, database: Database, stamp: str
) -> None:
    before = checksum(database)
    body = f"timestamp,requests\n2026-11-30T00:00:00Z,1\n{stamp},1\n"
    response = post_csv(chat, body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("row 2 (line 3), column 'timestamp'")
    assert "before 1970-01-01" in detail or "more than a year in the future" in detail
    assert checksum(database) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["--start", "0001-01-01T00:00:00Z"],
        ["--start", "9999-12-31T23:59-23:59"],
        ["--start", "2100-01-01"],
        ["--start", "99999999999999999d"],
        ["--start", "2026-11-01T00:00Z", "--end", "9999-12-31T23:59:59+00:00"],
    ],
)
def test_cli_import_range_out_of_range_exits_2(
    database: Database, database_url: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    before = checksum(database)
    code = cli(
        database_url, "ingest", "prometheus", "--url", "http://127.0.0.1:9", "--query", "up",
        "--series", SERIES, "--metric", "requests", *argv,
    )  # fmt: skip
    assert code == 2
    assert "outside the supported range: use a year from 1970 to 2099" in one_error_line(capsys)
    assert checksum(database) == before


@pytest.mark.parametrize(
    ("rows", "extra", "message"),
    [
        ("0,4,1\n", ["--origin", "0001-01-01T00:00:00Z"], "--origin 0001-01-01T00:00:00"),
        ("0,4,1\n", ["--origin", "9999-12-31T23:59:59-23:59"], "1970 to 2099"),
        ("1e30,4,1\n", [], "not a time from 1970 to 2099"),
        ("inf,4,1\n", [], "not a time from 1970 to 2099"),
        ("1790000000,4,1\n-1e300,4,1\n", [], "row 2 (line 3)"),
        ("1e10,4,1\n", ["--origin", "2026-11-30T00:00:00Z"], "as seconds after --origin"),
    ],
)
def test_cli_request_log_times_out_of_range_exit_2(
    tmp_path: Path,
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    rows: str,
    extra: list[str],
    message: str,
) -> None:
    log = tmp_path / "log.csv"
    log.write_text("timestamp,input_tokens,output_tokens\n" + rows)
    before = checksum(database)
    assert cli(database_url, "ingest", "requests", str(log), "--series", SERIES, *extra) == 2
    assert message in one_error_line(capsys)
    assert checksum(database) == before


@pytest.mark.parametrize(
    "stamps",
    [
        ("1969-12-31T23:59:00Z", "1970-01-01T00:00:00Z"),
        ("2099-12-31T23:59:59Z", "2100-01-01T00:00:00Z"),
        ("2262-01-01T00:00:00Z", "2262-01-01T00:00:01Z"),
    ],
)
def test_cli_load_file_times_out_of_range_exit_2(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str], stamps: tuple[str, str]
) -> None:
    load = tmp_path / "load.csv"
    load.write_text("timestamp,requests_per_s\n" + "".join(f"{t},5\n" for t in stamps))
    argv = ["backtest", SERIES, "--profile", "p", "--load", str(load)]
    assert cli(database_url, *argv) == 2
    err = one_error_line(capsys)
    assert "load.csv: row" in err and "outside the supported range: use a year" in err


def test_cli_clock_out_of_range_exits_2(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(database_url, "schedule", "--hourly-once", "--now", "9999-01-01T00:00Z") == 2
    assert "1970 to 2099" in one_error_line(capsys)


# -- 4. local times that do not exist or exist twice ----------------------------------------

# (zone, a local hour the fall-back change repeats, one the spring-forward change skips)
DST = [
    ("America/New_York", "2026-11-01T01:00:00", "2026-03-08T02:00:00"),
    ("Europe/Berlin", "2026-10-25T02:00:00", "2026-03-29T02:00:00"),
    ("Europe/London", "2026-10-25T01:00:00", "2026-03-29T01:00:00"),
    ("Australia/Sydney", "2026-04-05T02:00:00", "2026-10-04T02:00:00"),
    ("America/Santiago", "2026-04-04T23:00:00", "2026-09-06T00:00:00"),
]
CASES_DST = [
    pytest.param(zone, stamp, kind, id=f"{zone}-{kind}")
    for zone, repeated, skipped in DST
    for stamp, kind in ((repeated, "occurs twice"), (skipped, "does not exist"))
]


def _three_rows(stamp: str) -> list[str]:
    """Two good local hours a week earlier, then ``stamp`` as the third row."""
    week_before = pd.Timestamp(stamp) - pd.Timedelta(days=7)
    return [(week_before + pd.Timedelta(hours=h)).isoformat() for h in (0, 1)] + [stamp]


def _dst_message(detail: str, zone: str, stamp: str, kind: str, row: str) -> None:
    shown = pd.Timestamp(stamp).strftime("%Y-%m-%d %H:%M")
    assert detail.startswith(f"{row}, column 'timestamp': {shown} {kind} in {zone}"), detail
    assert "UTC offset" in detail


@pytest.mark.parametrize(("zone", "stamp", "kind"), CASES_DST)
def test_rest_ingest_rejects_dst_gaps_and_repeats(
    chat: TestClient, database: Database, zone: str, stamp: str, kind: str
) -> None:
    before = checksum(database)
    stamps = _three_rows(stamp)
    csv_body = "timestamp,requests\n" + "".join(f"{s},5\n" for s in stamps)
    response = post_csv(chat, csv_body, timezone=zone)
    assert response.status_code == 422, response.text
    _dst_message(response.json()["detail"], zone, stamp, kind, "row 3 (line 4)")
    records = [{"timestamp": s, "requests": 5} for s in stamps]
    response = post_json(chat, json.dumps(records), timezone=zone)
    assert response.status_code == 422, response.text
    _dst_message(response.json()["detail"], zone, stamp, kind, "record 3")
    assert checksum(database) == before


@pytest.mark.parametrize(("zone", "stamp", "kind"), CASES_DST)
def test_cli_ingest_rejects_dst_gaps_and_repeats(
    tmp_path: Path,
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    zone: str,
    stamp: str,
    kind: str,
) -> None:
    before = checksum(database)
    hourly = tmp_path / "hourly.csv"
    hourly.write_text("timestamp,requests\n" + "".join(f"{s},5\n" for s in _three_rows(stamp)))
    argv = ["--series", SERIES, "--timezone", zone]
    assert cli(database_url, "ingest", "hourly", str(hourly), *argv) == 2
    _dst_message(one_error_line(capsys).removeprefix("gpucast: error: "), zone, stamp, kind,
                 "row 3 (line 4)")  # fmt: skip
    # A request log: the requests of the hour, at minute 30 of the bad local hour.
    log = tmp_path / "log.csv"
    times = [*_three_rows(stamp)[:2], stamp.replace(":00:00", ":30:00")]
    log.write_text("timestamp,input_tokens,output_tokens\n" + "".join(f"{t},4,1\n" for t in times))
    assert cli(database_url, "ingest", "requests", str(log), *argv) == 2
    err = one_error_line(capsys)
    assert f"row 3 (line 4), column 'timestamp': {stamp[:10]} {stamp[11:13]}:30 {kind}" in err
    assert checksum(database) == before


def test_hours_beside_a_dst_change_map_to_their_utc_hours(chat: TestClient) -> None:
    body = "timestamp,requests\n" + "".join(
        f"{s},{n}\n"
        for n, s in enumerate(
            [
                "2026-11-01T00:00:00",
                "2026-11-01T02:00:00",
                "2026-03-08T01:00:00",
                "2026-03-08T03:00:00",
            ],
            start=1,
        )  # fmt: skip
    )
    assert post_csv(chat, body, timezone="America/New_York").status_code == 200
    stored = chat.get(f"/v1/series/{SERIES}/observations").json()
    assert [(o["hour"], o["requests"]) for o in stored] == [
        ("2026-03-08T06:00:00Z", 3.0), ("2026-03-08T07:00:00Z", 4.0),
        ("2026-11-01T04:00:00Z", 1.0), ("2026-11-01T07:00:00Z", 2.0),
    ]  # fmt: skip


# -- 5. numbers that overflow later ------------------------------------------------------

HOUR = "2026-11-30T00:00:00Z"
TOO_LARGE_CSV = {
    "requests at the bound": (f"timestamp,requests\n{HOUR},1e15\n", "requests"),
    "requests 1e307": (f"timestamp,requests\n{HOUR},1e307\n", "requests"),
    "requests of 400 digits": (f"timestamp,requests\n{HOUR},1{'0' * 400}\n", "requests"),
    "prompt tokens 1e308": (f"timestamp,requests,prompt_tokens\n{HOUR},1,1e308\n", "prompt"),
    "qps beyond the bound per hour": (f"timestamp,qps\n{HOUR},3e11\n", "qps"),
    "token parts that sum beyond it": (
        f"timestamp,requests,prompt_tokens,completion_tokens\n{HOUR},1,6e14,6e14\n",
        "prompt_tokens + completion_tokens",
    ),
    "tokens 1e16": (f"timestamp,requests,tokens\n{HOUR},1,1e16\n", "tokens"),
    "peak_rps 2e15": (f"timestamp,requests,peak_rps\n{HOUR},1,2e15\n", "peak_rps"),
}
TOO_LARGE_JSON = {
    "integer of 400 digits": (
        f'[{{"timestamp": "{HOUR}", "requests": 1{"0" * 400}}}]', "an integer of 401 digits",
    ),
    "integer of 5000 digits": (f'[{{"timestamp": "{HOUR}", "requests": 1{"0" * 5000}}}]', "4300"),
    "negative integer of 30 digits": (
        f'[{{"timestamp": "{HOUR}", "requests": -1{"0" * 29}}}]', "is negative",
    ),
    "huge integer timestamp": ('[{"timestamp": 1' + "0" * 40 + ', "requests": 1}]', "not a valid"),
    "float 1e400": (f'[{{"timestamp": "{HOUR}", "requests": 1e400}}]', "not a finite number"),
    "float 1e307": (f'[{{"timestamp": "{HOUR}", "requests": 1e307}}]', "1e+307 is too large"),
    "NaN prompt tokens": (
        f'[{{"timestamp": "{HOUR}", "requests": 1, "prompt_tokens": NaN}}]', "NaN is not a number",
    ),
    "-Infinity peak": (
        f'[{{"timestamp": "{HOUR}", "requests": 1, "peak_rps": -Infinity}}]', "not a finite",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(TOO_LARGE_CSV))
def test_csv_values_beyond_the_bound_are_422(
    chat: TestClient, database: Database, case: str
) -> None:
    body, column = TOO_LARGE_CSV[case]
    before = checksum(database)
    response = post_csv(chat, body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("row 1 (line 2)") and column in detail, detail
    assert "hourly values must be below 1e15" in detail
    assert checksum(database) == before


@pytest.mark.parametrize("case", sorted(TOO_LARGE_JSON))
def test_json_values_beyond_the_bound_are_422(
    chat: TestClient, database: Database, case: str
) -> None:
    body, fragment = TOO_LARGE_JSON[case]
    before = checksum(database)
    response = post_json(chat, body)
    assert response.status_code == 422, response.text
    assert fragment in response.json()["detail"], response.text
    assert checksum(database) == before


def test_values_just_below_the_bound_are_stored_exactly(chat: TestClient) -> None:
    header = "timestamp,requests,prompt_tokens,completion_tokens,peak_rps"
    body = f"{header}\n{HOUR},{9.99e14},{5e14},{4.99e14},{9.99e14}\n"
    assert post_csv(chat, body).status_code == 200
    stored = chat.get(f"/v1/series/{SERIES}/observations").json()[0]
    assert (stored["requests"], stored["total_tokens"], stored["peak_rps"]) == (
        9.99e14, 9.99e14, 9.99e14,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("2026-11-30T00:00:01Z,1e308,1\n2026-11-30T00:00:02Z,1e308,1\n", "row 1 (line 2)"),
        ("2026-11-30T00:00:01Z,1e15,1\n", "1e+15 is too large"),
        (
            "2026-11-30T00:00:01Z,6e14,1\n2026-11-30T00:10:00Z,6e14,1\n",
            "hour 2026-11-30T00:00Z: the requests of the hour add up to 1.2e+15 prompt tokens",
        ),
        (
            "2026-11-30T00:00:01Z,5e14,4e14\n2026-11-30T00:10:00Z,4e14,2e14\n",
            "add up to 1.5e+15 total tokens",
        ),
    ],
)
def test_request_logs_whose_hours_overflow_exit_2(
    tmp_path: Path,
    database: Database,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    rows: str,
    message: str,
) -> None:
    log = tmp_path / "log.csv"
    log.write_text("timestamp,input_tokens,output_tokens\n" + rows)
    before = checksum(database)
    assert cli(database_url, "ingest", "requests", str(log), "--series", SERIES) == 2
    assert message in one_error_line(capsys)
    assert checksum(database) == before


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("requests", np.inf, "requests inf is not a finite number"),
        ("requests", np.nan, "requests missing"),
        ("prompt_tokens", -np.inf, "prompt_tokens -inf is not a finite number"),
        ("total_tokens", 1e16, "total_tokens 1e+16 is too large"),
        ("peak_rps", -1.0, "peak_rps -1 is negative"),
    ],
)
def test_every_write_path_is_guarded_before_storage(
    database: Database, column: str, value: float, message: str
) -> None:
    frame = pd.DataFrame(
        {
            "series": [SERIES, SERIES],
            "hour": pd.to_datetime(["2026-11-30T00:00Z", "2026-11-30T01:00Z"], utc=True),
            "requests": [1.0, 2.0],
            "prompt_tokens": [1.0, 2.0],
            "completion_tokens": [1.0, 2.0],
            "total_tokens": [2.0, 4.0],
            "peak_rps": [1.0, 1.0],
        }
    )
    frame.loc[1, column] = value
    before = checksum(database)
    pattern = re.escape(f"series 'prod/chat', hour 2026-11-30T01:00:00+00:00: {message}")
    with pytest.raises(IngestError, match=pattern), database.transaction() as session:
        ingest.store(session, frame, create_series=True)
    assert checksum(database) == before


def _result(forecast: pd.DataFrame | None, **extra: object) -> ItemResult:
    return ItemResult(
        series=SERIES, metric="requests", status="complete", horizon=2, model="seasonal_naive",
        forecast=forecast, trained_until=pd.Timestamp("2026-11-30T23:00Z"), **extra,
    )  # fmt: skip


def _forecast(**overrides: float) -> pd.DataFrame:
    ds = pd.date_range("2026-12-01T00:00Z", periods=2, freq="h")
    columns = {c: [10.0, 11.0] for c in ("yhat", "lo_80", "hi_80", "lo_95", "hi_95")}
    frame = pd.DataFrame({"ds": ds, **columns})
    for column, value in overrides.items():
        frame.loc[1, column] = value
    return frame


@pytest.mark.parametrize(
    ("forecast", "problem"),
    [
        (_forecast(hi_80=np.nan), "hi_80 holds NaN or infinite values"),
        (_forecast(yhat=np.inf), "yhat holds NaN or infinite values"),
        (_forecast(lo_95=-np.inf), "lo_95 holds NaN or infinite values"),
        (_forecast(hi_95=1e300), "hi_95 holds values beyond 1e+18"),
        (_forecast().assign(q99=[1.0, np.nan]), "q99 holds NaN"),
        (_forecast().iloc[0:0], "it has no points"),
        (None, "it has no points"),
    ],
)
def test_a_forecast_with_unusable_values_is_stored_as_failed(
    database: Database, forecast: pd.DataFrame | None, problem: str
) -> None:
    with database.transaction() as session:
        series_id = resolve_series_ids(session, [SERIES], create=True)[SERIES]
        result = _result(forecast)
        run = save_run(session, series_id=series_id, result=result)
    assert result.status == "failed" and problem in (result.error or "")
    with database.transaction() as session:
        stored = session.get(ForecastRun, run.id)
        assert stored is not None and stored.status == "failed" and problem in stored.error
        assert (
            session.scalars(select(ForecastPoint).where(ForecastPoint.run_id == run.id)).all() == []
        )
        assert latest_run(session, series_id=series_id, metric="requests") is None


def test_non_finite_numbers_in_run_details_are_stored_as_null(database: Database) -> None:
    scores = [{"model": "seasonal_naive", "mase": float("nan"), "wape": np.float64(np.inf)}]
    with database.transaction() as session:
        series_id = resolve_series_ids(session, [SERIES], create=True)[SERIES]
        result = _result(
            _forecast(), scores=scores, backtest_error=float("nan"),
            state={"sigma": [1.0, float("-inf")], "nested": {"x": float("nan")}},
        )  # fmt: skip
        run_id = save_run(session, series_id=series_id, result=result).id
    with database.transaction() as session:
        run = session.get(ForecastRun, run_id)
        assert run is not None and run.status == "complete" and run.backtest_error is None
        assert run.scores == [{"model": "seasonal_naive", "mase": None, "wape": None}]
        assert run.state == {"sigma": [1.0, None], "nested": {"x": None}}


def test_a_history_at_the_bound_forecasts_to_finite_runs(chat: TestClient) -> None:
    assert post_csv(chat, history_csv(level=6e14)).status_code == 200
    response = chat.post(f"/v1/series/{SERIES}/forecast", params={"models": FAST})
    assert response.status_code == 200, response.text
    for run in response.json()["runs"]:
        if run["status"] == "complete":
            values = [p[c] for p in run["points"] for c in ("yhat", "lo_80", "hi_95")]
            assert run["points"] and all(np.isfinite(values))
        else:
            assert run["error"] and run["points"] == []
    runs = chat.get(f"/v1/series/{SERIES}/forecast/runs").json()
    assert len(runs) == 2


def test_json_token_fields_null_or_absent_in_later_records_store_as_missing(
    chat: TestClient,
) -> None:
    """A batch whose first hour has token counts and later hours give null or leave the
    fields out (the exporter lost them) is stored; only a literal NaN is refused."""
    hours = pd.date_range("2026-01-01", periods=3, freq="h", tz="UTC")
    stamps = [hour.isoformat() for hour in hours]
    records = [
        {"timestamp": stamps[0], "requests": 10, "prompt_tokens": 80, "completion_tokens": 20},
        {"timestamp": stamps[1], "requests": 11, "prompt_tokens": None, "completion_tokens": None},
        {"timestamp": stamps[2], "requests": 12, "peak_rps": 0.5},
    ]
    response = post_json(chat, json.dumps(records))
    assert response.status_code == 200, response.text
    stored = chat.get(f"/v1/series/{SERIES}/observations").json()
    rows = stored["observations"] if isinstance(stored, dict) else stored
    assert [r["requests"] for r in rows] == [10, 11, 12]
    assert [r["total_tokens"] for r in rows] == [100, None, None]
    assert [r["peak_rps"] for r in rows] == [None, None, 0.5]
