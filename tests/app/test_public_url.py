"""gpucast's address as the cluster sees it (GPUCAST_PUBLIC_URL) is what every generated KEDA
object polls, from the REST API and the CLI alike, never the address a request came in by."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from app.api import create_app
from app.cli import main
from app.settings import get_settings
from tests.app.test_plan_surfaces import SERIES, _load, history_rows
from tests.support.clock import settled_hour

PUBLIC = "https://gpucast.inference.svc.cluster.local:8443"


def trigger_url(text: str) -> str:
    triggers = yaml.safe_load(text)["spec"]["triggers"]
    return str(triggers[0]["metadata"]["url"])


@pytest.fixture
def public_client(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("GPUCAST_PUBLIC_URL", PUBLIC)
    settings = get_settings(database_url=database_url, auto_migrate=False)
    with TestClient(create_app(settings)) as client:
        yield _load(client, history_rows(settled_hour()))


def test_rest_and_cli_objects_poll_the_public_url(
    public_client: TestClient, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rest = public_client.get(f"/v1/series/{SERIES}/kubernetes", params={"profile": "l4-small"})
    assert rest.status_code == 200, rest.text
    assert trigger_url(rest.text).startswith(f"{PUBLIC}/v1/series/{SERIES}/desired-replicas")
    assert "testserver" not in rest.text
    capsys.readouterr()
    argv = ["--database-url", database_url, "plan", SERIES, "--profile", "l4-small"]
    assert main([*argv, "--kubernetes"]) == 0
    assert trigger_url(capsys.readouterr().out) == trigger_url(rest.text)


@pytest.fixture
def plain_client(client: TestClient) -> TestClient:
    return _load(client, history_rows(settled_hour()))


def test_without_a_setting_both_use_the_in_cluster_service(
    plain_client: TestClient, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rest = plain_client.get(f"/v1/series/{SERIES}/kubernetes", params={"profile": "l4-small"})
    assert trigger_url(rest.text).startswith("http://gpucast:8000/v1/")
    capsys.readouterr()
    argv = ["--database-url", database_url, "plan", SERIES, "--profile", "l4-small"]
    assert main([*argv, "--kubernetes"]) == 0
    assert trigger_url(capsys.readouterr().out) == trigger_url(rest.text)


def test_an_explicit_url_still_wins(public_client: TestClient) -> None:
    rest = public_client.get(
        f"/v1/series/{SERIES}/kubernetes",
        params={"profile": "l4-small", "gpucast_url": "http://other:9000"},
    )
    assert trigger_url(rest.text).startswith("http://other:9000/v1/")


def test_a_malformed_public_url_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUCAST_PUBLIC_URL", "gpucast:8000")
    argv = ["--database-url", f"sqlite:///{tmp_path / 'x.db'}", "series", "list"]
    assert main(argv) == 2
    assert "public_url" in capsys.readouterr().err.lower()
