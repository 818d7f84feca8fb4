"""Tier runs in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from bot.core.errors import BadInput
from bot.core.ingestion import IngestionRecord
from bot.core.l3_metrics import Regression
from bot.core.tiers import TRUNK_PULL, Level, RunState, TierRun, Verdict
from bot.core.trunk_watch import WATCH
from bot.db.registry import Registry
from bot.db.store import Store
from bot.db.tier_runs import TierRuns

BRANCH_NAME_MAX = 255  # GitHub's limit on a branch name, in bytes

FORK = "meta/triton"
AT = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
HEAD = "a" * 40


def attempt(ingestion: str = "bundle-0123456789", *, pull: int = 7, attempt: int = 1) -> TierRun:
    return TierRun(FORK, pull, ingestion, Level.L1, HEAD, attempt, RunState.DISPATCHED, AT)


def completed(runs: TierRuns, run: TierRun, verdict: Verdict, *, detail: str, at: dt.datetime) -> None:
    """Record `run` and its ending with `verdict` at `at`."""
    added = runs.add(run)
    assert added is not None
    done = dataclasses.replace(
        added, state=RunState.COMPLETED, verdict=verdict, detail=detail, completed_at=at
    )
    assert runs.finish(done)


def test_an_ingestion_id_as_long_as_a_branch_name_is_kept(store: Store) -> None:
    """A fork PR from the fork's own `sluice/ingest/<name>` branch takes `<name>` as its id: a person's
    branch name, up to GitHub's 255 bytes, not one of Sluice's short ids."""
    runs = TierRuns(store)
    long_id = "x" * BRANCH_NAME_MAX
    added = runs.add(attempt(long_id))
    assert added is not None and added.id is not None
    got = runs.get(added.id)
    assert got is not None and got.ingestion == long_id


def test_an_ingestion_id_longer_than_the_column_is_refused_and_nothing_is_written(store: Store) -> None:
    runs = TierRuns(store)
    with pytest.raises(BadInput, match="256 characters long, over 255"):
        runs.add(attempt("x" * (BRANCH_NAME_MAX + 1)))
    assert runs.for_pull(FORK, 7) == []


def test_a_run_whose_dispatch_failed_is_claimed_again_by_one_worker(store: Store) -> None:
    runs = TierRuns(store)
    added = runs.add(attempt())
    assert added is not None and added.id is not None
    runs.mark_undispatched(added.id, detail="the dispatch failed (GitHubDown: 503)")
    marked = runs.get(added.id)
    assert marked is not None and marked.state is RunState.UNDISPATCHED and "503" in marked.detail
    later = AT + dt.timedelta(minutes=3)
    claimed = runs.claim_undispatched(added.id, at=later)
    assert claimed is not None and claimed.state is RunState.DISPATCHED and claimed.dispatched_at == later
    assert runs.claim_undispatched(added.id, at=later) is None  # a second worker gets nothing to dispatch
    runs.save(dataclasses.replace(claimed, state=RunState.COMPLETED))
    runs.mark_undispatched(added.id, detail="late")  # only a waiting run is marked
    final = runs.get(added.id)
    assert final is not None and final.state is RunState.COMPLETED


def test_waiting_runs_of_every_fork_and_pr_are_listed_for_the_sweep(store: Store) -> None:
    runs = TierRuns(store)
    first, second, done = (runs.add(attempt(pull=n)) for n in (7, 8, 9))
    assert first is not None and second is not None and done is not None
    assert first.id is not None and second.id is not None
    runs.save(dataclasses.replace(done, state=RunState.COMPLETED))
    runs.mark_undispatched(second.id, detail="the dispatch failed")
    assert [(r.pull, r.state) for r in runs.waiting()] == [
        (7, RunState.DISPATCHED),
        (8, RunState.UNDISPATCHED),
    ]


def test_a_run_ends_once_and_the_first_ending_stands(store: Store) -> None:
    """A result and the time-out sweep can race for one run: whichever is recorded first stands."""
    runs = TierRuns(store)
    added = runs.add(attempt())
    assert added is not None and added.id is not None
    result = dataclasses.replace(added, state=RunState.COMPLETED, detail="passed", completed_at=AT)
    late = dataclasses.replace(added, state=RunState.TIMED_OUT, detail="no result within 60 minutes")
    assert runs.finish(result) is True
    assert runs.finish(late) is False  # the sweep read the run while it still waited
    assert runs.finish(result) is False  # nor does the same result end it twice
    final = runs.get(added.id)
    assert final is not None and (final.state, final.detail) == (RunState.COMPLETED, "passed")
    undispatched = runs.add(attempt(pull=8))
    assert undispatched is not None and undispatched.id is not None
    runs.mark_undispatched(undispatched.id, detail="the dispatch failed")
    assert runs.finish(dataclasses.replace(undispatched, state=RunState.TIMED_OUT)) is True


def test_an_l3_runs_regressions_are_kept_with_its_ending_and_only_with_the_ending_that_stands(
    store: Store,
) -> None:
    """The regressions go in with the ending, in one transaction: a completed run never lacks them, and a
    result that loses the race to the time-out sweep leaves none behind on the timed-out run."""
    runs = TierRuns(store)
    matmul = Regression("matmul[4096x4096:float16]", "matmul", "median", True, 1.09, 0.02)
    added = runs.add(dataclasses.replace(attempt(), level=Level.L3))
    assert added is not None and added.id is not None
    completed = dataclasses.replace(added, state=RunState.COMPLETED, detail="regressed", completed_at=AT)
    assert runs.finish(completed, (matmul,)) is True
    assert runs.regressions(added.id) == (matmul,)
    assert runs.finish(completed, ()) is False  # a second delivery of the result changes nothing
    assert runs.regressions(added.id) == (matmul,)
    raced = runs.add(dataclasses.replace(attempt(pull=8), level=Level.L3))
    assert raced is not None and raced.id is not None
    assert runs.finish(dataclasses.replace(raced, state=RunState.TIMED_OUT, detail="no result")) is True
    late = dataclasses.replace(raced, state=RunState.COMPLETED, detail="regressed", completed_at=AT)
    assert runs.finish(late, (matmul,)) is False
    assert runs.regressions(raced.id) == ()
    final = runs.get(raced.id)
    assert final is not None and final.state is RunState.TIMED_OUT


def test_a_one_commit_ingestion_whose_own_tier_failed_blames_its_one_commit(store: Store) -> None:
    """What `sluice calibrate --database` counts besides bisections: a PR that carried one upstream commit
    failed a tier on the head Sluice pushed. Not the machine's failures, nor trunk's, nor a failure on a
    head a person pushed, nor a PR of several commits (a bisection blames there), nor a probe's."""
    registry, runs = Registry(store), TierRuns(store)
    ups = {name: ch * 40 for name, ch in (("alone", "1"), ("infra", "2"), ("trunk", "3"), ("person", "4"))}
    ups |= {"bundle": "5" * 40, "probe": "6" * 40}
    for n, (name, sha) in enumerate(ups.items(), 1):
        commits = 2 if name == "bundle" else 1
        record = IngestionRecord(
            FORK, f"chain-{name}", "chain", "open", 10 + n, HEAD, sha, sha, commits, None
        )
        registry.save_ingestion(record, at=AT)

    def ended(
        name: str, verdict: Verdict, *, minutes: int, head: str = HEAD, probe: int | None = None
    ) -> None:
        pull = 10 + list(ups).index(name) + 1
        run = TierRun(FORK, pull, f"chain-{name}", Level.L2, head, minutes, RunState.DISPATCHED, AT)
        run = dataclasses.replace(run, bisection=probe, probe=probe)
        completed(runs, run, verdict, detail=f"{name} failed", at=AT + dt.timedelta(minutes=minutes))

    ended("alone", Verdict.PASSED, minutes=1)
    ended("alone", Verdict.FAILED, minutes=2)
    ended("alone", Verdict.FAILED, minutes=3)  # the first failure is when it was known
    ended("infra", Verdict.INFRA, minutes=2)
    ended("trunk", Verdict.BROKEN_TRUNK, minutes=2)
    ended("person", Verdict.FAILED, minutes=2, head="b" * 40)  # a head Sluice did not push
    ended("bundle", Verdict.FAILED, minutes=2)
    ended("probe", Verdict.FAILED, minutes=2, probe=1)  # a bisection's probe
    blamed = runs.failed_alone(FORK)
    assert set(blamed) == {ups["alone"]}
    blame = blamed[ups["alone"]]
    assert (blame.level, blame.pull, blame.time) == (
        Level.L2,
        11,
        int((AT + dt.timedelta(minutes=2)).timestamp()),
    )
    assert blame.detail == "L2 failed on #11, its one upstream commit: alone failed"
    assert runs.failed_alone("other/fork") == {}


