"""L3's metrics as the gate reads them (the newest L3 attempt on a PR head and what it regressed) and the area
owners' `/signoff l3`, each for the head it was given on."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Integer, PrimaryKeyConstraint, String, Table, desc, select
from sqlalchemy.dialects import postgresql, sqlite

from bot.core.l3_metrics import L3Metrics, Signoff
from bot.core.tiers import Level, RunState
from bot.db.store import Store, UTCDateTime, _utc, metadata
from bot.db.tier_runs import TierRuns, tier_runs

l3_signoffs = Table(
    "l3_signoffs",
    metadata,
    Column("fork", String(255), nullable=False),
    Column("pr_number", Integer, nullable=False),
    Column("login", String(255), nullable=False),
    Column("head_sha", String(40), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("fork", "pr_number", "login", "head_sha", name="pk_l3_signoffs"),
)


class L3Signoffs:
    """What L3 found on a PR head, and who signed it off there."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def l3_metrics(self, fork: str, pr_number: int, *, head_sha: str) -> L3Metrics | None:
        """The regressions of the newest L3 attempt on `head_sha` that has a result; None when none has (its
        check run, not this, keeps the gate waiting then). A newer attempt that has none yet (running, or
        never started: GitHub refused its check run, which still shows the last result) leaves the last
        result's regressions standing, so a re-run never drops a signoff the last result asked for."""
        query = (
            select(tier_runs.c.id)
            .where(tier_runs.c.fork == fork, tier_runs.c.pull == pr_number)
            .where(tier_runs.c.level == Level.L3.value, tier_runs.c.head_sha == head_sha)
            .where(tier_runs.c.state == RunState.COMPLETED.value)
            .order_by(desc(tier_runs.c.attempt))
            .limit(1)
        )
        with self.store._engine.connect() as conn:
            newest = conn.execute(query).first()
        if newest is None:
            return None
        return L3Metrics(head_sha, TierRuns(self.store).regressions(int(newest.id)))

    def record_signoff(self, fork: str, pr_number: int, *, login: str, head_sha: str, at: datetime) -> bool:
        """`login` signs off L3's metrics on `head_sha`; False when they already had (the first one stays)."""
        row = {"fork": fork, "pr_number": pr_number, "login": login, "head_sha": head_sha, "at": _utc(at)}
        keys = ["fork", "pr_number", "login", "head_sha"]
        with self.store._engine.begin() as conn:
            dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
            added = dialect_insert(l3_signoffs).values(row).on_conflict_do_nothing(index_elements=keys)
            return conn.execute(added.returning(l3_signoffs.c.login)).first() is not None

    def signoffs(self, fork: str, pr_number: int) -> list[Signoff]:
        query = select(l3_signoffs).where(l3_signoffs.c.fork == fork, l3_signoffs.c.pr_number == pr_number)
        with self.store._engine.connect() as conn:
            rows = conn.execute(query.order_by(l3_signoffs.c.at, l3_signoffs.c.login)).all()
        return [Signoff(r.login, r.head_sha, r.at) for r in rows]
