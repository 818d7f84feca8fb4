"""L3's metrics and their signoff: the regressed cells of each completed tier run against its baseline,
and the area owners' `/signoff l3` per PR head.

Revision ID: 0014_l3_regressions
Revises: 0013_waiver_head
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_l3_regressions"
down_revision = "0013_waiver_head"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "l3_regressions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tier_run", sa.Integer(), nullable=False),
        sa.Column("benchmark", sa.Text(), nullable=False),
        sa.Column("kernel", sa.String(255), nullable=False),
        sa.Column("metric", sa.String(16), nullable=False),
        sa.Column("critical", sa.Boolean(), nullable=False),
        sa.Column("ratio", sa.Float(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_l3_regressions"),
        sa.ForeignKeyConstraint(
            ["tier_run"], ["tier_runs.id"], name="fk_l3_regressions_tier_run_tier_runs", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_l3_regressions_tier_run", "l3_regressions", ["tier_run"])
    op.create_table(
        "l3_signoffs",
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("login", sa.String(255), nullable=False),
        sa.Column("head_sha", sa.String(40), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fork", "pr_number", "login", "head_sha", name="pk_l3_signoffs"),
    )


def downgrade() -> None:
    op.drop_table("l3_signoffs")
    op.drop_index("ix_l3_regressions_tier_run", table_name="l3_regressions")
    op.drop_table("l3_regressions")
