"""ingestion_heads: every head Sluice pushed to an ingestion's branch, with the upstream commits it carried
then (a rebuild moves `ingestions.head` on; a tier run on an earlier Sluice head still ran Sluice's work).
The heads the registry holds now are its first rows.

Revision ID: 0018_ingestion_heads
Revises: 0017_bisections_ingestion_len
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_ingestion_heads"
down_revision = "0017_bisections_ingestion_len"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingestion_heads",
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("ingestion", sa.String(64), nullable=False),
        sa.Column("head", sa.String(40), nullable=False),
        sa.Column("upstream_first", sa.String(40), nullable=False),
        sa.Column("upstream_last", sa.String(40), nullable=False),
        sa.Column("commits", sa.Integer(), nullable=False),
        sa.Column("pushed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fork", "ingestion", "head", name="pk_ingestion_heads"),
    )
    op.execute(
        "INSERT INTO ingestion_heads"
        " (fork, ingestion, head, upstream_first, upstream_last, commits, pushed_at)"
        " SELECT fork, id, head, upstream_first, upstream_last, commits, updated_at FROM ingestions"
        " WHERE head IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_table("ingestion_heads")
