"""Tier runs in the store: each attempt of a tier on a PR head, from its dispatch to its verdict."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    desc,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from bot.core.bisect_pr import Blame
from bot.core.errors import BadInput
from bot.core.l3_metrics import Regression
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
from bot.db.registry import ingestion_heads
from bot.db.store import Store, UTCDateTime, metadata

RunId = BigInteger().with_variant(Integer, "sqlite")  # GitHub's workflow run ids outgrow 32 bits
INGESTION_LEN = 255  # as long as a branch name: a `sluice/ingest/<anything>` branch's id is its name

tier_runs = Table(
    "tier_runs",
    metadata,
    Column("id", Integer, autoincrement=True),
    Column("fork", String(255), nullable=False),
    Column("pull", Integer, nullable=False),
    Column("ingestion", String(INGESTION_LEN), nullable=False),
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
    # A bisection's probe (the bisection's id and the probe's); 0 for a run of the PR's own head.
    Column("bisection", Integer, nullable=False, server_default="0"),
    Column("probe", Integer, nullable=False, server_default="0"),
    PrimaryKeyConstraint("id", name="pk_tier_runs"),
    UniqueConstraint(
        "fork", "pull", "level", "head_sha", "attempt", "bisection", "probe", name="uq_tier_runs_attempt"
    ),
    Index("ix_tier_runs_fork_pull", "fork", "pull"),
    Index("ix_tier_runs_fork_run_id", "fork", "run_id"),
)

# What a completed run's benchmarks regressed beyond noise against its baseline: one row per cell (a benchmark
# and a metric) `runners compare` judged regressed. No row: nothing regressed, or nothing to compare with.
l3_regressions = Table(
    "l3_regressions",
    metadata,
    Column("id", Integer, autoincrement=True),
    Column("tier_run", Integer, nullable=False),
    Column("benchmark", Text, nullable=False),
    Column("kernel", String(255), nullable=False),
    Column("metric", String(16), nullable=False),
    Column("critical", Boolean, nullable=False),
    Column("ratio", Float, nullable=False),
    Column("threshold", Float, nullable=False),
    PrimaryKeyConstraint("id", name="pk_l3_regressions"),
    ForeignKeyConstraint(
        ["tier_run"], ["tier_runs.id"], name="fk_l3_regressions_tier_run_tier_runs", ondelete="CASCADE"
    ),
    Index("ix_l3_regressions_tier_run", "tier_run"),
)


class TierRuns:
    """The attempts of each tier; one attempt per (fork, PR, tier, head, number), so replicas cannot both
    dispatch it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, run: TierRun) -> TierRun | None:
        """Record a new attempt; None when another worker recorded the same attempt first. BadInput for an
        ingestion id longer than the column (a branch name past GitHub's 255 bytes)."""
        if len(run.ingestion) > INGESTION_LEN:
            raise BadInput(
                f"PR #{run.pull}'s ingestion id is {len(run.ingestion)} characters long, "
                f"over {INGESTION_LEN}",
                "give the PR's branch a shorter name",
            )
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

    def finish(self, run: TierRun, regressions: Sequence[Regression] | None = None) -> bool:
        """Record how a waiting run ended (its result, a time-out, discarded), only if it still waits: False
        when another worker ended it first (a result and the time-out sweep can race), and that stands.
        `regressions` (an L3 result's) are written in the same transaction: a completed run never lacks
        them, and a run that another worker ended never gets them."""
        assert run.id is not None
        row = _row(run)
        key = row.pop("id")
        waiting = (RunState.DISPATCHED.value, RunState.UNDISPATCHED.value)
        query = update(tier_runs).where(tier_runs.c.id == key, tier_runs.c.state.in_(waiting))
        with self.store._engine.begin() as conn:
            if conn.execute(query.values(row)).rowcount != 1:
                return False
            if regressions is not None:
                _replace_regressions(conn, key, regressions)
            return True

    def mark_undispatched(self, key: int, *, detail: str) -> None:
        """Its dispatch failed for now: dispatched again (the same id) when its tiers are next looked at.
        Only a run still waiting for its dispatch's answer changes (a result that came meanwhile stands)."""
        query = update(tier_runs).where(tier_runs.c.id == key, tier_runs.c.state == RunState.DISPATCHED.value)
        with self.store._engine.begin() as conn:
            conn.execute(query.values(state=RunState.UNDISPATCHED.value, detail=detail[:2000]))

    def claim_undispatched(self, key: int, *, at: datetime) -> TierRun | None:
        """Take an undispatched run to dispatch it again, waiting from `at`; None when another worker took
        it first (or it is no longer undispatched)."""
        query = (
            update(tier_runs)
            .where(tier_runs.c.id == key, tier_runs.c.state == RunState.UNDISPATCHED.value)
            .values(state=RunState.DISPATCHED.value, dispatched_at=at)
        )
        with self.store._engine.begin() as conn:
            if conn.execute(query).rowcount != 1:
                return None
        return self.get(key)

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

    def waiting(self) -> list[TierRun]:
        """Every fork's runs that wait for a result or for their dispatch (for the periodic sweep)."""
        states = (RunState.DISPATCHED.value, RunState.UNDISPATCHED.value)
        query = select(tier_runs).where(tier_runs.c.state.in_(states)).order_by(tier_runs.c.id)
        with self.store._engine.connect() as conn:
            return [_run(r._mapping) for r in conn.execute(query)]

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
        with self.store._engine.connect() as conn:
            found = conn.execute(_on_head(fork, level, head_sha, tier_runs.c.report)).scalar()
        return str(found) if found is not None else None

    def baseline(self, fork: str, level: Level, *, head_sha: str) -> TierRun | None:
        """The run whose report is the baseline of `level` for a PR on `head_sha`: the newest one kept on that
        commit, else trunk watch's newest (what `runners compare` compares a PR's report with)."""
        with self.store._engine.connect() as conn:
            row = conn.execute(_on_head(fork, level, head_sha, tier_runs)).first()
            row = row or conn.execute(_trunk_watch(fork, level, tier_runs).limit(1)).first()
        return _run(row._mapping) if row is not None else None

    def failed_alone(self, fork: str) -> dict[str, Blame]:
        """The upstream commit of each one-commit ingestion PR whose own tier failed on a head Sluice
        pushed (a real failure: not the machine's, nor one that fork trunk shares), with its first such
        failure. With nothing else in the PR to blame, that is as good as a bisection's blame. Each head
        counts with the commits it carried: a PR rebuilt with one commit where it had several, or the
        reverse, blames only by the heads that carried one."""
        t, h = tier_runs.c, ingestion_heads.c
        query = (
            select(h.upstream_first, t.level, t.pull, t.detail, t.completed_at)
            .join(ingestion_heads, (h.fork == t.fork) & (h.ingestion == t.ingestion) & (h.head == t.head_sha))
            .where(
                t.fork == fork,
                h.commits == 1,
                t.bisection == 0,
                t.probe == 0,
                t.state == RunState.COMPLETED.value,
                t.verdict == Verdict.FAILED.value,
                t.completed_at.is_not(None),
            )
            .order_by(t.completed_at, t.id)
        )
        found: dict[str, Blame] = {}
        with self.store._engine.connect() as conn:
            for r in conn.execute(query):
                level = Level(r.level)
                detail = f"{level.name} failed on #{r.pull}, its one upstream commit: {r.detail}"[:300]
                at = int(r.completed_at.timestamp())
                found.setdefault(r.upstream_first, Blame(level, r.pull, detail, at))
        return found

    def record_regressions(self, key: int, regressions: Sequence[Regression]) -> None:
        """What run `key` regressed, replacing what was recorded for it (the flows record them through
        `finish`, with the run's ending)."""
        with self.store._engine.begin() as conn:
            _replace_regressions(conn, key, regressions)

    def regressions(self, key: int) -> tuple[Regression, ...]:
        query = select(l3_regressions).where(l3_regressions.c.tier_run == key).order_by(l3_regressions.c.id)
        with self.store._engine.connect() as conn:
            rows = conn.execute(query).all()
        return tuple(_regression(r._mapping) for r in rows)

    def stats(self, *, window: int = PASS_RATE_WINDOW) -> list[TierStats]:
        """Each fork's and tier's pass rate over its newest `window` completed runs of PR heads (not trunk
        watch's runs, nor a bisection's probes, which are meant to fail on the culprit), and its runner
        minutes over all its completed runs; one read of only the columns these need (a report's JSON is
        left where it is)."""
        columns = (tier_runs.c.fork, tier_runs.c.level, tier_runs.c.verdict)
        kind = (tier_runs.c.pull, tier_runs.c.bisection)
        times = (tier_runs.c.dispatched_at, tier_runs.c.completed_at)
        query = (
            select(*columns, *kind, *times)
            .where(tier_runs.c.state == RunState.COMPLETED.value, tier_runs.c.verdict.is_not(None))
            .order_by(desc(tier_runs.c.id))
        )
        with self.store._engine.connect() as conn:
            rows = conn.execute(query).all()
        return _stats(rows, window=window)


