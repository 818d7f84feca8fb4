"""Tier runs in the store: each attempt of a tier on a PR head, from its dispatch to its verdict."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
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

from bot.core.tiers import (
    PASS_RATE_WINDOW,
    TRUNK_PULL,
    Level,
    RunState,
    TierRun,
    TierStats,
    Verdict,
    decode_selection,
    selection_code,
)
from bot.core.trunk_watch import WATCH
from bot.db.store import Store, UTCDateTime, metadata

RunId = BigInteger().with_variant(Integer, "sqlite")  # GitHub's workflow run ids outgrow 32 bits

tier_runs = Table(
    "tier_runs",
    metadata,
    Column("id", Integer, autoincrement=True),
    Column("fork", String(255), nullable=False),
    Column("pull", Integer, nullable=False),
    Column("ingestion", String(64), nullable=False),
    Column("level", String(2), nullable=False),  # l1 | l2 | l3
    Column("head_sha", String(40), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("selection", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("run_id", RunId),
    Column("verdict", String(16)),
    Column("detail", Text, nullable=False),
    Column("report", Text),  # the tier report's JSON
    Column("dispatched_at", UTCDateTime, nullable=False),
    Column("completed_at", UTCDateTime),
    PrimaryKeyConstraint("id", name="pk_tier_runs"),
    UniqueConstraint("fork", "pull", "level", "head_sha", "attempt", name="uq_tier_runs_attempt"),
    Index("ix_tier_runs_fork_pull", "fork", "pull"),
    Index("ix_tier_runs_fork_run_id", "fork", "run_id"),
)


class TierRuns:
    """The attempts of each tier; one attempt per (fork, PR, tier, head, number), so replicas cannot both
    dispatch it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, run: TierRun) -> TierRun | None:
        """Record a new attempt; None when another worker recorded the same attempt first."""
        row = _row(run)
        row.pop("id")
        try:
            with self.store._engine.begin() as conn:
                created = conn.execute(tier_runs.insert().values(row).returning(tier_runs.c.id)).scalar_one()
        except IntegrityError:
            return None
        return dataclasses.replace(run, id=int(created))

    def save(self, run: TierRun) -> None:
        assert run.id is not None
        row = _row(run)
        with self.store._engine.begin() as conn:
            conn.execute(update(tier_runs).where(tier_runs.c.id == row.pop("id")).values(row))

    def set_run_id(self, key: int, run_id: int) -> None:
        """The workflow run a dispatch started (its result may arrive before this: it is not overwritten)."""
        with self.store._engine.begin() as conn:
            conn.execute(
                update(tier_runs)
                .where(tier_runs.c.id == key, tier_runs.c.run_id.is_(None))
                .values(run_id=run_id)
            )

    def get(self, run_id: int) -> TierRun | None:
        with self.store._engine.connect() as conn:
            row = conn.execute(select(tier_runs).where(tier_runs.c.id == run_id)).first()
        return _run(row._mapping) if row is not None else None

    def for_pull(self, fork: str, pull: int) -> list[TierRun]:
        query = select(tier_runs).where(tier_runs.c.fork == fork, tier_runs.c.pull == pull)
        with self.store._engine.connect() as conn:
            return [_run(r._mapping) for r in conn.execute(query.order_by(tier_runs.c.id))]

    def by_workflow_run(self, fork: str, run_id: int) -> TierRun | None:
        query = select(tier_runs).where(tier_runs.c.fork == fork, tier_runs.c.run_id == run_id)
        with self.store._engine.connect() as conn:
            row = conn.execute(query.order_by(desc(tier_runs.c.id))).first()
        return _run(row._mapping) if row is not None else None

    def pull_for_head(self, fork: str, head_sha: str) -> int | None:
        """The PR whose tiers ran on `head_sha` (a check run's button names only the commit)."""
        query = select(tier_runs.c.pull).where(
            tier_runs.c.fork == fork, tier_runs.c.head_sha == head_sha, tier_runs.c.pull != TRUNK_PULL
        )  # a trunk run (pull 0) has no check run to press
        with self.store._engine.connect() as conn:
            found = conn.execute(query.order_by(desc(tier_runs.c.id)).limit(1)).scalar()
        return int(found) if found is not None else None

    def latest_report(self, fork: str, level: Level, *, head_sha: str) -> str | None:
        """The newest report of `level` on `head_sha` (fork trunk's, as a baseline), if one was kept."""
        query = (
            select(tier_runs.c.report)
            .where(
                tier_runs.c.fork == fork, tier_runs.c.level == level.value, tier_runs.c.head_sha == head_sha
            )
            .where(tier_runs.c.report.is_not(None))
            .order_by(desc(tier_runs.c.id))
        )
        with self.store._engine.connect() as conn:
            found = conn.execute(query).scalar()
        return str(found) if found is not None else None

    def latest_trunk_report(self, fork: str, level: Level) -> str | None:
        """Fork trunk's newest report of `level` from trunk watch (`trunk_watch` in the fork's config)."""
        query = (
            select(tier_runs.c.report)
            .where(tier_runs.c.fork == fork, tier_runs.c.pull == TRUNK_PULL, tier_runs.c.ingestion == WATCH)
            .where(tier_runs.c.level == level.value, tier_runs.c.report.is_not(None))
            .where(tier_runs.c.verdict != Verdict.INFRA.value)
            .order_by(desc(tier_runs.c.id))
        )
        with self.store._engine.connect() as conn:
            found = conn.execute(query.limit(1)).scalar()
        return str(found) if found is not None else None

    def stats(self, *, window: int = PASS_RATE_WINDOW) -> list[TierStats]:
        """Each fork's and tier's pass rate over its newest `window` completed runs, and its runner minutes
        over all of them; one read of only the columns these need (a report's JSON is left where it is)."""
        columns = (tier_runs.c.fork, tier_runs.c.level, tier_runs.c.verdict)
        times = (tier_runs.c.dispatched_at, tier_runs.c.completed_at)
        query = (
            select(*columns, *times)
            .where(tier_runs.c.state == RunState.COMPLETED.value, tier_runs.c.verdict.is_not(None))
            .order_by(desc(tier_runs.c.id))
        )
        with self.store._engine.connect() as conn:
            rows = conn.execute(query).all()
        return _stats(rows, window=window)


def _stats(rows: Sequence[Any], *, window: int) -> list[TierStats]:
    """`rows` newest first: (fork, level, verdict, dispatched_at, completed_at)."""
    seen: dict[tuple[str, str], list[Any]] = {}
    for row in rows:
        seen.setdefault((row.fork, row.level), []).append(row)
    found = []
    for (fork, level), runs in sorted(seen.items()):
        recent = runs[:window]
        seconds = sum((r.completed_at - r.dispatched_at).total_seconds() for r in runs if r.completed_at)
        passed = sum(r.verdict == Verdict.PASSED.value for r in recent)
        found.append(TierStats(fork, Level(level), len(recent), passed, max(seconds, 0.0) / 60))
    return found


def _row(run: TierRun) -> dict[str, Any]:
    row = dataclasses.asdict(run)
    row.update(level=run.level.value, state=run.state.value)
    row["selection"] = selection_code(run.selection, row.pop("suite"))
    row["verdict"] = run.verdict.value if run.verdict is not None else None
    return row


def _run(row: Any) -> TierRun:
    values = dict(row)
    values.update(level=Level(values["level"]), state=RunState(values["state"]))
    values["selection"], values["suite"] = decode_selection(values["selection"])
    values["verdict"] = Verdict(values["verdict"]) if values["verdict"] is not None else None
    return TierRun(**values)
