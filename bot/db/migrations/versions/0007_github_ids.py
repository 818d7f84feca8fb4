"""GitHub installation ids as 64-bit integers on PostgreSQL (SQLite's INTEGER is 64-bit already).

Revision ID: 0007_github_ids
Revises: 0006_commit_facts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_github_ids"
down_revision = "0006_commit_facts"
branch_labels = None
depends_on = None

COLUMNS = (("installations", "id"), ("installation_repos", "installation_id"), ("forks", "installation_id"))


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in COLUMNS:
        op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer())


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in COLUMNS:
        op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger())
