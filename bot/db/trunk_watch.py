"""Trunk watch in the store: each failure tracked on fork trunk (its bisection and issue), and the trunk's
own tier runs read back from `tier_runs` (pull 0)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Column,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    desc,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from bot.core.tiers import TRUNK_PULL, Level, RunState, TierRun
from bot.core.trunk_watch import Phase, Tracked, key_digest
from bot.db.store import Store, UTCDateTime, metadata
from bot.db.tier_runs import _run, tier_runs

trunk_failures = Table(
    "trunk_failures",
    metadata,
    Column("id", Integer, autoincrement=True),
    Column("fork", String(255), nullable=False),
    Column("digest", String(16), nullable=False),  # of the tracking key: fork, tier, test or metric
    Column("phase", String(16), nullable=False),
    Column("issue", Integer),
    Column("document", Text, nullable=False),  # the Tracked model's JSON (its bisection included)
    Column("version", Integer, nullable=False),  # bumped by each save: concurrent results cannot both win
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("id", name="pk_trunk_failures"),
    UniqueConstraint("fork", "digest", name="uq_trunk_failures_key"),
)

Versioned = tuple[Tracked, int]


class TrunkWatchStore:
    """Failures tracked on fork trunk; `save` is a compare-and-set on the version read."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, tracked: Tracked, *, at: datetime) -> bool:
        """Track a new failure; False when one with its key is tracked already (another worker was first)."""
        row = {
            "fork": tracked.fork,
            "digest": key_digest(tracked.key),
            "phase": tracked.phase.value,
            "issue": tracked.issue,
            "document": tracked.model_dump_json(),
            "version": 1,
            "updated_at": at,
        }
        try:
            with self.store._engine.begin() as conn:
                conn.execute(trunk_failures.insert().values(row))
        except IntegrityError:
            return False
        return True

    def save(self, tracked: Tracked, *, version: int, at: datetime) -> bool:
        """Write `tracked` over the version read; False when someone saved it since (read it again)."""
        where = (
            trunk_failures.c.fork == tracked.fork,
            trunk_failures.c.digest == key_digest(tracked.key),
            trunk_failures.c.version == version,
        )
        values = {
            "phase": tracked.phase.value,
            "issue": tracked.issue,
            "document": tracked.model_dump_json(),
            "version": version + 1,
            "updated_at": at,
        }
        with self.store._engine.begin() as conn:
            return conn.execute(update(trunk_failures).where(*where).values(values)).rowcount == 1

    def tracked(self, fork: str, key: str) -> Versioned | None:
        query = select(trunk_failures.c.document, trunk_failures.c.version).where(
            trunk_failures.c.fork == fork, trunk_failures.c.digest == key_digest(key)
        )
        with self.store._engine.connect() as conn:
            row = conn.execute(query).first()
        return (Tracked.model_validate_json(row.document), int(row.version)) if row is not None else None

    def open_failures(self, fork: str) -> list[Versioned]:
        """The fork's failures not yet fixed, oldest first."""
        query = (
            select(trunk_failures.c.document, trunk_failures.c.version)
            .where(trunk_failures.c.fork == fork, trunk_failures.c.phase != Phase.FIXED.value)
            .order_by(trunk_failures.c.id)
        )
        with self.store._engine.connect() as conn:
            return [(Tracked.model_validate_json(r.document), int(r.version)) for r in conn.execute(query)]

    def trunk_runs(
        self, fork: str, *, ingestion: str, level: Level | None = None, limit: int = 20
    ) -> list[TierRun]:
        """The fork's trunk tier runs of one kind (scheduled or bisection), newest first."""
        query = select(tier_runs).where(
            tier_runs.c.fork == fork, tier_runs.c.pull == TRUNK_PULL, tier_runs.c.ingestion == ingestion
        )
        if level is not None:
            query = query.where(tier_runs.c.level == level.value)
        with self.store._engine.connect() as conn:
            rows = conn.execute(query.order_by(desc(tier_runs.c.id)).limit(limit))
            return [_run(r._mapping) for r in rows]

    def runs_on(self, fork: str, level: Level, head_sha: str) -> list[TierRun]:
        """Every trunk tier run of `level` on `head_sha` (scheduled or bisection), oldest first."""
        query = select(tier_runs).where(
            tier_runs.c.fork == fork,
            tier_runs.c.pull == TRUNK_PULL,
            tier_runs.c.level == level.value,
            tier_runs.c.head_sha == head_sha,
        )
        with self.store._engine.connect() as conn:
            return [_run(r._mapping) for r in conn.execute(query.order_by(tier_runs.c.id))]

    def waiting(self, fork: str) -> list[TierRun]:
        """The fork's trunk tier runs still waiting for a result (a stalled one is timed out)."""
        query = select(tier_runs).where(
            tier_runs.c.fork == fork,
            tier_runs.c.pull == TRUNK_PULL,
            tier_runs.c.state == RunState.DISPATCHED.value,
        )
        with self.store._engine.connect() as conn:
            return [_run(r._mapping) for r in conn.execute(query.order_by(tier_runs.c.id))]
