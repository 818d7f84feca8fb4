"""The bisections table and the probes' tier runs, on SQLite and PostgreSQL (`store` is parametrised)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import select

from bot.app.status import BisectGauges
from bot.core import bisect
from bot.core.audit import AuditBisection, AuditRecord, render, with_bisection
from bot.core.bisect_pr import BisectionRecord, Blame, ProbeRun, Status
from bot.core.tiers import Level, RunState, TierRun, Verdict, latest_runs, stale_runs
from bot.db.bisections import Bisections, bisections
from bot.db.gates import GateStore
from bot.db.store import Store
from bot.db.tier_runs import TierRuns

FORK = "meta/triton"
AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
COMMITS = [f"{i:x}" * 40 for i in range(1, 5)]
FORKED = [f"{i:x}" * 40 for i in range(6, 10)]
HEAD, BASE = FORKED[-1], "f" * 40


def record(pull: int = 7, *, head: str = HEAD) -> BisectionRecord:
    state = bisect.start("bundle-1111111111", COMMITS, tier="l1", budget=bisect.Budget(max_runs=5))
    return BisectionRecord(
        fork=FORK,
        pull=pull,
        ingestion="bundle-1111111111",
        level=Level.L1,
        head_sha=head,
        base_sha=BASE,
        fork_commits=tuple(FORKED),
        state=state,
        reason="unit::test_a failed: AssertionError",
    )


def test_one_bisection_runs_per_pr_and_a_finished_one_frees_it(store: Store) -> None:
    records = Bisections(store)
    first = records.start(record(), at=AT)
    assert first is not None and first.id is not None and first.version == 1
    assert records.start(record(), at=AT) is None  # one runs already on #7
    assert records.start(record(8), at=AT) is not None  # another PR's is its own
    assert records.running(FORK, 7) == first and records.get(first.id) == first

    state, probes = bisect.next_probes(first.state, free=2)
    moved = first.model_copy(update={"state": state}).with_probe(ProbeRun(probe=probes[0].id, branch="b"))
    saved = records.save(moved, at=AT + timedelta(minutes=1))
    assert saved is not None and saved.version == 2 and records.get(first.id) == saved
    assert records.save(moved, at=AT) is None  # written from an older read: refused, nothing changed
    assert records.get(first.id) == saved

    done = records.save(saved.model_copy(update={"status": Status.EXHAUSTED}), at=AT)
    assert done is not None and records.running(FORK, 7) is None
    again = records.start(record(), at=AT)
    assert again is not None and [r.id for r in records.for_pull(FORK, 7)] == [first.id, again.id]


def test_culprits_are_kept_once_per_commit_with_the_newest_failure(store: Store) -> None:
    records = Bisections(store)
    records.blame(FORK, COMMITS[1], level=Level.L1, pull=7, bisection=1, detail="L1 failed: a", at=AT)
    records.blame(FORK, COMMITS[1], level=Level.L2, pull=9, bisection=2, detail="L2 failed: b", at=AT)
    records.blame("other/fork", COMMITS[2], level=Level.L1, pull=1, bisection=3, detail="x", at=AT)
    assert records.blamed(FORK) == {COMMITS[1]: "L2 failed: b"}


def test_a_culprit_blamed_again_keeps_when_it_was_first_blamed(store: Store) -> None:
    """`sluice calibrate --database` knows a culprit from its first blame: a later bisection that blames it
    again brings its newest failure, not a later date."""
    records = Bisections(store)
    later = AT + timedelta(days=3)
    records.blame(FORK, COMMITS[1], level=Level.L1, pull=7, bisection=1, detail="L1 failed: a", at=AT)
    records.blame(FORK, COMMITS[1], level=Level.L2, pull=9, bisection=2, detail="L2 failed: b", at=later)
    records.blame(FORK, COMMITS[2], level=Level.L1, pull=9, bisection=2, detail="L1 failed: c", at=later)
    assert records.blames(FORK) == {
        COMMITS[1]: Blame(Level.L2, 9, "L2 failed: b", int(AT.timestamp())),
        COMMITS[2]: Blame(Level.L1, 9, "L1 failed: c", int(later.timestamp())),
    }


def test_stats_count_bisections_runs_and_running_per_fork_and_tier(store: Store) -> None:
    records = Bisections(store)
    first = records.start(record(), at=AT)
    assert first is not None
    spent = first.state.model_copy(update={"runs": 3})
    records.save(first.model_copy(update={"state": spent, "status": Status.DONE}), at=AT)
    records.start(record(8), at=AT)
    (stats,) = records.stats()
    assert (stats.fork, stats.level, stats.bisections, stats.runs, stats.running) == (FORK, Level.L1, 2, 3, 1)


def test_a_probe_on_a_head_the_pr_ran_on_is_its_own_run_and_never_stale(store: Store) -> None:
    runs = TierRuns(store)
    own = TierRun(FORK, 7, "bundle-1", Level.L1, HEAD, 1, RunState.COMPLETED, AT, verdict=Verdict.FAILED)
    assert runs.add(own) is not None
    probe = dataclasses.replace(own, state=RunState.DISPATCHED, verdict=None, bisection=3, probe=2)
    added = runs.add(probe)  # the same head and attempt: a confirmation re-run of the whole PR
    assert added is not None and runs.add(probe) is None  # but each probe's attempt only once
    back = runs.get(added.id or 0)
    assert back is not None and (back.bisection, back.probe) == (3, 2)
    assert runs.get(1) is not None and runs.get(1).bisection is None  # type: ignore[union-attr]
    listed = runs.for_pull(FORK, 7)
    assert latest_runs(HEAD, listed)[Level.L1].bisection is None  # the PR's tiers see their own run only
    assert stale_runs("e" * 40, listed) == []  # a moved head does not discard a probe


def test_a_refreshed_audit_record_keeps_its_bisections(store: Store) -> None:
    gates = GateStore(store)
    base = AuditRecord(
        fork=FORK,
        ingestion_id="bundle-1",
        kind="bundle",
        pr_number=7,
        head=HEAD,
        upstream_base=None,
        upstream_target=COMMITS[-1],
    )
    entry = AuditBisection(id=3, tier="L1", head_sha=HEAD, status="done", runs=6, culprits=(COMMITS[1],))
    gates.save_audit(with_bisection(base, entry), at=AT)
    gates.save_audit(base.model_copy(update={"head": FORKED[0]}), at=AT)  # the ingestion re-picked it
    kept = gates.audit(FORK, 7)
    assert kept is not None and kept.head == FORKED[0] and kept.bisections == (entry,)
    assert "bisection 3: L1 on" in render(7, kept) and "culprits " + COMMITS[1][:10] in render(7, kept)
    assert "regression of" not in render(7, kept)
    perf = AuditBisection(
        id=4, tier="L3", head_sha=HEAD, status="done", runs=5, regressions=("matmul[64:fp16] · median",)
    )
    gates.save_audit(with_bisection(kept, perf), at=AT)
    stored = gates.audit(FORK, 7)
    assert stored is not None and stored.bisections == (entry, perf)  # what it bisected is kept
    assert "bisection 4: L3 on" in render(7, stored) and "regression of matmul[64:fp16] · median" in render(
        7, stored
    )


def test_the_bisection_gauges_show_each_fork_and_tier(store: Store) -> None:
    records = Bisections(store)
    first = records.start(record(), at=AT)
    assert first is not None
    spent = first.state.model_copy(update={"runs": 4})
    records.save(first.model_copy(update={"state": spent}), at=AT)
    registry = CollectorRegistry()
    BisectGauges(registry).update(records.stats())
    shown = generate_latest(registry).decode()
    assert 'sluice_bisection_runs{fork="meta/triton",tier="L1"} 4.0' in shown
    assert 'sluice_bisections_running{fork="meta/triton",tier="L1"} 1.0' in shown
    gauges = BisectGauges(registry := CollectorRegistry())
    gauges.update(records.stats())
    gauges.update([])  # the fork was removed: its series go
    assert "sluice_bisections{" not in generate_latest(registry).decode()


def test_an_ingestion_id_as_long_as_a_branch_name_round_trips(store: Store) -> None:
    long_id = "bundle-" + "x" * 248  # 255 characters: tier_runs.ingestion's length (0012), bisections' (0017)
    records = Bisections(store)
    started = records.start(record().model_copy(update={"ingestion": long_id}), at=AT)
    assert started is not None and started.id is not None
    (found,) = records.for_pull(FORK, 7)
    got = records.get(started.id)
    assert got is not None and got.ingestion == found.ingestion == long_id
    with store._engine.connect() as conn:  # the column itself, not only the record's JSON, holds it whole
        column = conn.execute(select(bisections.c.ingestion).where(bisections.c.id == started.id)).scalar()
    assert column == long_id
