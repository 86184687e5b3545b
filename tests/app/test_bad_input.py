"""A catalogue of malformed inputs: each gets a clear 4xx (or CLI exit 2) and leaves every
table byte-for-byte unchanged."""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.cli import main
from app.db import Database
from app.db.models import Base

SERIES = "prod/chat"
GOOD_ROW = "2026-11-30T00:00:00Z,3600,1000,200"
HEADER = "timestamp,requests,prompt_tokens,completion_tokens"


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


def csv_post(body: bytes | str, content_type: str = "text/csv") -> Callable[[TestClient], object]:
    data = body.encode() if isinstance(body, str) else body
    return lambda c: c.post(
        f"/v1/series/{SERIES}/observations", content=data, headers={"Content-Type": content_type}
    )


def json_post(text: str) -> Callable[[TestClient], object]:
    return csv_post(text, "application/json")


def create_series(name: str) -> Callable[[TestClient], object]:
    return lambda c: c.post("/v1/series", json={"name": name})


def get(path: str, **params: object) -> Callable[[TestClient], object]:
    return lambda c: c.get(path, params=params)


def post_json(path: str, body: object) -> Callable[[TestClient], object]:
    return lambda c: c.post(path, json=body)


def rows(*lines: str) -> str:
    return "\n".join([HEADER, *lines]) + "\n"


