"""a GPU profile's model and GPU figures for the physical ceilings of its SLO capacity: the
model's parameter count and context length, the GPU's peak dense TFLOPS and memory bandwidth
(each null: taken from the catalog by the profile's model and GPU names)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07 00:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("parameters", "context_length_tokens", "peak_tflops", "memory_bandwidth_gb_per_s")


def upgrade() -> None:
    op.add_column("gpu_profiles", sa.Column("parameters", sa.Float(), nullable=True))
    op.add_column("gpu_profiles", sa.Column("context_length_tokens", sa.Integer(), nullable=True))
    op.add_column("gpu_profiles", sa.Column("peak_tflops", sa.Float(), nullable=True))
    op.add_column("gpu_profiles", sa.Column("memory_bandwidth_gb_per_s", sa.Float(), nullable=True))


def downgrade() -> None:
    # plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): a batch copy of gpu_profiles would
    # drop the table that series_deployments and gpu_profile_loadtests reference
    for column in reversed(COLUMNS):
        op.drop_column("gpu_profiles", column)