def _stats(rows: Sequence[Any], *, window: int) -> list[TierStats]:
    """`rows` newest first: (fork, level, verdict, pull, bisection, dispatched_at, completed_at)."""
    seen: dict[tuple[str, str], list[Any]] = {}
    for row in rows:
        seen.setdefault((row.fork, row.level), []).append(row)
    found = []
    for (fork, level), runs in sorted(seen.items()):
        recent = [r for r in runs if r.pull != TRUNK_PULL and not r.bisection][:window]
        seconds = sum((r.completed_at - r.dispatched_at).total_seconds() for r in runs if r.completed_at)
        passed = sum(r.verdict == Verdict.PASSED.value for r in recent)
        found.append(TierStats(fork, Level(level), len(recent), passed, max(seconds, 0.0) / 60))
    return found


def _replace_regressions(conn: Connection, key: int, regressions: Sequence[Regression]) -> None:
    conn.execute(delete(l3_regressions).where(l3_regressions.c.tier_run == key))
    rows = [{"tier_run": key, **dataclasses.asdict(r)} for r in regressions]
    if rows:
        conn.execute(insert(l3_regressions), rows)


def _regression(row: Any) -> Regression:
    values = {k: row[k] for k in ("benchmark", "kernel", "metric", "ratio", "threshold")}
    return Regression(**values, critical=bool(row["critical"]))


