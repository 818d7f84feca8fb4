"""Plans, risky chains with their members, and per-commit dispositions.

Revision ID: 0001_plans_chains_dispositions
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_plans_chains_dispositions"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "plans",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("fork_key", sa.String(255), nullable=False),
        sa.Column("fork_head", sa.String(64), nullable=False),
        sa.Column("upstream_head", sa.String(64), nullable=False),
        sa.Column("config_digest", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("plan", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_plans"),
    )
    op.create_index("ix_plans_fork_key_id", "plans", ["fork_key", "id"])

    op.create_table(
        "chains",
        sa.Column("fork_key", sa.String(255), nullable=False),
        sa.Column("id", sa.String(255), nullable=False),
        sa.Column("root", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_plan_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fork_key", "id", name="pk_chains"),
        sa.ForeignKeyConstraint(["created_plan_id"], ["plans.id"], name="fk_chains_created_plan_id_plans"),
        sa.CheckConstraint("status IN ('open', 'closed')", name="ck_chains_status"),
    )
    op.create_index("ix_chains_fork_key_status_created_at", "chains", ["fork_key", "status", "created_at"])

    op.create_table(
        "chain_members",
        sa.Column("fork_key", sa.String(255), nullable=False),
        sa.Column("chain_id", sa.String(255), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("fork_key", "chain_id", "position", name="pk_chain_members"),
        sa.UniqueConstraint("fork_key", "chain_id", "sha", name="uq_chain_members_fork_key_chain_id_sha"),
        sa.ForeignKeyConstraint(
            ["fork_key", "chain_id"],
            ["chains.fork_key", "chains.id"],
            name="fk_chain_members_chain",
            ondelete="CASCADE",
        ),
    )

    op.create_table(
        "dispositions",
        sa.Column("fork_key", sa.String(255), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("disposition", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("approver", sa.String(255), nullable=True),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("group_id", sa.String(255), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fork_key", "sha", name="pk_dispositions"),
        sa.ForeignKeyConstraint(["plan_id"], ["plans.id"], name="fk_dispositions_plan_id_plans"),
        sa.CheckConstraint(
            "disposition IN ('pending', 'bundled', 'chained', 'ingested', 'deferred', 'skipped',"
            " 'emergency')",
            name="ck_dispositions_disposition",
        ),
    )
    op.create_index("ix_dispositions_fork_key_disposition", "dispositions", ["fork_key", "disposition"])


def downgrade() -> None:
    op.drop_index("ix_dispositions_fork_key_disposition", table_name="dispositions")
    op.drop_table("dispositions")
    op.drop_table("chain_members")
    op.drop_index("ix_chains_fork_key_status_created_at", table_name="chains")
    op.drop_table("chains")
    op.drop_index("ix_plans_fork_key_id", table_name="plans")
    op.drop_table("plans")
