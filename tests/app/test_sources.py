"""A series' source over REST and the CLI: validation, write-only credentials, removal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.cli import main
from app.db import Database
from app.db.models import SeriesSource
from app.errors import InputError
from app.sources import SourceSpec, redact, redact_url
from app.sources.spec import plain_url

SOURCE = {
    "url": "http://gpucast:pa55word@prometheus.monitoring.svc:9090/prom",
    "requests_query": 'sum(increase(vllm:request_success_total{model_name="m"}[1h]))',
    "prompt_tokens_query": "sum(increase(vllm:prompt_tokens_total[1h]))",
    "bearer_token": "tok-Zq81xw",
}


@pytest.fixture
def chat(client: TestClient) -> TestClient:
    assert client.post("/v1/series", json={"name": "prod/chat"}).status_code == 201
    return client


def test_put_get_delete_and_credentials_are_never_returned(chat: TestClient) -> None:
    response = chat.put("/v1/series/prod/chat/source", json=SOURCE)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["url"] == "http://gpucast:***@prometheus.monitoring.svc:9090/prom"
    assert body["bearer_token"] == "set"
    assert (body["shift"], body["timeout_s"], body["lookback_hours"]) == (True, 30.0, 48)
    assert body["completion_tokens_query"] is None and body["consecutive_failures"] == 0
    got = chat.get("/v1/series/prod/chat/source")
    assert got.status_code == 200 and got.json() == body
    for text in (response.text, got.text):
        assert "pa55word" not in text and "tok-Zq81xw" not in text

    # PUT replaces the whole source: without a token there is none any more.
    replaced = chat.put(
        "/v1/series/prod/chat/source",
        json={"url": "https://prom.example", "requests_query": "up", "shift": False},
    )
    assert replaced.status_code == 200
    assert replaced.json()["bearer_token"] is None and replaced.json()["shift"] is False
    assert replaced.json()["prompt_tokens_query"] is None

    assert chat.delete("/v1/series/prod/chat/source").status_code == 204
    missing = chat.get("/v1/series/prod/chat/source")
    assert missing.status_code == 404
    assert missing.json()["detail"] == "series 'prod/chat' has no source"
    assert chat.delete("/v1/series/prod/chat/source").status_code == 404


def test_unknown_series_is_a_404(client: TestClient) -> None:
    response = client.put("/v1/series/ghost/source", json=SOURCE)
    assert response.status_code == 404 and "series 'ghost' not found" in response.text
    assert client.get("/v1/series/ghost/source").status_code == 404


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"url": "ftp://prom:21"}, "invalid source URL 'ftp://prom:21'"),
        ({"url": "http://prom:9090/?x=1"}, "without query or fragment"),
        ({"url": "http://10.0.0.300:9090"}, "invalid source URL"),
        ({"url": "http://u:hunter2@prom:99999"}, "invalid source URL 'http://u:***@prom:99999'"),
        ({"requests_query": "   "}, "requests query must be PromQL"),
        ({"prompt_tokens_query": "up\x00"}, "prompt_tokens_query contains the control character"),
        ({"requests_query": "x" * 4001}, "at most 4000 characters"),
        ({"bearer_token": "two words"}, "bearer token must be 1..4096 visible ASCII"),
        ({"timeout_s": 0}, "greater than 0"),
        ({"lookback_hours": 0}, "greater than or equal to 1"),
        ({"shift": "yes"}, "valid boolean"),
        ({"labels": {}}, "Extra inputs are not permitted"),
    ],
)
def test_bad_sources_are_422_and_store_nothing(
    chat: TestClient, database: Database, change: dict[str, object], message: str
) -> None:
    response = chat.put("/v1/series/prod/chat/source", json=SOURCE | change)
    assert response.status_code == 422, response.text
    assert message in response.text
    assert "hunter2" not in response.text
    with database.transaction() as session:
        assert session.scalars(select(SeriesSource)).all() == []


def test_deleting_the_series_deletes_its_source(chat: TestClient, database: Database) -> None:
    assert chat.put("/v1/series/prod/chat/source", json=SOURCE).status_code == 200
    assert chat.delete("/v1/series/prod/chat").status_code == 204
    with database.transaction() as session:
        assert session.scalars(select(SeriesSource)).all() == []


def test_writes_need_a_key_when_keys_are_configured(database_url: str) -> None:
    from app.api import create_app
    from app.settings import get_settings

    settings = get_settings(database_url=database_url, auto_migrate=False, api_keys="k1")
    with TestClient(create_app(settings)) as client:
        headers = {"Authorization": "Bearer k1"}
        assert client.post("/v1/series", json={"name": "a"}, headers=headers).status_code == 201
        assert client.put("/v1/series/a/source", json=SOURCE).status_code == 401
        assert client.put("/v1/series/a/source", json=SOURCE, headers=headers).status_code == 200
        assert client.delete("/v1/series/a/source").status_code == 401
        assert client.get("/v1/series/a/source").status_code == 200


def test_a_series_named_like_the_sub_resource_is_rejected(client: TestClient) -> None:
    response = client.post("/v1/series", json={"name": "prod/source"})
    assert response.status_code == 422 and "'source' is reserved" in response.text


# -- CLI ---------------------------------------------------------------------------------------


@pytest.fixture
def db_args(tmp_path: Path) -> list[str]:
    return ["--database-url", f"sqlite:///{tmp_path / 'cli.db'}"]


def test_cli_sets_shows_and_clears_a_source(
    db_args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROM_TOKEN", "tok-Zq81xw\n")
    command = [*db_args, "series", "source", "prod/chat", "--url", SOURCE["url"]]
    command += ["--requests-query", SOURCE["requests_query"], "--bearer-token-env", "PROM_TOKEN"]
    assert main([*command, "--no-shift", "--timeout", "5", "--lookback", "24"]) == 0
    out = capsys.readouterr().out
    assert "source of prod/chat set" in out  # the series is created on the way
    assert main([*db_args, "series", "source", "prod/chat"]) == 0
    shown = capsys.readouterr().out
    for text in (out, shown):
        assert "pa55word" not in text and "tok-Zq81xw" not in text
    assert "http://gpucast:***@prometheus.monitoring.svc:9090/prom" in shown
    assert " bearer_token             set" in shown
    assert " shift                    False" in shown and " lookback_hours           24" in shown
    assert main([*db_args, "series", "list"]) == 0
    assert "prod/chat" in capsys.readouterr().out

    assert main([*db_args, "series", "source", "prod/chat", "--clear"]) == 0
    assert "source of prod/chat removed" in capsys.readouterr().out
    assert main([*db_args, "series", "source", "prod/chat"]) == 0
    assert "series prod/chat has no source; set one with" in capsys.readouterr().out


def test_cli_reads_the_token_from_a_file(
    db_args: list[str], tmp_path: Path, database_from_args: Database
) -> None:
    token = tmp_path / "token"
    token.write_text("tok-from-file\n")
    command = [*db_args, "series", "source", "s", "--url", "http://prom:9090"]
    assert main([*command, "--requests-query", "up", "--bearer-token-file", str(token)]) == 0
    with database_from_args.transaction() as session:
        assert session.scalars(select(SeriesSource.bearer_token)).one() == "tok-from-file"


@pytest.fixture
def database_from_args(db_args: list[str]) -> Iterator[Database]:
    from app.db import open_database

    database = open_database(db_args[1])
    yield database
    database.dispose()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--url", "http://prom:9090"], "setting a source needs --url and --requests-query"),
        (["--url", "prom:9090", "--requests-query", "up"], "invalid source URL 'prom:9090'"),
        (["--url", "http://prom", "--requests-query", " "], "requests query must be PromQL"),
        (["--url", "http://prom", "--requests-query", "up", "--timeout", "0"], "timeout must be"),
        (["--url", "http://prom", "--requests-query", "up", "--bearer-token-env", "NOPE_X"],
         "environment variable NOPE_X is not set or empty"),
        (["--clear", "--url", "http://prom"], "--clear takes no other source options"),
        (["--clear"], "series 'prod/chat' has no source"),
    ],
)  # fmt: skip
def test_cli_bad_input_exits_2_with_one_line(
    db_args: list[str], capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    source = ["series", "source", "prod/chat"]
    assert main([*db_args, *source, "--url", "http://p", "--requests-query", "up"]) == 0
    assert main([*db_args, *source, "--clear"]) == 0  # the series stays, without a source
    capsys.readouterr()
    assert main([*db_args, *source, *options]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpucast: error: ")
    assert message in err


def test_cli_unknown_series_and_unavailable_database(
    db_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*db_args, "series", "source", "ghost"]) == 2
    assert "series 'ghost' not found" in capsys.readouterr().err
    down = ["--database-url", "postgresql://postgres@127.0.0.1:1/none"]
    source = ["series", "source", "s", "--url", "http://p", "--requests-query", "up"]
    assert main([*down, *source]) == 3
    assert "database unavailable" in capsys.readouterr().err


# -- redaction ---------------------------------------------------------------------------------


def test_redaction_of_urls_and_messages() -> None:
    spec = SourceSpec(url="http://me:s%40cret@prom:9090", requests_query="up", bearer_token="tkn-1")
    assert redact_url(spec.url) == "http://me:***@prom:9090"
    assert redact_url("https://ghp_token123@prom") == "https://***@prom"
    assert redact_url("http://prom:9090") == "http://prom:9090"
    assert plain_url(spec.url) == "http://prom:9090"
    message = f"failed at {spec.url}: auth s@cret / s%40cret / Bearer tkn-1"
    assert redact(message, spec) == "failed at http://me:***@prom:9090: auth *** / *** / Bearer ***"


def test_spec_validation_names_the_field() -> None:
    with pytest.raises(InputError, match=r"lookback must be 1\.\.2160 hours"):
        SourceSpec(url="http://prom", requests_query="up", lookback_hours=10_000).validate()
    with pytest.raises(InputError, match=r"the completion_tokens query is 4001 characters long"):
        SourceSpec(
            url="http://prom", requests_query="up", completion_tokens_query="x" * 4001
        ).validate()


def test_a_short_password_is_redacted_where_it_stands_not_inside_every_word() -> None:
    from app.common.urls import scrub

    url = "http://u:p@prometheus:9090"
    message = f"GET {url}/api/v1/query failed: 401 for password p at http://prometheus:9090"
    assert scrub(message, url) == (
        "GET http://u:***@prometheus:9090/api/v1/query failed: 401 for password *** at "
        "http://prometheus:9090"
    )
    long_url = "http://u:hunter2hunter2@prometheus:9090"
    # a long secret is redacted wherever it appears, inside a word too
    assert scrub("token=xhunter2hunter2y", long_url) == "token=x***y"
