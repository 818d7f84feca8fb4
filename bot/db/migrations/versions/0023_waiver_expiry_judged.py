"""Waivers keep when the gate was judged again at their expiry (`expiry_judged_at`): the periodic sweep asks
for that judgement once per expired waiver (those that ended before this release too), so a gate a waiver
kept green turns red when it ends, not at the PR's next event.

Revision ID: 0023_waiver_expiry_judged
Revises: 0022_command_audit_reply
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_waiver_expiry_judged"
down_revision = "0022_command_audit_reply"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("waivers") as batch:
        batch.add_column(sa.Column("expiry_judged_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("waivers") as batch:
        batch.drop_column("expiry_judged_at")
