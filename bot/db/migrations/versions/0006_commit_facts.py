"""Per-commit facts cached by SHA (patch-ids, parsed diffs, symbols).

Revision ID: 0006_commit_facts
Revises: 0005_leases
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_commit_facts"
down_revision = "0005_leases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "commit_facts",
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "sha", "path", name="pk_commit_facts"),
    )


def downgrade() -> None:
    op.drop_table("commit_facts")
