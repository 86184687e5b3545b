"""docker-compose.yml cannot run here (no Docker engine); check its structure instead."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def load_compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_postgres_service_has_healthcheck_and_volume() -> None:
    postgres = load_compose()["services"]["postgres"]
    assert postgres["image"].startswith("postgres:")
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    volume = postgres["volumes"][0].split(":")[0]
    assert volume in load_compose()["volumes"]


def test_api_waits_for_healthy_postgres_and_migrates_first() -> None:
    api = load_compose()["services"]["api"]
    assert api["build"] == "."
    assert api["depends_on"]["postgres"]["condition"] == "service_healthy"
    url = api["environment"]["GPUCAST_DATABASE_URL"]
    assert url.startswith("postgresql://") and "@postgres:5432/" in url
    command = " ".join(api["command"])
    assert command.index("gpucast db upgrade") < command.index("gpucast serve")
    assert (ROOT / "Dockerfile").is_file()


def test_dockerfile_copies_every_package() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in ("app", "forecasting", "capacity", "migrations"):
        assert f"COPY {package} ./{package}" in dockerfile
