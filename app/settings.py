"""Service settings, read from ``GPUCAST_*`` environment variables and an optional ``.env``.

Settings are built by :func:`get_settings`, never at import time, so tests and the CLI can
construct them with explicit values.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.common.options import DEFAULT_PUBLIC_URL

if TYPE_CHECKING:
    from app.db.timeouts import DatabaseTimeouts


def default_database_url() -> str:
    """The embedded SQLite file used when ``GPUCAST_DATABASE_URL`` is not set."""
    data_home = Path.home() / ".local" / "share" / "gpucast"
    return f"sqlite:///{data_home / 'gpucast.db'}"


def demo_database_url() -> str:
    """The SQLite file ``gpucast demo`` uses unless a database is named, beside the default."""
    return default_database_url().removesuffix("gpucast.db") + "demo.db"


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
    read_deadline_s: float = Field(
        default=120.0,
        ge=0,
        le=3600,
        description="Wall-clock seconds a read (GET, Grafana query) may take before it is "
        "answered 503 (0: no deadline); bounds a request made of many short statements.",
    )
    write_deadline_s: float = Field(
        default=120.0,
        ge=0,
        le=3600,
        description="Wall-clock seconds a write may take before its first commit; past it the "
        "client gets a 503 and the write is rolled back, never stored (0: no deadline).",
    )
    public_url: str = Field(
        default=DEFAULT_PUBLIC_URL,
        pattern=r"^https?://[^\s?#]+$",
        max_length=500,
        description="gpucast's base URL as the cluster reaches it: the address every generated "
        "object (KEDA ScaledObjects) and link carries.",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    auto_migrate: bool | None = Field(
        default=None,
        description="Apply migrations on startup; defaults to true for SQLite only.",
    )
    # PostgreSQL round-trip bounds (app.db.timeouts): a silent network path or a stalled server
    # becomes a 503 (the CLI: exit code 3) instead of a hang.
    db_connect_timeout_s: int = Field(
        default=3, ge=2, le=300, description="Seconds a new database connection may take."
    )
    db_statement_timeout_s: float = Field(
        default=5.0,
        ge=0,
        le=86400,
        description="Server: PostgreSQL statement_timeout of API requests; the server also "
        "stops waiting for any reply 1 s after it (0 disables both).",
    )
    db_job_statement_timeout_s: float = Field(
        default=60.0,
        ge=0,
        le=86400,
        description="The same bound for CLI commands and jobs (bulk ingest, nightly, hourly).",
    )
    db_pool_timeout_s: float = Field(
        default=5.0, ge=0, le=300, description="Seconds to wait for a free pooled connection."
    )
    db_idle_in_transaction_timeout_s: float = Field(
        default=60.0,
        ge=0,
        le=86400,
        description="PostgreSQL ends a session left idle inside a transaction this long.",
    )
    db_tcp_timeout_s: int = Field(
        default=10,
        ge=2,
        le=3600,
        description="A TCP path silent this long is dead: keepalive probes and tcp_user_timeout "
        "on both ends.",
    )

    @field_validator("database_url")
    @classmethod
    def _normalize_url(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
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

    def database_timeouts(self, *, jobs: bool = False) -> DatabaseTimeouts:
        """The round-trip bounds of the API server, or (``jobs``) of CLI commands and jobs."""
        from app.db.timeouts import DatabaseTimeouts

        return DatabaseTimeouts(
            connect_s=self.db_connect_timeout_s,
            statement_s=self.db_job_statement_timeout_s if jobs else self.db_statement_timeout_s,
            pool_s=self.db_pool_timeout_s,
            idle_in_transaction_s=self.db_idle_in_transaction_timeout_s,
            tcp_s=self.db_tcp_timeout_s,
        )


def get_settings(**overrides: object) -> Settings:
    """Build settings from the environment, with keyword overrides taking precedence."""
    return Settings(**overrides)  # type: ignore[arg-type]