CASES: dict[str, tuple[Callable[[TestClient], object], int, str]] = {
    "csv wrong type": (csv_post(rows("2026-11-30T00:00:00Z,lots,1,2")), 422, "not a number"),
    "csv NaN": (csv_post(rows("2026-11-30T00:00:00Z,NaN,1,2")), 422, "not a number"),
    "csv Infinity": (csv_post(rows("2026-11-30T00:00:00Z,Infinity,1,2")), 422, "finite"),
    "csv negative count": (csv_post(rows("2026-11-30T00:00:00Z,-1,1,2")), 422, "negative"),
    "csv negative tokens": (csv_post(rows("2026-11-30T00:00:00Z,1,-1,2")), 422, "negative"),
    "csv far future": (csv_post(rows("2099-11-30T00:00:00Z,1,1,2")), 422, "future"),
    "csv pre-1970": (csv_post(rows("1969-12-31T23:00:00Z,1,1,2")), 422, "before 1970"),
    "csv mixed zones": (
        csv_post(rows(GOOD_ROW, "2026-11-30T01:00:00,1,1,2")),
        422,
        "no UTC offset",
    ),
    "csv duplicate hour": (csv_post(rows(GOOD_ROW, GOOD_ROW)), 422, "duplicate hour"),
    "csv half hour": (csv_post(rows("2026-11-30T00:30:00Z,1,1,2")), 422, "start of an hour"),
    "csv 0 bytes": (csv_post(b""), 422, "empty file"),
    "csv header only": (csv_post(HEADER + "\n"), 422, "no data rows"),
    "csv unknown column": (
        csv_post("timestamp,requests,gpu\n2026-11-30T00:00:00Z,1,2\n"),
        422,
        "unknown column 'gpu'",
    ),
    "csv invalid utf-8": (csv_post(HEADER.encode() + b"\n\xff\xfe,1,1,2\n"), 422, "UTF-8"),
    "csv formula injection": (
        csv_post(rows('2026-11-30T00:00:00Z,"=HYPERLINK(""x"")",1,2')),
        422,
        "not a number",
    ),
    "csv bad timestamp": (csv_post(rows("30/11/2026 00:00,1,1,2")), 422, "not a valid"),
    "csv 50 MB body": (csv_post(rows(*[GOOD_ROW] * 1) + "#" * (50 * 1024 * 1024)), 413, "limit"),
    "wrong content type": (csv_post(rows(GOOD_ROW), "application/xml"), 415, "text/csv"),
    "json malformed": (json_post('[{"timestamp": '), 422, "malformed JSON"),
    "json NaN literal": (
        json_post('[{"timestamp": "2026-11-30T00:00:00Z", "requests": NaN}]'),
        422,
        "missing value",
    ),
    "json Infinity": (
        json_post('[{"timestamp": "2026-11-30T00:00:00Z", "requests": Infinity}]'),
        422,
        "finite",
    ),
    "json string number": (
        json_post('[{"timestamp": "2026-11-30T00:00:00Z", "requests": "9"}]'),
        422,
        "not a number",
    ),
    "json nested": (
        json_post('[{"timestamp": "2026-11-30T00:00:00Z", "requests": {"a": 1}}]'),
        422,
        "not a number",
    ),
    "json scalar": (json_post("42"), 422, "list of objects"),
    "json empty list": (json_post("[]"), 422, "no observations"),
    "json invalid utf-8": (csv_post(b'[{"timestamp": "\xff"}]', "application/json"), 422, "UTF-8"),
    "name dot-dot": (create_series("prod/../etc"), 422, "'..' segments"),
    "name encoded slash": (create_series("prod%2Fchat"), 422, "invalid series name"),
    "name control chars": (create_series("prod\x00chat\n"), 422, "body.name contains the control"),
    "name newline": (create_series("prod/chat\n"), 422, "invalid series name"),
    "name 10 kB": (create_series("a" * 10_240), 422, "at most 200 characters"),
    "name SQL": (create_series("x'; DROP TABLE series;--"), 422, "invalid series name"),
    "name empty": (create_series(""), 422, "at least 1 character"),
    "query bad start": (
        get(f"/v1/series/{SERIES}/observations", start="yesterday"),
        422,
        "datetime",
    ),
    "query NaN target": (
        get(f"/v1/series/{SERIES}/capacity", profile="p", utilization_target="NaN"),
        422,
        "utilization_target",
    ),
    "query negative min_gpus": (
        get(f"/v1/series/{SERIES}/capacity", profile="p", min_gpus=-1),
        422,
        "min_gpus",
    ),
    "query unknown band": (
        get(f"/v1/series/{SERIES}/capacity", profile="p", band="p50"),
        422,
        "band",
    ),
    "event end before start": (
        post_json(
            "/v1/events",
            {"name": "x", "start": "2026-12-02T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
        ),
        422,
        "end must be after start",
    ),
    "event naive time": (
        post_json(
            "/v1/events",
            {"name": "x", "start": "2026-12-01T00:00:00", "end": "2026-12-02T00:00:00Z"},
        ),
        422,
        "timezone",
    ),
    "profile negative throughput": (
        post_json(
            "/v1/gpu-profiles",
            {"name": "p", "gpu_type": "H100", "model": "m", "tokens_per_s_per_gpu": -5},
        ),
        422,
        "greater than or equal to 0.01",
    ),
    "profile subnormal throughput": (
        post_json(
            "/v1/gpu-profiles",
            {"name": "p", "gpu_type": "H100", "model": "m", "tokens_per_s_per_gpu": 1e-300},
        ),
        422,
        "greater than or equal to 0.01",
    ),
    "event empty series": (
        post_json(
            "/v1/events",
            {
                "name": "x",
                "start": "2026-12-01T00:00:00Z",
                "end": "2026-12-02T00:00:00Z",
                "series": "",
            },
        ),
        422,
        "series must name a series, or be left out for every series",
    ),
    "event subnormal multiplier": (
        post_json(
            "/v1/events",
            {
                "name": "x",
                "start": "2026-12-01T00:00:00Z",
                "end": "2026-12-02T00:00:00Z",
                "multiplier": 1e-320,
            },
        ),
        422,
        "greater than or equal to 0.001",
    ),
    "forecast with no model named": (
        lambda c: c.post(f"/v1/series/{SERIES}/forecast", params={"models": ",,"}),
        422,
        "models names no candidate",
    ),
    "estimate unknown gpu": (
        post_json(
            "/v1/capacity/estimate",
            {"model": "llama-3.1-8b", "gpu": "rtx-9999", "qps": 1, "slo_latency_s": 1},
        ),
        422,
        "rtx-9999",
    ),
}


@pytest.fixture
def seeded(client: TestClient) -> TestClient:
    assert client.post("/v1/series", json={"name": SERIES}).status_code == 201
    response = client.post(
        f"/v1/series/{SERIES}/observations",
        content=rows(GOOD_ROW),
        headers={"Content-Type": "text/csv"},
    )
    assert response.status_code == 200
    return client


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_4xx_and_changes_nothing(
    seeded: TestClient, database: Database, case: str
) -> None:
    call, status, fragment = CASES[case]
    before = checksum(database)
    response = call(seeded)
    assert response.status_code == status, response.text[:300]
    detail = response.json()["detail"]
    assert fragment in str(detail), detail
    assert checksum(database) == before


CLI_CASES = {
    "hourly NaN": ("hourly", "timestamp,requests\n2026-11-30T00:00:00Z,NaN\n", []),
    "hourly mixed zones": (
        "hourly",
        "timestamp,requests\n2026-11-30T00:00:00Z,1\n2026-11-30T01:00:00,1\n",
        [],
    ),
    "requests negative tokens": (
        "requests",
        "timestamp,input_tokens,output_tokens\n2026-11-30T00:00:01Z,-4,1\n",
        [],
    ),
    "requests garbage time": ("requests", "timestamp,input_tokens,output_tokens\nsoon,4,1\n", []),
    "requests gzip": (
        "requests",
        gzip.compress(b"timestamp,input_tokens,output_tokens\n2026-11-30T00:00:01Z,4,1\n"),
        [],
    ),
    "requests latin-1 row": (
        "requests",
        b"timestamp,input_tokens,output_tokens\n2026-11-30T00:00:01Z,4,1\ncaf\xe9,1,1\n",
        [],
    ),
    "requests bad origin": (
        "requests",
        "timestamp_ms,input_tokens,output_tokens\n0,4,1\n",
        ["--origin", "tomorrow"],
    ),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_cli_bad_files_exit_2_and_change_nothing(
    database: Database,
    database_url: str,
    tmp_path: Path,
    case: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kind, text, extra = CLI_CASES[case]
    path = tmp_path / "input.csv"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    before = checksum(database)
    code = main(
        ["--database-url", database_url, "ingest", kind, str(path), "--series", SERIES, *extra]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("gpucast: error: ") and err.count("\n") == 1
    assert checksum(database) == before
