"""Bisections: each search of a failed ingestion on a tier (its state), the culprits they blamed, and the
tier runs of their probes told apart from a PR's own runs.

Revision ID: 0015_bisections
Revises: 0014_l3_regressions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_bisections"
down_revision = "0014_l3_regressions"
branch_labels = None
depends_on = None

OLD_KEY = ("fork", "pull", "level", "head_sha", "attempt")


def upgrade() -> None:
    op.create_table(
        "bisections",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("pull", sa.Integer(), nullable=False),
        sa.Column("ingestion", sa.String(64), nullable=False),
        sa.Column("level", sa.String(2), nullable=False),
        sa.Column("head_sha", sa.String(40), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("running", sa.String(300), nullable=True),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_bisections"),
        sa.UniqueConstraint("running", name="uq_bisections_running"),
    )
    op.create_index("ix_bisections_fork_pull", "bisections", ["fork", "pull"])
    op.create_table(
        "bisect_culprits",
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("sha", sa.String(40), nullable=False),
        sa.Column("level", sa.String(2), nullable=False),
        sa.Column("pull", sa.Integer(), nullable=False),
        sa.Column("bisection", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fork", "sha", name="pk_bisect_culprits"),
    )
    with op.batch_alter_table("tier_runs") as batch:
        batch.add_column(sa.Column("bisection", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("probe", sa.Integer(), nullable=False, server_default="0"))
        batch.drop_constraint("uq_tier_runs_attempt", type_="unique")
        batch.create_unique_constraint("uq_tier_runs_attempt", [*OLD_KEY, "bisection", "probe"])


def downgrade() -> None:
    op.execute("DELETE FROM tier_runs WHERE bisection <> 0")
    with op.batch_alter_table("tier_runs") as batch:
        batch.drop_constraint("uq_tier_runs_attempt", type_="unique")
        batch.create_unique_constraint("uq_tier_runs_attempt", list(OLD_KEY))
        batch.drop_column("probe")
        batch.drop_column("bisection")
    op.drop_table("bisect_culprits")
    op.drop_index("ix_bisections_fork_pull", table_name="bisections")
    op.drop_table("bisections")
