"""A GPU profile's observations: production hours posted (REST and CLI), checked row by row,
stored once per hour, read back, and deleted with the profile."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.api import create_app
from app.cli import main
from app.db import Database
from app.db.models import ProfileObservation
from app.settings import Settings

URL = "/v1/gpu-profiles/{name}/observations"
PROFILE = {
    "name": "h100-70b",
    "gpu_type": "H100-SXM",
    "model": "llama-3-70b",
    "tokens_per_s_per_gpu": 2500.0,
    "gpus_per_replica": 4,
}
# whole hours well in the past: posting them never depends on the clock
BASE = datetime(2026, 11, 30, 0, tzinfo=UTC)


def hour_row(index: int, **changes: Any) -> dict[str, Any]:
    row = {
        "hour": (BASE + timedelta(hours=index)).isoformat().replace("+00:00", "Z"),
        "replicas": 2,
        "requests": 7200,
        "prompt_tokens": 7200 * 500,
        "completion_tokens": 7200 * 200,
        "ttft_p95_s": 0.4,
        "tpot_p95_s": 0.025,
    }
    return row | changes


def csv_text(rows: list[dict[str, Any]]) -> str:
    lines = [",".join(rows[0]), *(",".join(str(v) for v in row.values()) for row in rows)]
    return "\n".join(lines) + "\n"


def stored_count(database: Database) -> int:
    with database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(ProfileObservation)) or 0)


@pytest.fixture
def profile(client: TestClient) -> str:
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    return URL.format(name=PROFILE["name"])


def test_posted_hours_read_back_and_an_hour_posted_again_replaces_it(
    client: TestClient, profile: str, database: Database
) -> None:
    rows = [hour_row(h) for h in range(3)]
    posted = client.post(profile, json=rows)
    assert posted.status_code == 200, posted.text
    assert posted.json()["rows_written"] == 3
    assert posted.json()["last_hour"] == "2026-11-30T02:00:00Z"
    again = client.post(profile, json=[hour_row(1, replicas=3, ttft_p95_s=0.9), hour_row(3)])
    assert again.status_code == 200, again.text
    assert stored_count(database) == 4
    read = client.get(profile).json()
    assert [r["hour"] for r in read] == [f"2026-11-30T0{h}:00:00Z" for h in range(4)]
    assert read[1]["replicas"] == 3 and read[1]["ttft_p95_s"] == 0.9
    # a one-number profile has no model to expect latencies from
    none = {"expected_ttft_p95_s": None, "expected_tpot_p95_s": None}
    assert read[0] == {**hour_row(0), "hour": "2026-11-30T00:00:00Z", **none}
    # the same list twice stores the same rows
    assert client.post(profile, json=rows).status_code == 200
    assert stored_count(database) == 4
    bounds = {"start": "2026-11-30T01:00:00Z", "end": "2026-11-30T03:00:00Z"}
    window = client.get(profile, params=bounds)
    assert [r["hour"] for r in window.json()] == ["2026-11-30T01:00:00Z", "2026-11-30T02:00:00Z"]
    assert client.get(profile, params={"limit": 1}).json()[0]["hour"] == "2026-11-30T00:00:00Z"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"hour": "2026-11-30T01:30:00Z"}, "row 2, field hour: .* not on the hour"),
        ({"hour": "yesterday"}, "row 2, field hour: .* not an ISO 8601"),
        ({"hour": 1764460800}, "row 2, field hour: an ISO 8601"),
        ({"hour": "2200-01-01T00:00:00Z"}, "row 2, field hour: .* outside the supported range"),
        ({"replicas": 0}, "row 2, field replicas must be between 1 and 100000, got 0"),
        ({"replicas": 1.5}, "row 2, field replicas must be a whole number"),
        ({"replicas": True}, "row 2, field replicas must be a whole number"),
        ({"requests": -1}, "row 2, field requests"),
        ({"requests": "7200"}, "row 2, field requests: must be a number, got text"),
        ({"prompt_tokens": 100}, "row 2, field prompt_tokens: 100 tokens for 7200 requests"),
        ({"completion_tokens": 7199}, "row 2, field completion_tokens: 7199 tokens for 7200"),
        ({"requests": 0}, "row 2, field prompt_tokens: .* tokens in an hour of 0 requests"),
        ({"ttft_p95_s": 0}, "row 2, field ttft_p95_s: a p95 latency must be > 0"),
        ({"tpot_p95_s": 5e-324}, "row 2, field tpot_p95_s: 5e-324 s is below 0.0001 s"),
        ({"ttft_p95_s": 5e-05}, "row 2, field ttft_p95_s: 5e-05 s is below 0.0001 s"),
        ({"ttft_p95_s": 900}, "row 2, field ttft_p95_s must be between 0 and 600, got 900"),
        ({"tpot_p95_s": 25}, "row 2, field tpot_p95_s must be between 0 and 10, got 25"),
        ({"tpot_p95_s": None}, "row 2, field tpot_p95_s: missing"),
        ({"gpus": 4}, "row 2, field 'gpus': unknown"),
        ({"hour": "2026-11-30T00:00:00Z"}, "row 2, field hour: .* is also row 1"),
    ],
)
def test_a_bad_row_is_named_and_nothing_is_stored(
    client: TestClient, profile: str, database: Database, bad: dict[str, Any], message: str
) -> None:
    response = client.post(profile, json=[hour_row(0), hour_row(1, **bad), hour_row(2)])
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    assert re.search(message, detail), detail
    assert stored_count(database) == 0


def test_numbers_beyond_float_and_non_finite_values_are_a_422(
    client: TestClient, profile: str, database: Database
) -> None:
    for body in (
        '[{"hour": "2026-11-30T00:00:00Z", "replicas": 1, "requests": 1e400, '
        '"prompt_tokens": 1, "completion_tokens": 1, "ttft_p95_s": 1, "tpot_p95_s": 0.1}]',
        '[{"hour": "2026-11-30T00:00:00Z", "replicas": 1, "requests": NaN, '
        '"prompt_tokens": 1, "completion_tokens": 1, "ttft_p95_s": 1, "tpot_p95_s": 0.1}]',
        '[{"hour": "2026-11-30T00:00:00Z", "replicas": ' + "9" * 400 + ', "requests": 1, '
        '"prompt_tokens": 1, "completion_tokens": 1, "ttft_p95_s": 1, "tpot_p95_s": 0.1}]',
    ):
        response = client.post(profile, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 422, response.text
        assert "row 1, field" in response.json()["detail"]
    assert stored_count(database) == 0


def test_an_hour_not_over_yet_is_refused(client: TestClient, profile: str) -> None:
    # an hour counts as over 5 minutes before its end (clock skew): the hour holding the time
    # 6 minutes from now is not, the hour before the one now certainly is
    later = datetime.now(UTC) + timedelta(minutes=6)
    current = later.replace(minute=0, second=0, microsecond=0)
    refused = client.post(profile, json=[hour_row(0, hour=current.isoformat())])
    assert refused.status_code == 422
    assert "has not ended yet" in refused.json()["detail"]
    ended = hour_row(0, hour=(current - timedelta(hours=2)).isoformat())
    assert client.post(profile, json=[ended]).status_code == 200


def test_bodies_that_are_no_list_of_hours_are_a_422(client: TestClient, profile: str) -> None:
    cases = [
        (b"not json", "not valid JSON"),
        (b'[{"requests": ' + b"9" * 5000 + b"}]", "not readable JSON"),
        (b"{}", "must be a JSON list"),
        (b"[]", "no observations given"),
        (b"[3]", "row 1: an object"),
    ]
    for body, message in cases:
        response = client.post(profile, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 422 and message in response.json()["detail"], body
    too_many = [hour_row(h) for h in range(10_001)]
    response = client.post(profile, json=too_many)
    assert response.status_code == 422
    assert "limit is 10,000" in response.json()["detail"]


def test_an_unknown_profile_is_a_404(client: TestClient) -> None:
    assert client.post(URL.format(name="nope"), json=[hour_row(0)]).status_code == 404
    assert client.get(URL.format(name="nope")).status_code == 404


def test_deleting_the_profile_deletes_its_hours(
    client: TestClient, profile: str, database: Database
) -> None:
    assert client.post(profile, json=[hour_row(h) for h in range(5)]).status_code == 200
    assert stored_count(database) == 5
    assert client.delete("/v1/gpu-profiles/h100-70b").status_code == 204
    assert stored_count(database) == 0
    assert client.post("/v1/gpu-profiles", json=PROFILE).status_code == 201
    assert client.get(profile).json() == []


def test_posting_hours_needs_a_key_when_keys_are_configured(settings: Settings) -> None:
    keyed = settings.model_copy(update={"api_keys": "s3cret"})
    with TestClient(create_app(keyed)) as client:
        headers = {"X-API-Key": "s3cret"}
        assert client.post("/v1/gpu-profiles", json=PROFILE, headers=headers).status_code == 201
        url = URL.format(name="h100-70b")
        denied = client.post(url, json=[hour_row(0)])
        assert denied.status_code == 401
        assert client.get(url).json() == []
        assert client.post(url, json=[hour_row(0)], headers=headers).status_code == 200
        assert len(client.get(url).json()) == 1


def test_the_openapi_schema_documents_the_body(client: TestClient) -> None:
    path = client.get("/openapi.json").json()["paths"]["/v1/gpu-profiles/{name}/observations"]
    schema = path["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema["maxItems"] == 10_000
    assert set(schema["items"]["required"]) == set(hour_row(0))
    assert "get" in path


# -- CLI -------------------------------------------------------------------------------------


def test_cli_observe_reads_csv_and_json(
    client: TestClient,
    profile: str,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = ["--database-url", database_url]
    rows = [hour_row(h) for h in range(3)]
    csv_file = tmp_path / "hours.csv"
    csv_file.write_text(csv_text(rows))
    assert main([*db, "profile", "observe", "h100-70b", str(csv_file)]) == 0
    assert "3 production hour(s) of GPU profile h100-70b stored" in capsys.readouterr().out
    json_file = tmp_path / "hours.json"
    json_file.write_text(json.dumps([hour_row(2, ttft_p95_s=0.8), hour_row(3)]))
    assert main([*db, "profile", "observe", "h100-70b", str(json_file)]) == 0
    capsys.readouterr()
    read = client.get(profile).json()
    assert len(read) == 4 and read[2]["ttft_p95_s"] == 0.8 and read[0]["requests"] == 7200


def test_cli_observe_refuses_a_bad_file_in_one_line(
    client: TestClient,
    profile: str,
    database: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = ["--database-url", database_url]
    bad = tmp_path / "bad.csv"
    rows = [hour_row(0), hour_row(1, tpot_p95_s=25.0)]
    bad.write_text(csv_text(rows))
    assert main([*db, "profile", "observe", "h100-70b", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "row 2, field tpot_p95_s" in err and "bad.csv" in err
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    assert main([*db, "profile", "observe", "h100-70b", str(broken)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    # nesting beyond the parser, an integer beyond int(), a repeated column, a long row:
    # each one line naming the file, exit 2
    files = {
        "deep.json": ("[" * 2000 + "]" * 2000, "nests 2000 levels deep; the limit is 32"),
        "huge.json": ('[{"requests": ' + "9" * 5000 + "}]", "not readable JSON"),
        "twice.csv": (
            csv_text(rows).replace("tpot_p95_s\n", "tpot_p95_s,replicas\n", 1),
            "column 'replicas' appears more than once",
        ),
        "long.csv": (
            csv_text([hour_row(h) for h in range(4)]).replace("0.025\n", "0.025,7\n", 1),
            "row 1 has more cells than columns",
        ),
    }
    for name, (content, message) in files.items():
        path = tmp_path / name
        path.write_text(content)
        assert main([*db, "profile", "observe", "h100-70b", str(path)]) == 2, name
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err and name in err, err
    good = tmp_path / "good.json"
    good.write_text(json.dumps([hour_row(0)]))
    assert main([*db, "profile", "observe", "nope", str(good)]) == 2
    assert "not found" in capsys.readouterr().err
    assert stored_count(database) == 0