def test_a_failure_on_an_earlier_head_sluice_pushed_still_blames_by_the_commits_that_head_carried(
    store: Store,
) -> None:
    """A rebuild moves the ingestion's head on; a tier that failed on an earlier Sluice head still blames,
    counted by what that head carried: one commit then blames it, several then do not (a bisection blames
    there), whatever the PR carries now."""
    registry, runs = Registry(store), TierRuns(store)
    first, grown, shrunk = "1" * 40, "2" * 40, "3" * 40
    heads = {
        name: (ch * 40, ch.upper() * 40) for name, ch in (("rebuilt", "a"), ("grown", "b"), ("shrunk", "c"))
    }
    carried = {"rebuilt": (first, 1, 1), "grown": (grown, 1, 3), "shrunk": (shrunk, 3, 1)}
    for n, (name, (sha, before, after)) in enumerate(carried.items(), 1):
        old, new = heads[name]
        for head, commits, minutes in ((old, before, 0), (new, after, 10)):
            record = IngestionRecord(FORK, f"chain-{name}", "chain", "open", n, head, sha, sha, commits, None)
            registry.save_ingestion(record, at=AT + dt.timedelta(minutes=minutes))
        closed = IngestionRecord(FORK, f"chain-{name}", "chain", "closed", n, new, sha, sha, after, None)
        registry.save_ingestion(closed, at=AT + dt.timedelta(minutes=20))  # the same head saved again
        for head, verdict, minutes in ((old, Verdict.FAILED, 5), (new, Verdict.PASSED, 15)):
            run = TierRun(FORK, n, f"chain-{name}", Level.L1, head, 1, RunState.DISPATCHED, AT)
            completed(
                runs, run, verdict, detail=f"{name}: {verdict.value}", at=AT + dt.timedelta(minutes=minutes)
            )
    blamed = runs.failed_alone(FORK)
    assert set(blamed) == {first, grown}  # not `shrunk`: its failed head carried three commits
    assert blamed[first].time == int((AT + dt.timedelta(minutes=5)).timestamp())
    assert blamed[first].detail == "L1 failed on #1, its one upstream commit: rebuilt: failed"


