"""Remembered conflict resolutions (rerere), one per fork and conflict key.

Revision ID: 0002_resolutions
Revises: 0001_plans_chains_dispositions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_resolutions"
down_revision = "0001_plans_chains_dispositions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "resolutions",
        sa.Column("fork_key", sa.String(255), nullable=False),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("lines", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("recorded_by", sa.String(255), nullable=False),
        sa.Column("upstream_sha", sa.String(64), nullable=True),
        sa.Column("fork_sha", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fork_key", "key", name="pk_resolutions"),
        sa.CheckConstraint("source IN ('human', 'proposed')", name="ck_resolutions_source"),
    )


def downgrade() -> None:
    op.drop_table("resolutions")
