"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-12-01 09:18:31.552254
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gpu_profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("gpu_type", sa.String(length=100), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("tokens_per_s_per_gpu", sa.Float(), nullable=False),
        sa.Column("gpus_per_replica", sa.Integer(), nullable=False),
        sa.Column("usd_per_hour_on_demand", sa.Float(), nullable=True),
        sa.Column("usd_per_hour_reserved", sa.Float(), nullable=True),
        sa.Column("usd_per_hour_spot", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_profiles")),
        sa.UniqueConstraint("name", name=op.f("uq_gpu_profiles_name")),
    )
    op.create_table(
        "series",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_series")),
        sa.UniqueConstraint("name", name=op.f("uq_series_name")),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=True),
        sa.Column("multiplier", sa.Float(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["series.id"],
            name=op.f("fk_events_series_id_series"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_series_id"), ["series_id"], unique=False)

    op.create_table(
        "observations",
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("requests", sa.Float(), nullable=False),
        sa.Column("prompt_tokens", sa.Float(), nullable=True),
        sa.Column("completion_tokens", sa.Float(), nullable=True),
        sa.Column("total_tokens", sa.Float(), nullable=True),
        sa.Column("peak_rps", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("series_id", "hour", name=op.f("pk_observations")),
    )


def downgrade() -> None:
    op.drop_table("observations")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_series_id"))

    op.drop_table("events")
    op.drop_table("series")
    op.drop_table("gpu_profiles")
