"""pools: shared fleets of identical nodes and the series packed onto them

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pools",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("gpu_type", sa.String(length=100), nullable=True),
        sa.Column("gpus_per_node", sa.Integer(), nullable=False),
        sa.Column("node_usd_per_hour_on_demand", sa.Float(), nullable=False),
        sa.Column("node_usd_per_hour_reserved", sa.Float(), nullable=True),
        sa.Column("node_usd_per_hour_spot", sa.Float(), nullable=True),
        sa.Column("quota_nodes", sa.Integer(), nullable=True),
        sa.Column("spot_interruption", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pools")),
        sa.UniqueConstraint("name", name=op.f("uq_pools_name")),
    )
    op.create_table(
        "pool_members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("gpu_profile_id", sa.Integer(), nullable=False),
        sa.Column("priority", sa.String(length=20), nullable=False),
        sa.Column("spot_ok", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["pool_id"],
            ["pools.id"],
            name=op.f("fk_pool_members_pool_id_pools"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["series.id"],
            name=op.f("fk_pool_members_series_id_series"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["gpu_profile_id"],
            ["gpu_profiles.id"],
            name=op.f("fk_pool_members_gpu_profile_id_gpu_profiles"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pool_members")),
        sa.UniqueConstraint("pool_id", "series_id", name=op.f("uq_pool_members_pool_id")),
    )
    with op.batch_alter_table("pool_members", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pool_members_series_id"), ["series_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_pool_members_gpu_profile_id"), ["gpu_profile_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("pool_members", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pool_members_gpu_profile_id"))
        batch_op.drop_index(batch_op.f("ix_pool_members_series_id"))
    op.drop_table("pool_members")
    op.drop_table("pools")
