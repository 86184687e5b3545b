"""ORM model of a deployment's serving-metrics source (apart from ``models``, which is full)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models import Base, utcnow
from app.db.types import UTCDateTime


class ServingSource(Base):
    """Where the hourly cycle measures a deployed series' production hours: a Prometheus
    server and the series its serving engine exports (:mod:`app.sources.serving_spec`).
    ``bearer_token`` is write-only; the ``last_*``, failure and skip columns are written by the
    hourly import."""

    __tablename__ = "serving_sources"

    series_id: Mapped[int] = mapped_column(
        ForeignKey("series.id", ondelete="CASCADE"), primary_key=True
    )
    url: Mapped[str] = mapped_column(String(2000))
    engine: Mapped[str] = mapped_column(String(20))
    ttft_histogram: Mapped[str] = mapped_column(String(200))
    tpot_histogram: Mapped[str] = mapped_column(String(200))
    requests_counter: Mapped[str] = mapped_column(String(200))
    prompt_tokens_counter: Mapped[str] = mapped_column(String(200))
    completion_tokens_counter: Mapped[str] = mapped_column(String(200))
    running_gauge: Mapped[str] = mapped_column(String(200))
    selector: Mapped[str | None] = mapped_column(Text)
    kube_deployment: Mapped[str | None] = mapped_column(String(253))
    replicas_query: Mapped[str | None] = mapped_column(Text)
    bearer_token: Mapped[str | None] = mapped_column(Text)
    timeout_s: Mapped[float] = mapped_column(Float, default=30.0)
    lookback_hours: Mapped[int] = mapped_column(Integer, default=48)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_error: Mapped[str | None] = mapped_column(Text)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    failures_total: Mapped[int] = mapped_column(Integer, default=0)
    hours_skipped_total: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
