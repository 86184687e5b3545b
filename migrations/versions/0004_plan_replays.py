"""plan replays

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 22:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "plan_replays",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("profile", sa.String(length=100), nullable=False),
        sa.Column("params_key", sa.String(length=500), nullable=False),
        sa.Column("window_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["series.id"],
            name=op.f("fk_plan_replays_series_id_series"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plan_replays")),
    )
    with op.batch_alter_table("plan_replays", schema=None) as batch_op:
        batch_op.create_index(
            "ix_plan_replays_key", ["series_id", "profile", "params_key"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("plan_replays", schema=None) as batch_op:
        batch_op.drop_index("ix_plan_replays_key")
    op.drop_table("plan_replays")
