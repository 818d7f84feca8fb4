"""tier_runs.ingestion as long as a branch name: a fork PR from a branch named `sluice/ingest/<anything>`
takes its id from the branch, which can run past the 64 characters of 0011.

Revision ID: 0012_tier_runs_ingestion_len
Revises: 0011_tier_runs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_tier_runs_ingestion_len"
down_revision = "0011_tier_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tier_runs") as batch:  # SQLite copies the table; PostgreSQL alters it
        batch.alter_column(
            "ingestion", existing_type=sa.String(64), type_=sa.String(255), existing_nullable=False
        )


def downgrade() -> None:
    with op.batch_alter_table("tier_runs") as batch:
        batch.alter_column(
            "ingestion", existing_type=sa.String(255), type_=sa.String(64), existing_nullable=False
        )
