"""serving sources: per deployed series, the Prometheus server and the engine's series (TTFT
and TPOT histograms, token and request counters, running requests) from which the hourly cycle
measures the profile's production hours

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07 06:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAMES = (
    "ttft_histogram",
    "tpot_histogram",
    "requests_counter",
    "prompt_tokens_counter",
    "completion_tokens_counter",
    "running_gauge",
)


def upgrade() -> None:
    op.create_table(
        "serving_sources",
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("engine", sa.String(length=20), nullable=False),
        *(sa.Column(name, sa.String(length=200), nullable=False) for name in NAMES),
        sa.Column("selector", sa.Text(), nullable=True),
        sa.Column("kube_deployment", sa.String(length=253), nullable=True),
        sa.Column("replicas_query", sa.Text(), nullable=True),
        sa.Column("bearer_token", sa.Text(), nullable=True),
        sa.Column("timeout_s", sa.Float(), nullable=False),
        sa.Column("lookback_hours", sa.Integer(), nullable=False),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_success_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("failures_total", sa.Integer(), nullable=False),
        sa.Column("hours_skipped_total", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["series.id"],
            name=op.f("fk_serving_sources_series_id_series"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("series_id", name=op.f("pk_serving_sources")),
    )


def downgrade() -> None:
    op.drop_table("serving_sources")
