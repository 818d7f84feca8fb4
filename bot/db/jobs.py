"""Durable webhook deliveries and the job queue behind them, in the store's database."""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    Column,
    Connection,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    bindparam,
    case,
    func,
    insert,
    not_,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql import Select

from bot.core.errors import first_line
from bot.db.store import Store, UTCDateTime, _utc, metadata
from bot.ports import Job

# Stored error text is cut to this many bytes of UTF-8.
MAX_ERROR_BYTES = 4096
# pg_try_advisory_xact_lock namespace for "one running job per key" (the store uses 0x534C5549).
_KEY_LOCK_NAMESPACE = 0x534C_554A


class DeliveryOutcome(enum.StrEnum):
    NEW = "new"
    DUPLICATE = "duplicate"
    RETRY = "retry"  # seen before and its job failed: processed again


class JobState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class Delivery:
    """A webhook delivery to record, with the job it asks for."""

    id: str  # X-GitHub-Delivery
    event: str
    body: bytes
    kind: str
    key: str | None
    payload: dict[str, Any]


jobs = Table(
    "jobs",
    metadata,
    Column("id", Integer, autoincrement=True),
    Column("kind", String(64), nullable=False),
    Column("key", String(255)),
    Column("payload", Text, nullable=False),  # JSON object
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("worker", String(255)),
    Column("lease_until", UTCDateTime),
    Column("not_before", UTCDateTime, nullable=False),  # a requeued job waits until then
    Column("delivery_id", String(255)),
    Column("error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("id", name="pk_jobs"),
    CheckConstraint("state IN ('queued', 'running', 'done', 'failed')", name="ck_jobs_state"),
    Index("ix_jobs_state_id", "state", "id"),
    Index("ix_jobs_key_state", "key", "state"),
)

deliveries = Table(
    "deliveries",
    metadata,
    Column("id", String(255), nullable=False),  # X-GitHub-Delivery
    Column("event", String(64), nullable=False),
    Column("received_at", UTCDateTime, nullable=False),
    Column("body", LargeBinary, nullable=False),
    Column("job_id", Integer),  # the latest job; NULL only inside accept_delivery's transaction
    PrimaryKeyConstraint("id", name="pk_deliveries"),
    ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_deliveries_job_id_jobs"),
)


class JobQueue:
    """At-least-once jobs with leases; handlers must be idempotent. Every state change is one transaction."""

    def __init__(self, store: Store) -> None:
        # The store owns the engine (and its SQLite BEGIN IMMEDIATE hook); the queue shares it.
        self._engine = store._engine

    def accept_delivery(
        self,
        delivery_id: str,
        *,
        event: str,
        body: bytes,
        kind: str,
        key: str | None,
        payload: dict[str, Any],
        now: datetime,
    ) -> DeliveryOutcome:
        """Record the delivery and enqueue its job; a redelivery enqueues again only if its job failed."""
        delivery = Delivery(delivery_id, event=event, body=body, kind=kind, key=key, payload=payload)
        return self.accept_deliveries([delivery], now=now)[0]

    def accept_deliveries(self, batch: Sequence[Delivery], *, now: datetime) -> list[DeliveryOutcome]:
        """`accept_delivery` for each of `batch`, all in one transaction (one commit, one fsync, for all).

        A delivery id repeated within the batch is a duplicate after its first occurrence.
        """
        now = _utc(now)
        first = {delivery.id: delivery for delivery in reversed(batch)}  # the first occurrence wins
        unique = sorted(first.values(), key=lambda d: d.id)  # one lock order for concurrent batches
        with self._engine.begin() as conn:
            # ON CONFLICT DO NOTHING waits for a replica inserting the same id, then yields to it.
            new = _insert_deliveries(conn, unique, now=now)
            retry = _failed_deliveries(conn, [d.id for d in unique if d.id not in new])
            _enqueue_deliveries(conn, [d for d in unique if d.id in new or d.id in retry], now=now)
        outcomes = {d.id: DeliveryOutcome.DUPLICATE for d in unique}
        outcomes.update({i: DeliveryOutcome.NEW for i in new} | {i: DeliveryOutcome.RETRY for i in retry})
        return [outcomes.pop(d.id, DeliveryOutcome.DUPLICATE) for d in batch]

    def enqueue(self, kind: str, payload: dict[str, Any], *, key: str | None, now: datetime) -> int:
        with self._engine.begin() as conn:
            return _insert_job(conn, kind, payload, key=key, delivery_id=None, now=_utc(now))

    def enqueue_once(
        self, kind: str, payload: dict[str, Any], *, key: str, now: datetime, same: Sequence[str] = ()
    ) -> int | None:
        """Enqueue unless a job of this kind and key, whose payload has the same values of the fields `same`
        names, is already queued and not yet started: that one will read the newest state when it runs, so a
        burst of pushes costs one ingestion. None when coalesced."""
        waiting = select(jobs.c.payload).where(
            jobs.c.kind == kind,
            jobs.c.key == key,
            jobs.c.state == JobState.QUEUED.value,
            jobs.c.attempts == 0,
        )
        with self._engine.begin() as conn:
            for (text,) in conn.execute(waiting):
                queued = json.loads(text)
                if all(queued.get(field) == payload.get(field) for field in same):
                    return None
            return _insert_job(conn, kind, payload, key=key, delivery_id=None, now=_utc(now))

    def claim(self, worker: str, *, lease: timedelta, now: datetime, max_attempts: int = 5) -> Job | None:
        """Lease the oldest runnable job whose key has no other live running job; None if there is none.

        A job whose lease ran out `max_attempts` times (its workers keep dying on it) is marked failed
        instead of being leased again.
        """
        now = _utc(now)
        with self._engine.begin() as conn:
            skipped: list[int] = []
            while (row := _next_candidate(conn, now, skipped)) is not None:
                if row.state == JobState.RUNNING.value and row.attempts >= max_attempts:
                    _give_up(conn, row, now=now)
                    skipped.append(row.id)
                    continue
                if row.key is None or _take_key(conn, row.key, row.id, now):
                    return _lease(conn, row, worker, lease=lease, now=now)
                skipped.append(row.id)  # another replica is claiming a job with the same key
        return None

    def heartbeat(self, job_id: int, worker: str, *, lease: timedelta, now: datetime) -> bool:
        """Extend the lease; False if the job is no longer this worker's (another worker reclaimed it)."""
        now = _utc(now)
        return self._update_own(job_id, worker, lease_until=now + lease, updated_at=now)

    def complete(self, job_id: int, worker: str, *, now: datetime) -> bool:
        """Mark the job done; False (and nothing changed) if it is no longer this worker's."""
        now = _utc(now)
        done = {"state": JobState.DONE.value, "lease_until": None, "error": None, "updated_at": now}
        return self._update_own(job_id, worker, **done)

    def fail(
        self,
        job_id: int,
        worker: str,
        error: str,
        *,
        now: datetime,
        retry_after: timedelta | None,
        max_attempts: int = 5,
    ) -> JobState:
        """Requeue the job (claimable from now + retry_after) or, after max_attempts, mark it failed.

        Returns the job's state afterwards; if the job is no longer this worker's, nothing changes and its
        current state is returned.
        """
        now = _utc(now)
        gave_up = jobs.c.attempts >= max_attempts
        values = {
            "state": case((gave_up, JobState.FAILED.value), else_=JobState.QUEUED.value),
            "worker": None,
            "lease_until": None,
            "not_before": now + (retry_after or timedelta(0)),
            "error": _truncate(error),
            "updated_at": now,
        }
        with self._engine.begin() as conn:
            conn.execute(update(jobs).where(*_owned_by(job_id, worker)).values(**values))
            state = conn.execute(select(jobs.c.state).where(jobs.c.id == job_id)).scalar_one()
        return JobState(state)

    def release(self, job_id: int, worker: str, error: str, *, now: datetime) -> bool:
        """Hand the job back, claimable now, with the attempt its lease counted given back (a shutdown is no
        failure of the job's); False when it is no longer this worker's."""
        now = _utc(now)
        values = {
            "state": JobState.QUEUED.value,
            "worker": None,
            "lease_until": None,
            "not_before": now,
            "attempts": case((jobs.c.attempts > 0, jobs.c.attempts - 1), else_=0),
            "error": _truncate(error),
            "updated_at": now,
        }
        with self._engine.begin() as conn:  # not _update_own: these values name a `worker` column too
            return conn.execute(update(jobs).where(*_owned_by(job_id, worker)).values(**values)).rowcount == 1

    def counts(self) -> dict[str, int]:
        """Jobs by state, every state present."""
        query = select(jobs.c.state, func.count()).group_by(jobs.c.state)
        with self._engine.connect() as conn:
            found: dict[str, int] = {state: count for state, count in conn.execute(query)}
        return {state.value: found.get(state.value, 0) for state in JobState}

    def intake_problem(self) -> str | None:
        """Why a delivery could not be recorded now (the database unreachable, its deliveries table locked),
        or None: reads one row of the table under the engine's own timeouts."""
        try:
            with self._engine.connect() as conn:
                conn.execute(select(deliveries.c.id).limit(1)).all()
        except SQLAlchemyError as exc:
            return f"unreachable or locked: {first_line(getattr(exc, 'orig', None) or exc)}"
        return None

    def deliveries(self) -> int:
        with self._engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(deliveries)).scalar_one()

    def recorded(self, delivery_ids: set[str]) -> set[str]:
        """Those of `delivery_ids` (X-GitHub-Delivery GUIDs) Sluice has recorded."""
        ids, found = sorted(delivery_ids), set()
        with self._engine.connect() as conn:
            for start in range(0, len(ids), 500):  # bounded IN lists
                query = select(deliveries.c.id).where(deliveries.c.id.in_(ids[start : start + 500]))
                found |= set(conn.execute(query).scalars())
        return found

    def _update_own(self, job_id: int, worker: str, **values: Any) -> bool:
        with self._engine.begin() as conn:
            return conn.execute(update(jobs).where(*_owned_by(job_id, worker)).values(**values)).rowcount == 1


