"""JSON bodies are judged as the parser reads them: UTF-16 and UTF-32, which Python's JSON
parser would decode but the guard's checks cannot read, are refused the same on both
databases, before anything is stored or parsed."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

ENCODINGS = ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]
EVENT = {
    "name": "launch",
    "start": "2026-12-01T00:00:00Z",
    "end": "2026-12-01T06:00:00Z",
    "description": "a NUL \u0000 inside",
}


def _post(client: TestClient, path: str, text: str, encoding: str) -> tuple[int, dict]:
    response = client.post(
        path,
        content=text.encode(encoding),
        headers={"content-type": "application/json"},
    )
    return response.status_code, response.json()


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_control_character_in_a_utf16_or_utf32_body_is_refused(
    client: TestClient, encoding: str
) -> None:
    status, body = _post(client, "/v1/events", json.dumps(EVENT), encoding)
    assert status == 415, body
    assert "UTF-8" in body["detail"]
    assert client.get("/v1/events").json() == []


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-32-be"])
def test_deep_nesting_in_utf16_or_utf32_never_reaches_a_parser(
    client: TestClient, encoding: str
) -> None:
    deep = "[" * 900 + "]" * 900
    for path in ("/v1/events", "/grafana/query", "/v1/series/x/observations"):
        status, body = _post(client, path, deep, encoding)
        assert status == 415, (path, body)


def test_utf8_with_or_without_a_byte_order_mark_is_read(client: TestClient) -> None:
    event = {**EVENT, "description": "plain"}
    assert _post(client, "/v1/events", json.dumps(event), "utf-8")[0] == 201
    assert _post(client, "/v1/events", json.dumps({**event, "name": "b"}), "utf-8-sig")[0] == 201
    status, body = _post(client, "/v1/events", json.dumps(EVENT), "utf-8")
    assert status == 422, body
