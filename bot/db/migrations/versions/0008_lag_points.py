"""The lag history: Days Behind Upstream, Backlog Commits and the rest, one row per fork per ingestion run.

Revision ID: 0008_lag_points
Revises: 0007_github_ids
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_lag_points"
down_revision = "0007_github_ids"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lag_points",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("days_behind", sa.Float()),
        sa.Column("backlog_commits", sa.Integer(), nullable=False),
        sa.Column("pending_commits", sa.Integer(), nullable=False),
        sa.Column("oldest_missing_days", sa.Float()),
        sa.Column("open_ingestions", sa.Integer(), nullable=False),
        sa.Column("ingestion_tip", sa.String(40)),
        sa.Column("upstream_head", sa.String(40), nullable=False),
        sa.Column("lead_time_days_median", sa.Float()),
        sa.Column("lead_time_days_p90", sa.Float()),
    )
    op.create_index("ix_lag_points_fork_at", "lag_points", ["fork", "at"])


def downgrade() -> None:
    op.drop_index("ix_lag_points_fork_at", table_name="lag_points")
    op.drop_table("lag_points")
