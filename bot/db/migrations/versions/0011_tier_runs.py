"""Tier runs: one row per attempt of a tier on a PR head (dispatch, workflow run, verdict, report).

Revision ID: 0011_tier_runs
Revises: 0010_command_audit
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_tier_runs"
down_revision = "0010_command_audit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tier_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("pull", sa.Integer(), nullable=False),
        sa.Column("ingestion", sa.String(64), nullable=False),
        sa.Column("level", sa.String(2), nullable=False),
        sa.Column("head_sha", sa.String(40), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("selection", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("report", sa.Text(), nullable=True),
        sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_tier_runs"),
        sa.UniqueConstraint("fork", "pull", "level", "head_sha", "attempt", name="uq_tier_runs_attempt"),
    )
    op.create_index("ix_tier_runs_fork_pull", "tier_runs", ["fork", "pull"])
    op.create_index("ix_tier_runs_fork_run_id", "tier_runs", ["fork", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_tier_runs_fork_run_id", table_name="tier_runs")
    op.drop_index("ix_tier_runs_fork_pull", table_name="tier_runs")
    op.drop_table("tier_runs")
