"""The gate's state: waivers, approvals, holds, each fork's pause and failed ingestions, audit records.

Revision ID: 0009_gate
Revises: 0008_lag_points
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_gate"
down_revision = "0008_lag_points"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "waivers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("tier", sa.String(32), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("recovery_plan", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("granted_by", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_waivers"),
    )
    op.create_index("ix_waivers_fork_pr_number", "waivers", ["fork", "pr_number"])
    op.create_table(
        "approvals",
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("login", sa.String(255), nullable=False),
        sa.Column("head_sha", sa.String(40), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fork", "pr_number", "login", "head_sha", name="pk_approvals"),
    )
    op.create_table(
        "holds",
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("by", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fork", "pr_number", name="pk_holds"),
    )
    op.create_table(
        "fork_state",
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("paused_by", sa.String(255), nullable=True),
        sa.Column("paused_reason", sa.Text(), nullable=True),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failures_after", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("fork", name="pk_fork_state"),
    )
    op.create_table(
        "gate_failures",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(40), nullable=False),
        sa.Column("tier", sa.String(32), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_gate_failures"),
        sa.UniqueConstraint("fork", "pr_number", "head_sha", name="uq_gate_failures_fork_pr_number_head_sha"),
    )
    op.create_table(
        "audits",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("ingestion_id", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audits"),
        sa.UniqueConstraint("fork", "pr_number", name="uq_audits_fork_pr_number"),
    )
    op.create_index("ix_audits_ingestion_id", "audits", ["ingestion_id"])


def downgrade() -> None:
    op.drop_index("ix_audits_ingestion_id", table_name="audits")
    op.drop_table("audits")
    op.drop_table("gate_failures")
    op.drop_table("fork_state")
    op.drop_table("holds")
    op.drop_table("approvals")
    op.drop_index("ix_waivers_fork_pr_number", table_name="waivers")
    op.drop_table("waivers")
