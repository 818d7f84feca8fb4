"""What the gate remembers per ingestion PR (waivers, approvals, holds, the audit record) and per fork (the
paused flag and the safety throttle's run of failed ingestions), in the store."""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from bot.core.audit import AuditRecord, AuditState, kept_bisections
from bot.core.gate import Approval, Hold, Pause, Waiver
from bot.core.ingestion import CheckName
from bot.db.store import Store, UTCDateTime, _utc, metadata

waivers = Table(
    "waivers",
    metadata,
    Column("id", Integer, autoincrement=True),
    Column("fork", String(255), nullable=False),
    Column("pr_number", Integer, nullable=False),
    Column("tier", String(32), nullable=False),
    Column("owner", String(255), nullable=False),
    Column("reason", Text, nullable=False),
    Column("recovery_plan", Text, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("granted_by", String(255), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("head_sha", String(40)),  # the head it waives; NULL (recorded before 0012): it waives none
    Column("expiry_judged_at", UTCDateTime),  # when the sweep asked for the gate to be judged at its expiry
    PrimaryKeyConstraint("id", name="pk_waivers"),
    Index("ix_waivers_fork_pr_number", "fork", "pr_number"),
)

approvals = Table(
    "approvals",
    metadata,
    Column("fork", String(255), nullable=False),
    Column("pr_number", Integer, nullable=False),
    Column("login", String(255), nullable=False),
    Column("head_sha", String(40), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("fork", "pr_number", "login", "head_sha", name="pk_approvals"),
)

holds = Table(
    "holds",
    metadata,
    Column("fork", String(255), nullable=False),
    Column("pr_number", Integer, nullable=False),
    Column("by", String(255), nullable=False),
    Column("reason", Text, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("fork", "pr_number", name="pk_holds"),
)

fork_state = Table(
    "fork_state",
    metadata,
    Column("fork", String(255), nullable=False),
    Column("paused", Boolean, nullable=False),
    Column("paused_by", String(255)),
    Column("paused_reason", Text),
    Column("paused_at", UTCDateTime),
    Column("failures_after", Integer, nullable=False),  # failed ingestions count from this sequence number on
    PrimaryKeyConstraint("fork", name="pk_fork_state"),
)

# One row per failed ingestion PR head: re-evaluating the same failure never counts it twice.
gate_failures = Table(
    "gate_failures",
    metadata,
    Column("seq", Integer, autoincrement=True),
    Column("fork", String(255), nullable=False),
    Column("pr_number", Integer, nullable=False),
    Column("head_sha", String(40), nullable=False),
    Column("tier", String(32), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("seq", name="pk_gate_failures"),
    UniqueConstraint("fork", "pr_number", "head_sha", name="uq_gate_failures_fork_pr_number_head_sha"),
)

audits = Table(
    "audits",
    metadata,
    Column("id", Integer, autoincrement=True),
    Column("fork", String(255), nullable=False),
    Column("pr_number", Integer, nullable=False),
    Column("ingestion_id", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("record", Text, nullable=False),  # AuditRecord as JSON
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("id", name="pk_audits"),
    UniqueConstraint("fork", "pr_number", name="uq_audits_fork_pr_number"),
    Index("ix_audits_ingestion_id", "ingestion_id"),
)


class GateStore:
    """Waivers, approvals, holds and audit records of ingestion PRs; each fork's pause and failure run."""

    def __init__(self, store: Store) -> None:
        self._engine = store._engine

    # --- waivers

    def add_waiver(self, fork: str, pr_number: int, waiver: Waiver, *, at: datetime) -> None:
        if waiver.tier is CheckName.L1:
            raise ValueError("L1 is never waived")
        if not re.fullmatch(r"[0-9a-f]{40}", waiver.head_sha):
            raise ValueError(f"a waiver names the head it waives (40 hex digits), not {waiver.head_sha!r}")
        row = {
            "fork": fork,
            "pr_number": pr_number,
            "tier": waiver.tier.value,
            "owner": waiver.owner,
            "reason": waiver.reason,
            "recovery_plan": waiver.recovery_plan,
            "expires_at": _utc(waiver.expires_at),
            "granted_by": waiver.granted_by,
            "created_at": _utc(at),
            "head_sha": waiver.head_sha,
        }
        with self._engine.begin() as conn:
            conn.execute(insert(waivers).values(row))

    def expired_unjudged(self, now: datetime) -> list[tuple[str, int]]:
        """The PRs (fork, number) with a waiver that has expired by `now` and whose gate was not asked to be
        judged again since; each is marked asked, in the same transaction."""
        due = (waivers.c.expires_at <= _utc(now)) & waivers.c.expiry_judged_at.is_(None)
        with self._engine.begin() as conn:
            rows = conn.execute(select(waivers.c.id, waivers.c.fork, waivers.c.pr_number).where(due)).all()
            if rows:
                marked = update(waivers).where(waivers.c.id.in_([r.id for r in rows]))
                conn.execute(marked.values(expiry_judged_at=_utc(now)))
        return sorted({(r.fork, r.pr_number) for r in rows})

    def waivers(self, fork: str, pr_number: int) -> list[Waiver]:
        query = select(waivers).where(waivers.c.fork == fork, waivers.c.pr_number == pr_number)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(waivers.c.id)).all()
        return [
            Waiver(
                CheckName(r.tier),
                r.owner,
                r.reason,
                r.recovery_plan,
                r.expires_at,
                r.granted_by,
                r.head_sha or "",
            )
            for r in rows
        ]

    # --- approvals (`/approve`; GitHub's reviews are read from GitHub)

    def record_approval(self, fork: str, pr_number: int, *, login: str, head_sha: str, at: datetime) -> None:
        """`login` approves `head_sha` at `at`; approving the same head again moves its time to `at` (the gate
        weighs it against that person's reviews: a later "changes requested" withdraws it, a later `/approve`
        gives it back)."""
        row = {"fork": fork, "pr_number": pr_number, "login": login, "head_sha": head_sha, "at": _utc(at)}
        dialect_insert = postgresql.insert if self._engine.dialect.name == "postgresql" else sqlite.insert
        upsert = dialect_insert(approvals).values(row)
        keys = ["fork", "pr_number", "login", "head_sha"]
        with self._engine.begin() as conn:
            conn.execute(upsert.on_conflict_do_update(index_elements=keys, set_={"at": upsert.excluded.at}))

    def approvals(self, fork: str, pr_number: int) -> list[Approval]:
        query = select(approvals).where(approvals.c.fork == fork, approvals.c.pr_number == pr_number)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(approvals.c.at, approvals.c.login)).all()
        return [Approval(r.login, r.head_sha, r.at, source="command") for r in rows]

    # --- holds

    def set_hold(self, fork: str, pr_number: int, *, by: str, reason: str, at: datetime) -> None:
        row = {"fork": fork, "pr_number": pr_number, "by": by, "reason": reason, "at": _utc(at)}
        with self._engine.begin() as conn:
            conn.execute(delete(holds).where(holds.c.fork == fork, holds.c.pr_number == pr_number))
            conn.execute(insert(holds).values(row))

    def clear_hold(self, fork: str, pr_number: int) -> bool:
        """Release the hold; False when there was none."""
        with self._engine.begin() as conn:
            gone = conn.execute(delete(holds).where(holds.c.fork == fork, holds.c.pr_number == pr_number))
            return gone.rowcount > 0

    def hold(self, fork: str, pr_number: int) -> Hold | None:
        query = select(holds).where(holds.c.fork == fork, holds.c.pr_number == pr_number)
        with self._engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else Hold(row.by, row.reason, row.at)

    # --- pause and the safety throttle

    def pause(self, fork: str, *, by: str, reason: str, at: datetime) -> None:
        with self._engine.begin() as conn:
            _ensure_fork(conn, fork)
            values = {"paused": True, "paused_by": by, "paused_reason": reason, "paused_at": _utc(at)}
            conn.execute(update(fork_state).where(fork_state.c.fork == fork).values(values))

    def resume(self, fork: str) -> None:
        """Lift the pause; the run of failed ingestions starts again from zero."""
        with self._engine.begin() as conn:
            _ensure_fork(conn, fork)
            _reset_failures(conn, fork, paused=False)

    def paused(self, fork: str) -> Pause | None:
        with self._engine.connect() as conn:
            row = conn.execute(select(fork_state).where(fork_state.c.fork == fork)).first()
        if row is None or not row.paused:
            return None
        return Pause(row.paused_by or "", row.paused_reason or "", row.paused_at)

    def record_failure(self, fork: str, pr_number: int, *, head_sha: str, tier: str, at: datetime) -> int:
        """Count a failed ingestion (once per PR head); the failures in a row since the last success."""
        row = {"fork": fork, "pr_number": pr_number, "head_sha": head_sha, "tier": tier, "at": _utc(at)}
        with self._engine.begin() as conn:
            _ensure_fork(conn, fork)
            _insert_new(conn, gate_failures, row, keys=("fork", "pr_number", "head_sha"))
            return _failures(conn, fork)

    def record_success(self, fork: str) -> None:
        """An ingestion merged: the run of failures ends."""
        with self._engine.begin() as conn:
            _ensure_fork(conn, fork)
            _reset_failures(conn, fork, paused=None)

    def consecutive_failures(self, fork: str) -> int:
        with self._engine.connect() as conn:
            return _failures(conn, fork)

    # --- audit records

    def save_audit(self, record: AuditRecord, *, at: datetime) -> None:
        """Insert or refresh the open record of a PR (or of one closed unmerged: it may be reopened, picked
        again and merged); a merged one's (closed) is never rewritten."""
        row = {
            "fork": record.fork,
            "pr_number": record.pr_number,
            "ingestion_id": record.ingestion_id,
            "state": record.state.value,
            "record": record.model_dump_json(),
            "updated_at": _utc(at),
        }
        key = (audits.c.fork == record.fork, audits.c.pr_number == record.pr_number)
        with self._engine.begin() as conn:
            stored = conn.execute(select(audits.c.state).where(*key)).scalar_one_or_none()
            if stored is None:
                record = record.model_copy(update={"opened_at": record.opened_at or _utc(at)})
                conn.execute(insert(audits).values(row | {"record": record.model_dump_json()}))
            elif stored in (AuditState.OPEN.value, AuditState.UNMERGED.value):
                before = _stored_audit(conn, key)
                record = kept_bisections(record.model_copy(update={"opened_at": before.opened_at}), before)
                conn.execute(update(audits).where(*key).values(row | {"record": record.model_dump_json()}))

    def audit(self, fork: str, pr_number: int) -> AuditRecord | None:
        query = select(audits.c.record).where(audits.c.fork == fork, audits.c.pr_number == pr_number)
        with self._engine.connect() as conn:
            stored = conn.execute(query).scalar_one_or_none()
        return None if stored is None else AuditRecord.model_validate_json(stored)

    def find_audits(self, wanted: str) -> list[tuple[int, AuditRecord]]:
        """The records an audit number or an ingestion id names, oldest first."""
        number = re.fullmatch(
            r"[0-9]{1,18}", wanted
        )  # ASCII digits that fit a 64-bit id; anything else: an id
        column = audits.c.id if number else audits.c.ingestion_id
        query = select(audits.c.id, audits.c.record).where(column == (int(wanted) if number else wanted))
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(audits.c.id)).all()
        return [(r.id, AuditRecord.model_validate_json(r.record)) for r in rows]


def _stored_audit(conn: Connection, key: tuple[object, ...]) -> AuditRecord:
    stored = conn.execute(select(audits.c.record).where(*key)).scalar_one()  # type: ignore[arg-type]
    return AuditRecord.model_validate_json(stored)


def _ensure_fork(conn: Connection, fork: str) -> None:
    row = {"fork": fork, "paused": False, "failures_after": 0}
    _insert_new(conn, fork_state, row, keys=("fork",))


def _reset_failures(conn: Connection, fork: str, *, paused: bool | None) -> None:
    last = conn.execute(select(func.max(gate_failures.c.seq)).where(gate_failures.c.fork == fork)).scalar()
    values: dict[str, object] = {"failures_after": int(last or 0)}
    if paused is False:
        values |= {"paused": False, "paused_by": None, "paused_reason": None, "paused_at": None}
    conn.execute(update(fork_state).where(fork_state.c.fork == fork).values(values))


def _failures(conn: Connection, fork: str) -> int:
    after = conn.execute(select(fork_state.c.failures_after).where(fork_state.c.fork == fork)).scalar()
    count = (
        select(func.count())
        .select_from(gate_failures)
        .where(gate_failures.c.fork == fork, gate_failures.c.seq > int(after or 0))
    )
    return int(conn.execute(count).scalar_one())


def _insert_new(conn: Connection, table: Table, row: dict[str, object], *, keys: tuple[str, ...]) -> None:
    """INSERT … ON CONFLICT (keys) DO NOTHING: a row already there stays as it was."""
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    conn.execute(dialect_insert(table).values(row).on_conflict_do_nothing(index_elements=list(keys)))
