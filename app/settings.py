"""Service settings, read from ``GPUCAST_*`` environment variables and an optional ``.env``.

Settings are built by :func:`get_settings`, never at import time, so tests and the CLI can
construct them with explicit values.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_database_url() -> str:
    """The embedded SQLite file used when ``GPUCAST_DATABASE_URL`` is not set."""
    data_home = Path.home() / ".local" / "share" / "gpucast"
    return f"sqlite:///{data_home / 'gpucast.db'}"


def normalize_database_url(url: str) -> str:
    """Map ``postgres://`` and ``postgresql://`` URLs to the psycopg 3 driver."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class Settings(BaseSettings):
    """gpucast service configuration (environment prefix ``GPUCAST_``)."""

    model_config = SettingsConfigDict(
        env_prefix="GPUCAST_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    database_url: str = Field(default_factory=default_database_url)
    api_keys: str = Field(
        default="", description="Comma-separated API keys; when set, writes need one."
    )
    read_requires_key: bool = False
    cors_origins: str = Field(default="", description="Comma-separated allowed origins.")
    max_body_bytes: int = Field(default=20 * 1024 * 1024, gt=0)
    read_cache_ttl_s: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="Seconds a computed plan response may be served again without the database "
        "(0 disables); writes through this server clear it at once.",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    auto_migrate: bool | None = Field(
        default=None,
        description="Apply migrations on startup; defaults to true for SQLite only.",
    )

    @field_validator("database_url")
    @classmethod
    def _normalize_url(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("GPUCAST_DATABASE_URL must not be empty")
        return normalize_database_url(value)

    @property
    def api_key_list(self) -> list[str]:
        return [key.strip() for key in self.api_keys.split(",") if key.strip()]

    @property
    def cors_origin_list(self) -> list[str]:
        return [origin.strip() for origin in self.cors_origins.split(",") if origin.strip()]

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def should_auto_migrate(self) -> bool:
        return self.is_sqlite if self.auto_migrate is None else self.auto_migrate


def get_settings(**overrides: object) -> Settings:
    """Build settings from the environment, with keyword overrides taking precedence."""
    return Settings(**overrides)  # type: ignore[arg-type]
