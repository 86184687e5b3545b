"""How long any database round trip may take, and the libpq parameters that enforce it.

Every wait is bounded, so a silent network path or a stalled server turns into an error (an
HTTP 503, a CLI exit code 3) within seconds instead of a hang:

- a new connection: ``connect_timeout`` (libpq; whole handshake);
- taking a pooled connection: ``pool_s`` waiting for a free one, then a ping bounded by
  ``connect_s`` (a pooled connection whose path died fails its ping, and the pool discards
  every connection made before it);
- a statement: ``statement_timeout`` on the server, and the client gives up waiting for any
  reply ``REPLY_GRACE_S`` after it (the server never saw the query, or its answer is lost);
- a dead TCP path under a long statement or an idle connection: keepalive probes and
  ``tcp_user_timeout``, on both ends (the server's own ``tcp_keepalives_*`` settings end the
  session of a vanished client, which releases its locks);
- a client that went away inside a transaction: ``idle_in_transaction_session_timeout``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REPLY_GRACE_S = 1.0
_LIBPQ_MIN_CONNECT_TIMEOUT_S = 2


@dataclass(frozen=True)
class DatabaseTimeouts:
    """Bounds in seconds; 0 disables ``statement_s`` and ``idle_in_transaction_s``."""

    connect_s: int = 3
    statement_s: float = 60.0
    pool_s: float = 5.0
    idle_in_transaction_s: float = 60.0
    tcp_s: int = 10

    def __post_init__(self) -> None:
        if self.connect_s < _LIBPQ_MIN_CONNECT_TIMEOUT_S:
            raise ValueError(f"connect timeout must be at least 2 s, got {self.connect_s}")
        if self.tcp_s < 2:
            raise ValueError(f"TCP timeout must be at least 2 s, got {self.tcp_s}")
        for name in ("statement_s", "pool_s", "idle_in_transaction_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")

    @property
    def reply_s(self) -> float | None:
        """How long the client waits for any reply (None: as long as the socket is open)."""
        return self.statement_s + REPLY_GRACE_S if self.statement_s else None

    @property
    def ping_s(self) -> float:
        return float(self.connect_s)

    def connect_args(self, url_options: str | None = None) -> dict[str, Any]:
        """libpq connection parameters; ``url_options`` (the URL's own ``options``) are kept
        and come last, so a value set there wins."""
        keepalive_idle = max(1, self.tcp_s // 2)
        keepalive_interval = max(1, self.tcp_s // 6)
        server = {
            "statement_timeout": _ms(self.statement_s),
            "idle_in_transaction_session_timeout": _ms(self.idle_in_transaction_s),
            "tcp_keepalives_idle": keepalive_idle,
            "tcp_keepalives_interval": keepalive_interval,
            "tcp_keepalives_count": 3,
            "tcp_user_timeout": self.tcp_s * 1000,
        }
        options = " ".join(f"-c {name}={value}" for name, value in server.items())
        if url_options:
            options = f"{options} {url_options}"
        return {
            "connect_timeout": self.connect_s,
            "keepalives": 1,
            "keepalives_idle": keepalive_idle,
            "keepalives_interval": keepalive_interval,
            "keepalives_count": 3,
            "tcp_user_timeout": self.tcp_s * 1000,
            "options": options,
        }


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


__all__ = ["REPLY_GRACE_S", "DatabaseTimeouts"]
