"""The command audit log: one row per slash-command comment, whatever became of it."""

from __future__ import annotations

from sqlalchemy import Column, Index, Integer, String, Table, Text, UniqueConstraint, delete, select

from bot.db.registry import GitHubId
from bot.db.store import Store, UTCDateTime, _utc, metadata
from bot.ports import CommandRecord

LINE_CHARS = 3200  # the longest first line read as a command (bot.core.commands.MAX_LINE) fits whole
command_audit = Table(
    "command_audit",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("comment_id", GitHubId, nullable=False),
    Column("repo", String(255), nullable=False),
    Column("number", Integer, nullable=False),
    Column("actor", String(100), nullable=False),
    Column("command", String(40), nullable=False),
    Column("line", String(LINE_CHARS), nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("reason", Text, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("reply", Text, nullable=True),  # an accepted command's answer, for a job that runs it again
    UniqueConstraint("comment_id", name="uq_command_audit_comment_id"),
    Index("ix_command_audit_repo_at", "repo", "at"),
)


class CommandAudit:
    def __init__(self, store: Store) -> None:
        self._engine = store._engine

    def record(self, entry: CommandRecord) -> None:
        """One row per comment: a job that runs again (a lost lease, a redelivery) replaces its row."""
        row = entry.__dict__ | {"at": _utc(entry.at), "line": entry.line[:LINE_CHARS]}
        with self._engine.begin() as conn:
            conn.execute(delete(command_audit).where(command_audit.c.comment_id == entry.comment_id))
            conn.execute(command_audit.insert().values(row))

    def entry(self, comment_id: int) -> CommandRecord | None:
        """The comment's row, if a job has run its command before."""
        query = select(command_audit).where(command_audit.c.comment_id == comment_id)
        with self._engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else CommandRecord(**{k: v for k, v in row.items() if k != "id"})

    def entries(self, repo: str) -> list[CommandRecord]:
        """The repository's audit log, oldest first."""
        query = select(command_audit).where(command_audit.c.repo == repo).order_by(command_audit.c.id)
        with self._engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [CommandRecord(**{k: v for k, v in row.items() if k != "id"}) for row in rows]
