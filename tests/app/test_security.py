"""Security basics: loopback by default, keys never echoed or logged, secrets not in errors."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.api.deps import _key_is_valid
from app.cli import main
from app.settings import Settings, get_settings


def test_server_binds_loopback_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUCAST_HOST", raising=False)
    assert get_settings().host == "127.0.0.1"


def test_keys_are_compared_in_constant_time_against_every_key() -> None:
    assert _key_is_valid("b", ["a", "b", "c"])
    assert not _key_is_valid("d", ["a", "b", "c"])
    assert not _key_is_valid("", ["a"])


def test_api_keys_never_appear_in_responses_or_logs(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-live-very-secret-key"
    keyed = settings.model_copy(update={"api_keys": f"{secret},other"})
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(keyed)) as client:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-key"},
            {"Authorization": f"Bearer {secret}"},
            {"X-API-Key": secret},
        ):
            response = client.post("/v1/series", json={"name": "s"}, headers=headers)
            assert secret not in response.text
            assert "wrong-key" not in response.text
        assert secret not in client.get("/openapi.json").text
        assert secret not in client.get("/metrics").text
    assert secret not in caplog.text
    assert "wrong-key" not in caplog.text


def test_database_password_not_in_cli_error(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "ok.csv"
    path.write_text("timestamp,requests\n2026-11-30T00:00:00Z,10\n")
    code = main(
        [
            "--database-url",
            "postgresql://admin:hunter2-secret@127.0.0.1:1/db",
            "ingest",
            "hourly",
            str(path),
            "--series",
            "s",
        ]
    )
    assert code == 3
    assert "hunter2-secret" not in capsys.readouterr().err
