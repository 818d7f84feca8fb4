"""Installations, forks and ingestion PRs (the service's registry).

Revision ID: 0004_registry
Revises: 0003_deliveries_jobs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_registry"
down_revision = "0003_deliveries_jobs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "installations",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("account", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_installations"),
    )
    op.create_table(
        "installation_repos",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("installation_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("repo", name="pk_installation_repos"),
    )
    op.create_index("ix_installation_repos_installation_id", "installation_repos", ["installation_id"])
    op.create_table(
        "forks",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("installation_id", sa.Integer(), nullable=False),
        sa.Column("branch", sa.String(255), nullable=False),
        sa.Column("upstream_url", sa.Text(), nullable=False),
        sa.Column("upstream_branch", sa.String(255), nullable=False),
        sa.Column("upstream_repo", sa.String(255), nullable=True),
        sa.Column("upstream_seen", sa.String(40), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("repo", name="pk_forks"),
    )
    op.create_index("ix_forks_upstream_repo", "forks", ["upstream_repo"])
    op.create_table(
        "ingestions",
        sa.Column("fork", sa.String(255), nullable=False),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("head", sa.String(40), nullable=True),
        sa.Column("upstream_first", sa.String(40), nullable=False),
        sa.Column("upstream_last", sa.String(40), nullable=False),
        sa.Column("commits", sa.Integer(), nullable=False),
        sa.Column("needs_human", sa.String(40), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fork", "id", name="pk_ingestions"),
    )


def downgrade() -> None:
    op.drop_table("ingestions")
    op.drop_index("ix_forks_upstream_repo", table_name="forks")
    op.drop_table("forks")
    op.drop_index("ix_installation_repos_installation_id", table_name="installation_repos")
    op.drop_table("installation_repos")
    op.drop_table("installations")
