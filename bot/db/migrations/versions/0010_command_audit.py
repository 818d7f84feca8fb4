"""The command audit log: every slash command, accepted or refused, with who, where, why and when.

Revision ID: 0010_command_audit
Revises: 0009_gate
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_command_audit"
down_revision = "0009_gate"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "command_audit",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("comment_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(100), nullable=False),
        sa.Column("command", sa.String(40), nullable=False),
        sa.Column("line", sa.String(600), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("comment_id", name="uq_command_audit_comment_id"),
    )
    op.create_index("ix_command_audit_repo_at", "command_audit", ["repo", "at"])


def downgrade() -> None:
    op.drop_index("ix_command_audit_repo_at", table_name="command_audit")
    op.drop_table("command_audit")