def test_the_baseline_on_a_commit_is_never_a_report_from_a_machine_that_failed(store: Store) -> None:
    """Trunk's run on the PR's base passed once, then its next run's machine failed (INFRA, its numbers kept):
    the baseline is the run that passed; with only the failed one there, trunk watch's newest good run."""
    runs, base, before = TierRuns(store), "b" * 40, "c" * 40

    def trunk(head: str, run: int, verdict: Verdict, report: str) -> None:
        added = runs.add(TierRun(FORK, TRUNK_PULL, WATCH, Level.L3, head, run, RunState.DISPATCHED, AT))
        assert added is not None
        done = dataclasses.replace(added, state=RunState.COMPLETED, verdict=verdict, report=report)
        assert runs.finish(dataclasses.replace(done, detail=verdict.value, completed_at=AT))

    trunk(before, 1, Verdict.PASSED, '{"on": "the commit before"}')
    trunk(base, 1, Verdict.INFRA, '{"on": "a throttled GPU"}')
    found = runs.baseline(FORK, Level.L3, head_sha=base)
    assert found is not None and found.report == '{"on": "the commit before"}'
    assert runs.latest_report(FORK, Level.L3, head_sha=base) is None
    trunk(base, 2, Verdict.PASSED, '{"on": "the base"}')
    trunk(base, 3, Verdict.INFRA, '{"on": "a throttled GPU, again"}')
    found = runs.baseline(FORK, Level.L3, head_sha=base)
    assert found is not None and found.report == '{"on": "the base"}'
    assert runs.latest_report(FORK, Level.L3, head_sha=base) == '{"on": "the base"}'
