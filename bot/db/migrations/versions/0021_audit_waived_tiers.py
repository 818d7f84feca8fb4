"""Audit records keep every failing tier a waiver let through (`waived_tiers`), where they kept the first
tier that did not succeed, waived or not (`failing_tier`). Closed records get theirs from the tiers and the
waivers they hold; the records are JSON in `audits.record`, so no column changes.

Revision ID: 0021_audit_waived_tiers
Revises: 0020_command_audit_line_len
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0021_audit_waived_tiers"
down_revision = "0020_command_audit_line_len"
branch_labels = None
depends_on = None

FAILED = ("failure", "timed_out")  # bot.core.gate.FAILED when this was written
audits = sa.table("audits", sa.column("id", sa.Integer), sa.column("record", sa.Text))


def upgrade() -> None:
    _rewrite(_with_waived_tiers)


def downgrade() -> None:
    _rewrite(_with_failing_tier)


def _with_waived_tiers(record: dict[str, Any]) -> dict[str, Any]:
    record.pop("failing_tier", None)
    waived = {w["tier"] for w in record.get("waivers", ())}
    failed = [t["name"] for t in record.get("tiers", ()) if t.get("conclusion") in FAILED]
    return record | {"waived_tiers": [name for name in failed if name in waived]}


def _with_failing_tier(record: dict[str, Any]) -> dict[str, Any]:
    record.pop("waived_tiers", None)
    tiers = record.get("tiers", ())
    failing = (t["name"] for t in tiers if t["status"] == "completed" and t.get("conclusion") != "success")
    return record | {"failing_tier": next(failing, None)}


def _rewrite(change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    conn = op.get_bind()
    for row in conn.execute(sa.select(audits.c.id, audits.c.record)).all():
        record = json.dumps(change(json.loads(row.record)), separators=(",", ":"))
        conn.execute(sa.update(audits).where(audits.c.id == row.id).values(record=record))
