"""Trunk watch: one row per failure tracked on fork trunk (its bisection, its issue).

Revision ID: 0016_trunk_watch
Revises: 0015_bisections
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_trunk_watch"
down_revision = "0015_bisections"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trunk_failures",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("digest", sa.String(16), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("issue", sa.Integer(), nullable=True),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_trunk_failures"),
        sa.UniqueConstraint("fork", "digest", name="uq_trunk_failures_key"),
    )


def downgrade() -> None:
    op.drop_table("trunk_failures")
