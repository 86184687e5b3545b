"""forecast runs and points

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 09:32:29.280373
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_locks",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("hostname", sa.String(length=200), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_job_locks")),
    )
    op.create_table(
        "forecast_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("trained_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("horizon", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=50), nullable=True),
        sa.Column("backtest_metric", sa.String(length=20), nullable=False),
        sa.Column("backtest_error", sa.Float(), nullable=True),
        sa.Column("scores", sa.JSON(), nullable=False),
        sa.Column("notes", sa.JSON(), nullable=False),
        sa.Column("anomalies", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["series.id"],
            name=op.f("fk_forecast_runs_series_id_series"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forecast_runs")),
    )
    with op.batch_alter_table("forecast_runs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_forecast_runs_latest", ["series_id", "metric", "status", "id"], unique=False
        )

    op.create_table(
        "forecast_points",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("ds", sa.DateTime(timezone=True), nullable=False),
        sa.Column("yhat", sa.Float(), nullable=False),
        sa.Column("lo_80", sa.Float(), nullable=False),
        sa.Column("hi_80", sa.Float(), nullable=False),
        sa.Column("lo_95", sa.Float(), nullable=False),
        sa.Column("hi_95", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["forecast_runs.id"],
            name=op.f("fk_forecast_points_run_id_forecast_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "ds", name=op.f("pk_forecast_points")),
    )


def downgrade() -> None:
    op.drop_table("forecast_points")
    with op.batch_alter_table("forecast_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_forecast_runs_latest")

    op.drop_table("forecast_runs")
    op.drop_table("job_locks")
