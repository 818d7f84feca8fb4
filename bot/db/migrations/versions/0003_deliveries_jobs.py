"""Webhook deliveries and the job queue that processes them.

Revision ID: 0003_deliveries_jobs
Revises: 0002_resolutions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_deliveries_jobs"
down_revision = "0002_resolutions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(255), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivery_id", sa.String(255), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.CheckConstraint("state IN ('queued', 'running', 'done', 'failed')", name="ck_jobs_state"),
    )
    op.create_index("ix_jobs_state_id", "jobs", ["state", "id"])
    op.create_index("ix_jobs_key_state", "jobs", ["key", "state"])
    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(255), nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_deliveries"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_deliveries_job_id_jobs"),
    )


def downgrade() -> None:
    op.drop_table("deliveries")
    op.drop_index("ix_jobs_key_state", table_name="jobs")
    op.drop_index("ix_jobs_state_id", table_name="jobs")
    op.drop_table("jobs")
