"""bisect_culprits.first_at: when a bisection first blamed the commit. A later bisection that blames it
again replaces the failure (`at`, `detail`) but not this, so `sluice calibrate --database` knows a culprit
from its first blame. Existing rows start from their `at`.

Revision ID: 0019_bisect_culprits_first_at
Revises: 0018_ingestion_heads
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_bisect_culprits_first_at"
down_revision = "0018_ingestion_heads"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bisect_culprits") as batch:  # SQLite copies the table; PostgreSQL alters it
        batch.add_column(sa.Column("first_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE bisect_culprits SET first_at = at")
    with op.batch_alter_table("bisect_culprits") as batch:
        batch.alter_column("first_at", existing_type=sa.DateTime(timezone=True), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("bisect_culprits") as batch:
        batch.drop_column("first_at")