def _insert_deliveries(conn: Connection, batch: Sequence[Delivery], *, now: datetime) -> set[str]:
    """Insert the deliveries not recorded yet (job_id NULL until linked); returns the ids inserted."""
    if not batch:
        return set()
    rows = [{"id": d.id, "event": d.event, "received_at": now, "body": d.body, "job_id": None} for d in batch]
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    # RETURNING, not rowcount: psycopg reports no row count for INSERT … ON CONFLICT DO NOTHING here.
    # One statement for any batch size (SQLAlchemy batches the rows itself), so it is compiled once.
    stmt = dialect_insert(deliveries).on_conflict_do_nothing().returning(deliveries.c.id)
    return set(conn.execute(stmt, rows).scalars())


def _failed_deliveries(conn: Connection, delivery_ids: list[str]) -> set[str]:
    """Of these recorded deliveries, those whose latest job failed (to be processed again)."""
    if not delivery_ids:
        return set()
    # Lock the deliveries: of two replicas retrying the same failed delivery, the second sees the new job.
    query = (
        select(deliveries.c.id, jobs.c.state)
        .select_from(deliveries.outerjoin(jobs, jobs.c.id == deliveries.c.job_id))
        .where(deliveries.c.id.in_(delivery_ids))
        .with_for_update(of=deliveries)
    )
    return {row.id for row in conn.execute(query) if row.state == JobState.FAILED.value}


