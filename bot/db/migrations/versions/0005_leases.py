"""Leases: the redelivery sweep and the resync run on one replica per interval.

Revision ID: 0005_leases
Revises: 0004_registry
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_leases"
down_revision = "0004_registry"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_leases"),
    )


def downgrade() -> None:
    op.drop_table("leases")
