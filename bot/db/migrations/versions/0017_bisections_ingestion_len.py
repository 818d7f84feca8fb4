"""bisections.ingestion as long as tier_runs.ingestion (0012): an ingestion's id is its branch's name past
`sluice/ingest/`, up to 255 characters, and a bisection of it must be recordable.

Revision ID: 0017_bisections_ingestion_len
Revises: 0016_trunk_watch
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_bisections_ingestion_len"
down_revision = "0016_trunk_watch"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bisections") as batch:  # SQLite copies the table; PostgreSQL alters it
        batch.alter_column(
            "ingestion", existing_type=sa.String(64), type_=sa.String(255), existing_nullable=False
        )


def downgrade() -> None:
    with op.batch_alter_table("bisections") as batch:
        batch.alter_column(
            "ingestion", existing_type=sa.String(255), type_=sa.String(64), existing_nullable=False
        )
