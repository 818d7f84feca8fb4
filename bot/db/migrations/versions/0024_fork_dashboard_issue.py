"""Forks remember their dashboard issue's number (`dashboard_issue`): the dashboard is found by its label,
and one whose label a person took off is found again by its number (its label put back) instead of a second
dashboard being opened beside it.

Revision ID: 0024_fork_dashboard_issue
Revises: 0023_waiver_expiry_judged
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024_fork_dashboard_issue"
down_revision = "0023_waiver_expiry_judged"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("forks") as batch:
        batch.add_column(sa.Column("dashboard_issue", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("forks") as batch:
        batch.drop_column("dashboard_issue")
