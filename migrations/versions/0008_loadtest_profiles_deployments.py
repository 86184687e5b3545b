"""load-test profiles and deployments: a GPU profile's measured load-test table, and the
profile (and p95 latency SLO) that serves each series

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-10 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gpu_profile_loadtests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gpu_profile_id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("gpu_type", sa.String(length=100), nullable=True),
        sa.Column("tensor_parallel", sa.Integer(), nullable=True),
        sa.Column("precision", sa.String(length=100), nullable=True),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("records", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["gpu_profile_id"],
            ["gpu_profiles.id"],
            name=op.f("fk_gpu_profile_loadtests_gpu_profile_id_gpu_profiles"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_profile_loadtests")),
        sa.UniqueConstraint("gpu_profile_id", name=op.f("uq_gpu_profile_loadtests_gpu_profile_id")),
    )
    op.create_table(
        "series_deployments",
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("gpu_profile_id", sa.Integer(), nullable=False),
        sa.Column("ttft_p95_s", sa.Float(), nullable=True),
        sa.Column("tpot_p95_s", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["series.id"],
            name=op.f("fk_series_deployments_series_id_series"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["gpu_profile_id"],
            ["gpu_profiles.id"],
            name=op.f("fk_series_deployments_gpu_profile_id_gpu_profiles"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("series_id", name=op.f("pk_series_deployments")),
    )
    with op.batch_alter_table("series_deployments", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_series_deployments_gpu_profile_id"), ["gpu_profile_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("series_deployments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_series_deployments_gpu_profile_id"))
    op.drop_table("series_deployments")
    op.drop_table("gpu_profile_loadtests")
