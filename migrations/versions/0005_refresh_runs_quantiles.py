"""hourly refresh runs, forecast quantiles and band calibrations

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 01:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

QUANTILE_COLUMNS = ("q50", "q60", "q70", "q80", "q90", "q95", "q99")


def upgrade() -> None:
    with op.batch_alter_table("forecast_runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("kind", sa.String(length=20), server_default="nightly", nullable=False)
        )
        batch_op.add_column(sa.Column("parent_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("state", sa.JSON(), nullable=True))
        batch_op.create_index(batch_op.f("ix_forecast_runs_parent_id"), ["parent_id"])
        batch_op.create_foreign_key(
            batch_op.f("fk_forecast_runs_parent_id_forecast_runs"),
            "forecast_runs",
            ["parent_id"],
            ["id"],
            ondelete="CASCADE",
        )
    with op.batch_alter_table("forecast_points", schema=None) as batch_op:
        for column in QUANTILE_COLUMNS:
            batch_op.add_column(sa.Column(column, sa.Float(), nullable=True))
    op.create_table(
        "plan_calibrations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("profile", sa.String(length=100), nullable=False),
        sa.Column("params_key", sa.String(length=500), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["series.id"],
            name=op.f("fk_plan_calibrations_series_id_series"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plan_calibrations")),
    )
    with op.batch_alter_table("plan_calibrations", schema=None) as batch_op:
        batch_op.create_index(
            "ix_plan_calibrations_key",
            ["series_id", "profile", "params_key", "run_id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("plan_calibrations", schema=None) as batch_op:
        batch_op.drop_index("ix_plan_calibrations_key")
    op.drop_table("plan_calibrations")
    with op.batch_alter_table("forecast_points", schema=None) as batch_op:
        for column in reversed(QUANTILE_COLUMNS):
            batch_op.drop_column(column)
    with op.batch_alter_table("forecast_runs", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_forecast_runs_parent_id_forecast_runs"), type_="foreignkey"
        )
        batch_op.drop_index(batch_op.f("ix_forecast_runs_parent_id"))
        batch_op.drop_column("state")
        batch_op.drop_column("parent_id")
        batch_op.drop_column("kind")
