"""a GPU profile's observations: production hours of the running fleet (replicas, requests and
tokens in the hour across the replicas, p95 TTFT and TPOT as served), one row per profile and
hour

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07 02:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gpu_profile_observations",
        sa.Column("gpu_profile_id", sa.Integer(), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("replicas", sa.Integer(), nullable=False),
        sa.Column("requests", sa.Float(), nullable=False),
        sa.Column("prompt_tokens", sa.Float(), nullable=False),
        sa.Column("completion_tokens", sa.Float(), nullable=False),
        sa.Column("ttft_p95_s", sa.Float(), nullable=False),
        sa.Column("tpot_p95_s", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["gpu_profile_id"],
            ["gpu_profiles.id"],
            name=op.f("fk_gpu_profile_observations_gpu_profile_id_gpu_profiles"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("gpu_profile_id", "hour", name=op.f("pk_gpu_profile_observations")),
    )


def downgrade() -> None:
    op.drop_table("gpu_profile_observations")
