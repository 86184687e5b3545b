"""Traffic without a key costs a header check: a keyed server answers an anonymous write its
401 before reading the body (however large), stays responsive meanwhile, and scans the large
bodies of keyed clients off the event loop."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from app.api import create_app, guard
from app.settings import Settings, get_settings
from tests.support.server import LiveServer

KEY = "k1"
#: the attack's body: 19 MB of empty arrays, each one a depth the guard's scan steps through
BODY_BYTES = 19_000_000
SENT_BYTES = 64 * 1024


@pytest.fixture
def keyed(database_url: str) -> Settings:
    return get_settings(database_url=database_url, auto_migrate=False, api_keys=KEY)


@pytest.fixture
def server(keyed: Settings) -> Iterator[str]:
    with LiveServer(keyed) as base_url:
        yield base_url


def _status_line(sock: socket.socket) -> str:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0].decode()


@pytest.mark.parametrize("path", ["/v1/series", "/v1/gpu-profiles", "/v1/series/svc/deployment"])
def test_an_anonymous_19_mb_body_is_refused_before_it_is_sent(server: str, path: str) -> None:
    port = int(server.rsplit(":", 1)[1])
    method = "PUT" if path.endswith("deployment") else "POST"
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {BODY_BYTES}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + b"[" + b"[]," * (SENT_BYTES // 3))
        # the client has sent a third of a percent of its body: the answer comes all the same
        assert _status_line(sock) == "HTTP/1.1 401 Unauthorized"
        # and while that connection is still open, the server answers others
        with httpx.Client(base_url=server, timeout=30) as other:
            assert other.get("/healthz").status_code == 200
            created = other.post("/v1/series", json={"name": "svc"}, headers={"X-API-Key": KEY})
            assert created.status_code == 201, created.text


def test_the_body_is_never_read_before_the_key_check(
    keyed: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    scanned: list[int] = []
    original = guard._check_json

    def spy(body: bytes) -> None:
        scanned.append(len(body))
        original(body)

    monkeypatch.setattr(guard, "_check_json", spy)
    body = b"[" + b"[]," * 200_000 + b"[]]"
    with TestClient(create_app(keyed)) as client:
        for headers in ({}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer nope"}):
            response = client.post("/v1/series", content=body, headers=headers)
            assert response.status_code == 401, response.text
            assert response.headers["www-authenticate"] == "Bearer"
        assert scanned == []
        # an anonymous write to a path no route answers costs no more
        assert client.post("/v1/nowhere", content=body).status_code == 401
        # nor does a body sent with a read: no route reads it
        assert client.request("GET", "/v1/series", content=body).status_code == 200
        assert scanned == []
        # reads need no key by default, writes with the key are scanned
        assert client.get("/v1/series").status_code == 200
        response = client.post("/v1/series", content=body, headers={"X-API-Key": KEY})
        assert response.status_code == 422 and scanned == [len(body)]


def test_a_large_body_is_scanned_off_the_event_loop(
    keyed: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_loop: list[bool] = []
    original = guard._check_json

    def spy(body: bytes) -> None:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        original(body)

    monkeypatch.setattr(guard, "_check_json", spy)
    deep = ("[" * 40 + "]" * 40).encode()
    large = json.dumps({"name": "svc", "labels": {"pad": "x" * guard.OFF_LOOP_BYTES}}).encode()
    headers = {"X-API-Key": KEY}
    with TestClient(create_app(keyed)) as client:
        assert client.post("/v1/series", content=deep, headers=headers).status_code == 422
        response = client.post("/v1/series", content=large + b" " + deep, headers=headers)
        assert response.status_code == 422, response.text
        assert "nests" in response.json()["detail"]
    assert on_loop == [True, False]
