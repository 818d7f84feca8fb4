"""A command's row keeps the reply Sluice gave it (`reply`), so that a job run again after the command took
effect (its answer failed, or the comment was delivered again) answers the same, and never runs it twice.

Revision ID: 0022_command_audit_reply
Revises: 0021_audit_waived_tiers
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_command_audit_reply"
down_revision = "0021_audit_waived_tiers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("command_audit") as batch:
        batch.add_column(sa.Column("reply", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("command_audit") as batch:
        batch.drop_column("reply")