def _enqueue_deliveries(conn: Connection, batch: Sequence[Delivery], *, now: datetime) -> None:
    """One queued job per delivery, and each delivery linked to its new job."""
    if not batch:
        return
    rows = [
        {
            "kind": d.kind,
            "key": d.key,
            "payload": json.dumps(d.payload, ensure_ascii=False),
            "state": JobState.QUEUED.value,
            "attempts": 0,
            "not_before": now,
            "delivery_id": d.id,
            "created_at": now,
            "updated_at": now,
        }
        for d in batch
    ]
    created = conn.execute(insert(jobs).returning(jobs.c.id), rows).scalars().all()
    # One UPDATE … FROM for the whole batch: each delivery points at the job just made for it.
    link = (
        update(deliveries)
        .where(jobs.c.delivery_id == deliveries.c.id, jobs.c.id.in_(created))
        .values(job_id=jobs.c.id)
    )
    conn.execute(link)


def _insert_job(
    conn: Connection,
    kind: str,
    payload: dict[str, Any],
    *,
    key: str | None,
    delivery_id: str | None,
    now: datetime,
) -> int:
    result = conn.execute(
        insert(jobs).values(
            kind=kind,
            key=key,
            payload=json.dumps(payload, ensure_ascii=False),
            state=JobState.QUEUED.value,
            attempts=0,
            not_before=now,
            delivery_id=delivery_id,
            created_at=now,
            updated_at=now,
        )
    )
    job_id = result.inserted_primary_key
    assert job_id is not None
    return int(job_id[0])


