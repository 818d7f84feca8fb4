"""Bisections in the store: each search of a failed ingestion on one tier (its state as JSON, one running per
PR at a time), and the culprits they blamed, which the planner reads as `bisected` risk reasons."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Column,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from bot.core.bisect_pr import BisectionRecord, BisectionStats, Blame, Status
from bot.core.tiers import Level
from bot.db.store import Store, UTCDateTime, metadata
from bot.db.tier_runs import INGESTION_LEN

bisections = Table(
    "bisections",
    metadata,
    Column("id", Integer, autoincrement=True),
    Column("fork", String(255), nullable=False),
    Column("pull", Integer, nullable=False),
    Column("ingestion", String(INGESTION_LEN), nullable=False),
    Column("level", String(2), nullable=False),
    Column("head_sha", String(40), nullable=False),
    Column("status", String(16), nullable=False),
    Column("running", String(300)),  # "<fork>#<pull>" while it runs, else NULL: one running bisection per PR
    Column("runs", Integer, nullable=False),
    Column("version", Integer, nullable=False),
    Column("record", Text, nullable=False),  # BisectionRecord's JSON
    Column("started_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("id", name="pk_bisections"),
    UniqueConstraint("running", name="uq_bisections_running"),
    Index("ix_bisections_fork_pull", "fork", "pull"),
)

bisect_culprits = Table(
    "bisect_culprits",
    metadata,
    Column("fork", String(255), nullable=False),
    Column("sha", String(40), nullable=False),
    Column("level", String(2), nullable=False),
    Column("pull", Integer, nullable=False),
    Column("bisection", Integer, nullable=False),
    Column("detail", Text, nullable=False),
    Column("at", UTCDateTime, nullable=False),  # the newest failure it caused
    Column("first_at", UTCDateTime, nullable=False),  # when it was first blamed
    PrimaryKeyConstraint("fork", "sha", name="pk_bisect_culprits"),
)


class Bisections:
    """Bisection records (`BisectionRecords` in bot.ports)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def start(self, record: BisectionRecord, *, at: datetime) -> BisectionRecord | None:
        """Record a new running bisection; None when one already runs on that PR."""
        row = _row(record.model_copy(update={"version": 1}), at=at)
        try:
            with self.store._engine.begin() as conn:
                key = conn.execute(
                    insert(bisections).values(started_at=at, **row).returning(bisections.c.id)
                ).scalar_one()
                saved = record.model_copy(update={"id": int(key), "version": 1})
                conn.execute(update(bisections).where(bisections.c.id == key).values(record=_json(saved)))
        except IntegrityError:
            return None
        return saved

    def save(self, record: BisectionRecord, *, at: datetime) -> BisectionRecord | None:
        """Save a changed record if nobody saved it since it was read (its version); None when they did."""
        assert record.id is not None
        saved = record.model_copy(update={"version": record.version + 1})
        with self.store._engine.begin() as conn:
            done = conn.execute(
                update(bisections)
                .where(bisections.c.id == record.id, bisections.c.version == record.version)
                .values(_row(saved, at=at))
            )
        return saved if done.rowcount == 1 else None

    def get(self, key: int) -> BisectionRecord | None:
        with self.store._engine.connect() as conn:
            text = conn.execute(select(bisections.c.record).where(bisections.c.id == key)).scalar()
        return BisectionRecord.model_validate_json(text) if text is not None else None

    def running(self, fork: str, pull: int) -> BisectionRecord | None:
        query = select(bisections.c.record).where(bisections.c.running == _running_key(fork, pull))
        with self.store._engine.connect() as conn:
            text = conn.execute(query).scalar()
        return BisectionRecord.model_validate_json(text) if text is not None else None

    def for_pull(self, fork: str, pull: int) -> list[BisectionRecord]:
        query = select(bisections.c.record).where(bisections.c.fork == fork, bisections.c.pull == pull)
        with self.store._engine.connect() as conn:
            rows = conn.execute(query.order_by(bisections.c.id)).scalars()
            return [BisectionRecord.model_validate_json(t) for t in rows]

    def for_fork(self, fork: str) -> list[BisectionRecord]:
        """Every bisection of `fork`'s ingestion PRs, oldest first."""
        query = select(bisections.c.record).where(bisections.c.fork == fork)
        with self.store._engine.connect() as conn:
            rows = conn.execute(query.order_by(bisections.c.id)).scalars()
            return [BisectionRecord.model_validate_json(t) for t in rows]

    def blame(
        self, fork: str, sha: str, *, level: Level, pull: int, bisection: int, detail: str, at: datetime
    ) -> None:
        """Record a culprit (again: the newest failure it caused is kept, and when it was first blamed)."""
        values = {"level": level.value, "pull": pull, "bisection": bisection, "detail": detail, "at": at}
        with self.store._engine.begin() as conn:
            done = conn.execute(
                update(bisect_culprits)
                .where(bisect_culprits.c.fork == fork, bisect_culprits.c.sha == sha)
                .values(values)
            )
            if done.rowcount == 0:
                conn.execute(insert(bisect_culprits).values(fork=fork, sha=sha, first_at=at, **values))

    def blamed(self, fork: str) -> dict[str, str]:
        """Each culprit's upstream SHA and what its failure was (the planner's `bisected` reason)."""
        query = select(bisect_culprits.c.sha, bisect_culprits.c.detail).where(bisect_culprits.c.fork == fork)
        with self.store._engine.connect() as conn:
            return {r.sha: r.detail for r in conn.execute(query)}

    def blames(self, fork: str) -> dict[str, Blame]:
        """Each culprit's upstream SHA and its blame: the tier, the PR and what failed (its newest failure),
        and when it was first blamed (what `sluice calibrate` counts as evidence that the commit broke the
        fork, from then on)."""
        c = bisect_culprits.c
        query = select(c.sha, c.level, c.pull, c.detail, c.first_at).where(c.fork == fork)
        with self.store._engine.connect() as conn:
            return {
                r.sha: Blame(Level(r.level), r.pull, r.detail, int(r.first_at.timestamp()))
                for r in conn.execute(query)
            }

    def stats(self) -> list[BisectionStats]:
        """Per fork and tier: how many bisections, the tier runs they used, how many run now."""
        query = (
            select(
                bisections.c.fork,
                bisections.c.level,
                func.count(),
                func.sum(bisections.c.runs),
                func.count(bisections.c.running),
            )
            .group_by(bisections.c.fork, bisections.c.level)
            .order_by(bisections.c.fork, bisections.c.level)
        )
        with self.store._engine.connect() as conn:
            rows = conn.execute(query).all()
        return [BisectionStats(f, Level(lv), int(n), int(r or 0), int(k)) for f, lv, n, r, k in rows]


def _running_key(fork: str, pull: int) -> str:
    return f"{fork}#{pull}"


def _json(record: BisectionRecord) -> str:
    return record.model_dump_json()


def _row(record: BisectionRecord, *, at: datetime) -> dict[str, object]:
    return {
        "fork": record.fork,
        "pull": record.pull,
        "ingestion": record.ingestion,
        "level": record.level.value,
        "head_sha": record.head_sha,
        "status": record.status.value,
        "running": _running_key(record.fork, record.pull) if record.status is Status.RUNNING else None,
        "runs": record.state.runs,
        "version": record.version,
        "record": _json(record),
        "updated_at": at,
    }
