"""command_audit.line holds a whole command line: a first line read as a command may now have 3,106
characters (room for `/waive`'s three quoted texts), where it was cut at 600.

Revision ID: 0020_command_audit_line_len
Revises: 0019_bisect_culprits_first_at
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_command_audit_line_len"
down_revision = "0019_bisect_culprits_first_at"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("command_audit") as batch:  # SQLite copies the table; PostgreSQL alters it
        batch.alter_column(
            "line", existing_type=sa.String(600), type_=sa.String(3200), existing_nullable=False
        )


def downgrade() -> None:
    with op.batch_alter_table("command_audit") as batch:
        batch.alter_column(
            "line", existing_type=sa.String(3200), type_=sa.String(600), existing_nullable=False
        )