def _next_candidate(conn: Connection, now: datetime, skipped: list[int]) -> Any:
    """The oldest queued job due by now, or running one whose worker's lease ran out, locked for update."""
    params = {"now": now, "skipped": skipped}
    found = [conn.execute(query, params).first() for query in _CANDIDATES]
    rows = [row for row in found if row is not None]
    return min(rows, key=lambda row: row.id) if rows else None


def _candidate_queries() -> tuple[Select[Any], ...]:
    """Built once (workers claim many times a second); `now` and `skipped` are bound on each claim.

    One query per state, each walking ix_jobs_state_id in id order and stopping at its first match: an OR
    of the two would collect and sort every queued job on each claim (SQLite), under the write lock.
    """
    now = bindparam("now", type_=UTCDateTime())
    other = jobs.alias("other")
    live_on_same_key = (
        select(other.c.id)
        .where(
            other.c.key == jobs.c.key,
            other.c.id != jobs.c.id,
            other.c.state == JobState.RUNNING.value,
            other.c.lease_until >= now,
        )
        .exists()
    )
    free = (
        or_(jobs.c.key.is_(None), not_(live_on_same_key)),
        jobs.c.id.not_in(bindparam("skipped", expanding=True)),
    )
    due = jobs.c.state == JobState.QUEUED.value, jobs.c.not_before <= now
    expired = jobs.c.state == JobState.RUNNING.value, jobs.c.lease_until < now
    return tuple(
        select(jobs)
        .where(*runnable, *free)
        .order_by(jobs.c.id)
        .limit(1)
        # PostgreSQL: replicas skip each other's candidates; NO KEY UPDATE lets deliveries reference the row.
        .with_for_update(skip_locked=True, key_share=True, of=jobs)
        for runnable in (due, expired)
    )


_CANDIDATES = _candidate_queries()


def _take_key(conn: Connection, key: str, job_id: int, now: datetime) -> bool:
    """Whether job `job_id` may run now: no other job with its key runs under a live lease.

    PostgreSQL: a transaction-scoped advisory lock on the key makes replicas claiming jobs of one key take
    turns, and the check reads again under it, so it sees a claim that committed meanwhile. Advisory locks
    are the database's, not the schema's: the lock names the schema the queue lives in, so deployments that
    share a database in schemas of their own never wait on each other's keys. SQLite's BEGIN IMMEDIATE
    already serialises claims.
    """
    if conn.dialect.name == "postgresql":
        lock = text("SELECT pg_try_advisory_xact_lock(:namespace, hashtext(current_schema() || '/' || :key))")
        if not conn.execute(lock, {"namespace": _KEY_LOCK_NAMESPACE, "key": key}).scalar_one():
            return False
    query = select(jobs.c.id).where(
        jobs.c.key == key,
        jobs.c.id != job_id,
        jobs.c.state == JobState.RUNNING.value,
        jobs.c.lease_until >= now,
    )
    return conn.execute(query.limit(1)).first() is None


def _lease(conn: Connection, row: Any, worker: str, *, lease: timedelta, now: datetime) -> Job:
    values = {
        "state": JobState.RUNNING.value,
        "worker": worker,
        "lease_until": now + lease,
        "attempts": row.attempts + 1,
        "updated_at": now,
    }
    conn.execute(update(jobs).where(jobs.c.id == row.id).values(**values))
    payload = json.loads(row.payload)
    return Job(row.id, row.kind, row.key, payload, row.attempts + 1, row.delivery_id)


def _give_up(conn: Connection, row: Any, *, now: datetime) -> None:
    error = f"its worker stopped (lease ran out) {row.attempts} times: {row.error or 'no error recorded'}"
    values = {"state": JobState.FAILED.value, "worker": None, "lease_until": None, "error": _truncate(error)}
    conn.execute(update(jobs).where(jobs.c.id == row.id).values(**values, updated_at=now))


def _owned_by(job_id: int, worker: str) -> tuple[Any, ...]:
    return (jobs.c.id == job_id, jobs.c.worker == worker, jobs.c.state == JobState.RUNNING.value)


def _truncate(error: str) -> str:
    return error.encode(errors="replace")[:MAX_ERROR_BYTES].decode(errors="ignore")
