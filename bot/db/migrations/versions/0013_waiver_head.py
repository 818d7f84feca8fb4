"""Waivers name the head they were given on: a waiver waives that head's failure, not the next push's.

Revision ID: 0013_waiver_head
Revises: 0012_tier_runs_ingestion_len
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_waiver_head"
down_revision = "0012_tier_runs_ingestion_len"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for the waivers recorded before: they name no head, so they waive none (a maintainer waives again)
    op.add_column("waivers", sa.Column("head_sha", sa.String(40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("waivers") as batch:
        batch.drop_column("head_sha")
