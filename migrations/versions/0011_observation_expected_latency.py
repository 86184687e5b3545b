"""a production hour's expected latency: the p95 TTFT and TPOT the profile's load-test model
gives at the hour's load and mix when the hour was posted (null: no table, or a load near the
model's saturation), what drift is measured against

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07 02:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("expected_ttft_p95_s", "expected_tpot_p95_s")


def upgrade() -> None:
    for column in COLUMNS:
        op.add_column("gpu_profile_observations", sa.Column(column, sa.Float(), nullable=True))


def downgrade() -> None:
    for column in reversed(COLUMNS):
        op.drop_column("gpu_profile_observations", column)
