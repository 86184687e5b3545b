"""series sources: the Prometheus server and queries the hourly loop imports from

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "series_sources",
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("requests_query", sa.Text(), nullable=False),
        sa.Column("prompt_tokens_query", sa.Text(), nullable=True),
        sa.Column("completion_tokens_query", sa.Text(), nullable=True),
        sa.Column("bearer_token", sa.Text(), nullable=True),
        sa.Column("shift", sa.Boolean(), nullable=False),
        sa.Column("timeout_s", sa.Float(), nullable=False),
        sa.Column("lookback_hours", sa.Integer(), nullable=False),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_success_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("failures_total", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["series.id"],
            name=op.f("fk_series_sources_series_id_series"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("series_id", name=op.f("pk_series_sources")),
    )


def downgrade() -> None:
    op.drop_table("series_sources")