def _row(run: TierRun) -> dict[str, Any]:
    row = dataclasses.asdict(run)
    row.update(level=run.level.value, state=run.state.value)
    row["selection"] = selection_code(run.selection, row.pop("suite"))
    row["verdict"] = run.verdict.value if run.verdict is not None else None
    row["bisection"], row["probe"] = run.bisection or 0, run.probe or 0
    return row


def _on_head(fork: str, level: Level, head_sha: str, *columns: Any) -> Any:
    """The completed runs of `level` on `head_sha` that kept a report from a machine that worked (an
    infrastructure failure's numbers are the machine's, no baseline), newest first."""
    return (
        select(*columns)
        .where(tier_runs.c.fork == fork, tier_runs.c.level == level.value, tier_runs.c.head_sha == head_sha)
        .where(tier_runs.c.report.is_not(None), tier_runs.c.state == RunState.COMPLETED.value)
        .where(tier_runs.c.verdict != Verdict.INFRA.value)
        .order_by(desc(tier_runs.c.id))
    )


def _trunk_watch(fork: str, level: Level, *columns: Any) -> Any:
    """Trunk watch's scheduled runs of `level` that kept a report from a machine that worked, newest first."""
    return (
        select(*columns)
        .where(tier_runs.c.fork == fork, tier_runs.c.pull == TRUNK_PULL, tier_runs.c.ingestion == WATCH)
        .where(tier_runs.c.level == level.value, tier_runs.c.report.is_not(None))
        .where(tier_runs.c.verdict != Verdict.INFRA.value)
        .order_by(desc(tier_runs.c.id))
    )


def _run(row: Any) -> TierRun:
    values = dict(row)
    values.update(level=Level(values["level"]), state=RunState(values["state"]))
    values["selection"], values["suite"] = decode_selection(values["selection"])
    values["verdict"] = Verdict(values["verdict"]) if values["verdict"] is not None else None
    values["bisection"], values["probe"] = values["bisection"] or None, values["probe"] or None
    return TierRun(**values)
