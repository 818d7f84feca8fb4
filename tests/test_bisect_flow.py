"""The bisection flow over its ports: GitHub and git faked (a PR, a backend that records dispatches,
candidates that are the PR's commits or picked ones), the store real (SQLite and PostgreSQL). An oracle
plays the tier: a prefix fails when it holds the culprit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.core.audit import AuditRecord
from bot.core.bisect import Probe
from bot.core.bisect_pr import COMMENT_MARKER, BisectionRecord, Status, literal_head
from bot.core.config import BisectConfig, PerformanceConfig, SluiceConfig, Strategy
from bot.core.errors import BadInput
from bot.core.l3_metrics import Regression
from bot.core.tiers import Level, RunState, Subject, TierRun, Verdict
from bot.core.trunk_watch import WATCH
from bot.core.webhooks import CheckRun, Pull
from bot.db.bisections import Bisections
from bot.db.gates import GateStore
from bot.db.store import Store
from bot.db.tier_runs import TierRuns
from bot.flows import bisection, tiers
from bot.flows.bisection import Bisecting
from bot.flows.tiers import Tiering
from tests.test_runners_compare import benchmark, even, report

FORK = "meta/triton"
AT = datetime(2026, 11, 2, tzinfo=UTC)
UPSTREAM = [f"{i:040x}" for i in range(1, 17)]
FORKED = [f"{i + 100:040x}" for i in range(1, 17)]
HEAD, BASE = FORKED[-1], "b" * 40
BOT = "sluice[bot]"


class Forge:
    """The PR as GitHub shows it, the sticky comments, the deleted branches."""

    repo = FORK

    def __init__(
        self,
        *,
        ref: str = "sluice/ingest/bundle-1",
        base: str = "main",
        author: str = BOT,
        head_repo: str = FORK,
    ) -> None:
        self.pulls = {
            7: {
                "number": 7,
                "state": "open",
                "user": {"login": author},
                "head": {"ref": ref, "sha": HEAD, "repo": {"full_name": head_repo}},
                "base": {"ref": base, "sha": BASE},
            }
        }
        self.comments: dict[int, str] = {}
        self.deleted: list[str] = []
        self.checks: dict[str, dict[str, dict[str, Any]]] = {}  # sha -> check run name -> the run

    async def check_runs(self, sha: str) -> dict[str, CheckRun]:
        found = self.checks.get(sha, {})
        return {
            name: CheckRun.model_validate({"id": 1, "name": name, "head_sha": sha, **run})
            for name, run in found.items()
        }

    async def get_pull(self, number: int) -> Pull:
        return Pull.model_validate(self.pulls[number])

    async def upsert_comment(self, number: int, *, marker: str, body: str) -> int:
        assert body.startswith(marker)
        self.comments[number] = body
        return 1

    async def delete_branch(self, branch: str) -> None:
        self.deleted.append(branch)


class Backend:
    def __init__(self) -> None:
        self.started: list[tuple[Subject, TierRun]] = []

    async def start(self, subject: Subject, run: TierRun, *, workflow: str) -> int | None:
        self.started.append((subject, run))
        return None


class Candidates:
    """The PR's commits; a prefix after a culprit is out is 'picked' (a new SHA) unless it conflicts."""

    def __init__(self, *, conflicts: Callable[[Probe], bool] = lambda probe: False) -> None:
        self.pushed: dict[str, str] = {}
        self.conflicts = conflicts

    async def commits(self, pull: int, *, base: str, head: str) -> tuple[str, list[tuple[str, str]]]:
        return BASE, list(zip(FORKED, UPSTREAM, strict=True))

    async def build(self, record: BisectionRecord, probe: Probe, branch: str) -> str | None:
        head = literal_head(record, probe)
        if head is None:
            if self.conflicts(probe):
                return None
            head = f"{0xC0 + probe.id:040x}"
        self.pushed[branch] = head
        return head


async def run_db(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return call(*args, **kwargs)


@dataclasses.dataclass
class Bench:
    b: Bisecting
    forge: Forge
    backend: Backend
    candidates: Candidates
    rebuilt: list[str]
    store: Store
    now: list[datetime]

    @property
    def runs(self) -> TierRuns:
        return TierRuns(self.store)

    def waiting(self) -> list[TierRun]:
        return [
            r
            for r in self.runs.for_pull(FORK, 7)
            if r.bisection is not None and r.state is RunState.DISPATCHED
        ]

    async def answer(self, run: TierRun, verdict: Verdict, detail: str = "") -> None:
        done = dataclasses.replace(
            run, state=RunState.COMPLETED, verdict=verdict, detail=detail, completed_at=AT
        )
        self.runs.save(done)
        await bisection.probe_finished(self.b, done)

    async def oracle(self, *culprits: str, limit: int = 30) -> None:
        """Answer every waiting probe as the tier would (it fails where a culprit is in), until none waits."""
        for _ in range(limit):
            waiting = self.waiting()
            if not waiting:
                return
            for run in waiting:
                record = Bisections(self.store).get(run.bisection or 0)
                assert record is not None
                probe = next((p for p in record.state.in_flight if p.id == run.probe), None)
                fails = probe is not None and any(culprit in probe.commits for culprit in culprits)
                await self.answer(
                    run, Verdict.FAILED if fails else Verdict.PASSED, "AssertionError: not close"
                )
        raise AssertionError("the bisection did not end")


def bench(
    store: Store,
    *,
    bisect: BisectConfig | None = None,
    performance: PerformanceConfig | None = None,
    forge: Forge | None = None,
    candidates: Candidates | None = None,
    failed: bool = True,
    strategy: Strategy = Strategy.CHERRY_PICK,
) -> Bench:
    forge, backend, candidates = forge or Forge(), Backend(), candidates or Candidates()
    config = SluiceConfig(
        bisect=bisect or BisectConfig(), performance=performance or PerformanceConfig(), strategy=strategy
    )
    now = [AT]
    t = Tiering(forge, TierRuns(store), run_db, backend, config, lambda: now[0])  # type: ignore[arg-type]
    rebuilt: list[str] = []

    async def depends_on(ingestion: str) -> Mapping[str, Sequence[str]]:
        return {UPSTREAM[11]: [UPSTREAM[10]]}  # commit 12 needs the culprit 11: it leaves with it

    async def rebuild(why: str) -> None:
        rebuilt.append(why)

    gates = GateStore(store)
    b = Bisecting(t, Bisections(store), forge, candidates, depends_on, rebuild, BOT, audits=gates)  # type: ignore[arg-type]
    gates.save_audit(
        AuditRecord(
            fork=FORK,
            ingestion_id="bundle-1",
            kind="bundle",
            pr_number=7,
            head=HEAD,
            upstream_base=None,
            upstream_target=UPSTREAM[-1],
        ),
        at=AT,
    )
    if failed:
        own = TierRun(
            FORK,
            7,
            "bundle-1",
            Level.L1,
            HEAD,
            1,
            RunState.COMPLETED,
            AT,
            verdict=Verdict.FAILED,
            detail="unit::test_x: AssertionError: not close",
        )
        TierRuns(store).add(own)
    return Bench(b, forge, backend, candidates, rebuilt, store, now)


async def test_a_culprit_is_found_confirmed_and_taken_out_with_its_dependent(store: Store) -> None:
    s = bench(store)
    started = await bisection.start(s.b, 7)
    assert started.level is Level.L1 and "AssertionError" in started.reason
    await s.oracle(UPSTREAM[10])
    (done,) = Bisections(store).for_pull(FORK, 7)
    assert done.status is Status.DONE
    assert [(c.shas, c.dependents, c.confirmed) for c in done.state.culprits] == [
        ((UPSTREAM[10],), (UPSTREAM[11],), True)
    ]
    assert done.state.runs <= 6 and len(s.backend.started) == done.state.runs  # log2(16) + confirm + rest
    detail = "L1 failed on #7 (bundle-1): unit::test_x: AssertionError: not close"
    assert Bisections(store).blamed(FORK) == {UPSTREAM[10]: detail}
    assert len(s.rebuilt) == 1
    assert sorted(s.forge.deleted) == sorted(s.candidates.pushed)  # every candidate branch deleted
    assert "done, 1 culprit" in s.forge.comments[7]
    (entry,) = GateStore(store).audit(FORK, 7).bisections  # type: ignore[union-attr]
    assert (entry.tier, entry.status, entry.runs, entry.culprits) == (
        "L1",
        "done",
        done.state.runs,
        (UPSTREAM[10],),
    )
    assert all(subject.baseline_sha == BASE and subject.pull == 7 for subject, _ in s.backend.started)
    assert all(run.bisection == done.id and run.probe for _, run in s.backend.started)


async def test_a_merge_forks_bisection_stops_at_its_first_culprit(store: Store) -> None:
    s = bench(store, strategy=Strategy.MERGE)
    await bisection.start(s.b, 7)
    await s.oracle(UPSTREAM[10])
    (done,) = Bisections(store).for_pull(FORK, 7)
    assert done.status is Status.DONE and [c.shas for c in done.state.culprits] == [(UPSTREAM[10],)]
    assert done.state.untried == tuple(UPSTREAM[12:])  # 12 leaves with the culprit it depends on
    assert "Not tried: the 4 commits after the culprit" in s.forge.comments[7]


@pytest.mark.parametrize("below", [None, "failure", "success"])
async def test_a_pr_stacked_on_another_is_bisected_only_once_the_pr_below_passed_the_tier(
    store: Store, below: str | None
) -> None:
    """Its base is another ingestion PR's head: a culprit there fails this PR too, and bisecting this PR's own
    commits (taking its base as good) would blame one of them."""
    forge = Forge(base="sluice/ingest/bundle-0")
    if below is not None:
        forge.checks[BASE] = {"sluice/L1": {"status": "completed", "conclusion": below}}
    s = bench(store, forge=forge)
    (own,) = s.runs.for_pull(FORK, 7)
    started = await bisection.tier_failed(s.b, own)
    assert (started is not None) is (below == "success")
    assert len(Bisections(store).for_pull(FORK, 7)) == (1 if below == "success" else 0)
    assert bool(s.backend.started) is (below == "success")


async def test_free_runners_get_several_probes_at_once(store: Store) -> None:
    s = bench(store, bisect=BisectConfig(parallel=3))
    await bisection.start(s.b, 7)
    assert len(s.waiting()) == 3  # three split points of the 16 at once
    await s.oracle(UPSTREAM[3])
    (done,) = Bisections(store).for_pull(FORK, 7)
    assert done.status is Status.DONE and done.state.culprits[0].shas == (UPSTREAM[3],)


async def test_an_infrastructure_failure_of_a_probe_is_retried_and_its_late_first_result_ignored(
    store: Store,
) -> None:
    s = bench(store)
    await bisection.start(s.b, 7)
    (first,) = s.waiting()
    await s.answer(first, Verdict.INFRA, "GPU busy: device is busy")
    (again,) = s.waiting()
    assert (again.probe, again.attempt, again.head_sha) == (first.probe, 2, first.head_sha)
    record = Bisections(store).get(first.bisection or 0)
    assert record is not None and record.state.runs == 0  # the lost run is not a result
    assert record.state.retried == 1  # but the budget paid for it: its runner time is spent all the same
    assert (
        "16 commits in upstream order; 1 of 12 tier runs used (1 of them again after an infrastructure"
        in (s.forge.comments[7])
    )
    assert (
        "| 1 | first 8, up to `0000000000` | 000000000000 | running (attempt 2): retried: GPU busy"
        in (s.forge.comments[7])
    )
    await bisection.probe_finished(
        s.b, dataclasses.replace(first, verdict=Verdict.PASSED)
    )  # a late duplicate
    assert Bisections(store).get(first.bisection or 0) == record


async def test_a_probe_is_tried_again_only_while_the_budget_has_a_run_for_it(store: Store) -> None:
    s = bench(store, bisect=BisectConfig(max_runs=2))
    await bisection.start(s.b, 7)
    (first,) = s.waiting()
    await s.answer(first, Verdict.INFRA, "GPU busy: device is busy")
    (again,) = s.waiting()  # the second of the two runs
    await s.answer(again, Verdict.INFRA, "GPU busy: device is busy")
    assert s.waiting() == [] and len(s.backend.started) == 2  # no third run past max_runs
    (record,) = Bisections(store).for_pull(FORK, 7)
    assert (record.state.runs, record.state.retried) == (1, 1)  # the second attempt ended as a skip
    assert "the budget has no run left to try it again (GPU busy" in s.forge.comments[7]
    assert "2 of 2 tier runs used" in s.forge.comments[7]


async def test_a_build_failure_is_a_skip_and_that_prefix_is_not_asked_again(store: Store) -> None:
    s = bench(store)
    await bisection.start(s.b, 7)
    (first,) = s.waiting()
    await s.answer(first, Verdict.FAILED, "lib/Pass.cpp:3: error: use of undeclared identifier")
    record = Bisections(store).get(first.bisection or 0)
    assert record is not None and record.state.skipped == (8,) and record.probes[0].outcome.value == "skip"
    await s.oracle(UPSTREAM[10])
    done = Bisections(store).get(first.bisection or 0)
    assert done is not None and done.status is Status.DONE and done.state.culprits[0].shas == (UPSTREAM[10],)


async def test_a_prefix_that_does_not_pick_is_skipped_without_a_run(store: Store) -> None:
    s = bench(store, candidates=Candidates(conflicts=lambda probe: True))
    await bisection.start(s.b, 7)
    await s.oracle(UPSTREAM[10])
    (done,) = Bisections(store).for_pull(FORK, 7)
    # the remainder after the culprit cannot be rebuilt: it is skipped, and the search ends without it
    skipped = [p for p in done.probes if p.head is None]
    assert skipped and all(p.outcome is not None and p.outcome.value == "skip" for p in skipped)
    assert len(s.backend.started) == len([p for p in done.probes if p.head is not None])
    # … once, not again and again until the budget is spent: the culprit stands, the PR is rebuilt
    assert len(skipped) == 1 and done.status is Status.DONE
    assert list(Bisections(store).blamed(FORK)) == [UPSTREAM[10]] and len(s.rebuilt) == 1


async def test_a_culprit_confirmed_before_the_budget_ran_out_is_blamed_all_the_same(store: Store) -> None:
    """Two culprits; the budget runs out looking for the second. The first, confirmed, is blamed and the PR
    rebuilt without it; the comment leaves the rest to a person."""
    s = bench(store, bisect=BisectConfig(max_runs=7))
    await bisection.start(s.b, 7)
    await s.oracle(UPSTREAM[5], UPSTREAM[13])
    (done,) = Bisections(store).for_pull(FORK, 7)
    assert done.status is Status.EXHAUSTED and done.state.runs == 7
    assert [c.shas for c in done.state.culprits] == [(UPSTREAM[5],)]
    assert list(Bisections(store).blamed(FORK)) == [UPSTREAM[5]] and len(s.rebuilt) == 1
    assert "The budget is spent" in s.forge.comments[7]


async def test_a_spent_budget_stops_and_leaves_it_to_a_person(store: Store) -> None:
    s = bench(store, bisect=BisectConfig(max_runs=2))
    await bisection.start(s.b, 7)
    await s.oracle(UPSTREAM[10])
    (done,) = Bisections(store).for_pull(FORK, 7)
    assert done.status is Status.EXHAUSTED and done.state.runs == 2
    assert Bisections(store).blamed(FORK) == {} and s.rebuilt == []
    assert "The budget is spent" in s.forge.comments[7] and COMMENT_MARKER in s.forge.comments[7]


async def test_a_result_after_the_prs_head_moved_supersedes_the_bisection(store: Store) -> None:
    s = bench(store)
    await bisection.start(s.b, 7)
    (first,) = s.waiting()
    s.forge.pulls[7]["head"]["sha"] = "e" * 40
    await s.answer(first, Verdict.FAILED, "AssertionError")
    (done,) = Bisections(store).for_pull(FORK, 7)
    assert done.status is Status.SUPERSEDED and done.state.runs == 0 and s.rebuilt == []
    assert s.forge.deleted == [first_branch for first_branch in s.candidates.pushed]


@pytest.mark.parametrize(
    ("forge", "failed", "level", "why"),
    [
        (Forge(ref="feature"), True, None, "is not an open ingestion PR"),
        (Forge(ref="sluice/emergency/abc1234567"), True, None, "is not an open ingestion PR"),
        (Forge(), False, None, "no tier failed on #7's head"),
        (Forge(author="dev"), True, None, "is not an open ingestion PR"),  # a person's, named like Sluice's
        (Forge(head_repo="mallory/triton"), True, None, "is not an open ingestion PR"),  # another fork's
    ],
)
async def test_start_refuses(store: Store, forge: Forge, failed: bool, level: Level | None, why: str) -> None:
    s = bench(store, forge=forge, failed=failed)
    with pytest.raises(BadInput, match=why):
        await bisection.start(s.b, 7, level=level)
    assert Bisections(store).for_pull(FORK, 7) == [] and s.backend.started == []


@pytest.mark.parametrize(
    "forge",
    [
        Forge(author="dev"),  # a branch in the fork named like Sluice's, opened by a person
        Forge(head_repo="mallory/triton"),  # another fork's `sluice/ingest/…` branch
        Forge(author="other-app[bot]"),  # another App's
    ],
)
async def test_a_failure_of_a_pr_sluice_did_not_open_is_never_bisected(store: Store, forge: Forge) -> None:
    s = bench(store, forge=forge)
    (own,) = s.runs.for_pull(FORK, 7)
    assert await bisection.tier_failed(s.b, own) is None
    assert Bisections(store).for_pull(FORK, 7) == [] and s.backend.started == [] and s.candidates.pushed == {}


async def test_one_runs_per_head_and_a_new_head_supersedes_the_old(store: Store) -> None:
    s = bench(store)
    first = await bisection.start(s.b, 7)
    with pytest.raises(BadInput, match="already runs"):
        await bisection.start(s.b, 7, level=Level.L2)
    s.forge.pulls[7]["head"]["sha"] = "d" * 40  # the PR was rebuilt: a person asks again on the new head
    second = await bisection.start(s.b, 7, level=Level.L1, by="dev")
    old = Bisections(store).get(first.id or 0)
    assert old is not None and old.status is Status.SUPERSEDED
    assert (second.head_sha, second.status, second.started_by) == ("d" * 40, Status.RUNNING, "dev")
    assert await bisection.latest(s.b, FORK, 7) == Bisections(store).get(second.id or 0)


async def test_a_stalled_probe_times_out_as_a_skip(store: Store) -> None:
    s = bench(store)
    await bisection.start(s.b, 7)
    (first,) = s.waiting()
    await bisection.time_out_probes(s.b.tiering, 7)
    assert s.waiting() == [first]  # not yet: L1 waits 60 minutes
    s.now[0] = AT + timedelta(minutes=61)
    await bisection.time_out_probes(s.b.tiering, 7)
    assert s.runs.get(first.id or 0).state is RunState.TIMED_OUT  # type: ignore[union-attr]
    # the tier flows tell the bisection (here by hand: the fake has no `after` hook wired)
    await bisection.probe_finished(s.b, s.runs.get(first.id or 0))  # type: ignore[arg-type]
    record = Bisections(store).get(first.bisection or 0)
    assert record is not None and record.state.skipped == (8,) and len(s.waiting()) == 1


# --- a performance regression (L3 passed its tests; its comparison regressed a critical kernel) -------------


def timed(*, slower: float) -> str:
    """An L3 report of matmul (critical) and softmax timed 40 times each, matmul slowed by `slower`."""
    return report(benchmark(even(40, shift=slower)), benchmark(even(40), kernel="softmax")).to_json()


def regressed_l3(store: Store, *, trunk_head: str = BASE, by: str = "trunk") -> tuple[TierRun, TierRun]:
    """Trunk's L3 report on the PR's base, and the PR's L3 run: passed, matmul 30 % slower than that."""
    runs = TierRuns(store)
    trunk = runs.add(TierRun(FORK, 0, by, Level.L3, trunk_head, 1, RunState.DISPATCHED, AT))
    assert trunk is not None
    runs.save(
        dataclasses.replace(trunk, state=RunState.COMPLETED, verdict=Verdict.PASSED, report=timed(slower=0))
    )
    own = runs.add(TierRun(FORK, 7, "bundle-1", Level.L3, HEAD, 1, RunState.DISPATCHED, AT))
    assert own is not None and own.id is not None
    done = dataclasses.replace(
        own, state=RunState.COMPLETED, verdict=Verdict.PASSED, report=timed(slower=0.3)
    )
    runs.record_regressions(
        own.id,
        [
            Regression(
                "matmul[1024x1024:fp16:BLOCK_M=128]", "matmul", "median", True, ratio=1.3, threshold=0.02
            )
        ],
    )
    runs.save(done)
    return trunk, done


@pytest.mark.parametrize("how", ["tier_failed", "/bisect l3"])
async def test_a_regressed_l3_is_bisected_against_its_baseline_report(store: Store, how: str) -> None:
    s = bench(store, performance=PerformanceConfig(critical=("matmul",)), failed=False)
    trunk, own = regressed_l3(store)
    if how == "tier_failed":
        started = await bisection.tier_failed(s.b, own)
    else:
        started = await bisection.start(s.b, 7, level=Level.L3, by="dev")
    assert started is not None and "matmul[1024x1024:fp16:BLOCK_M=128] · median" in started.regressions
    assert all(name.startswith("matmul[") for name in started.regressions)  # softmax kept its speed
    assert started.baseline_run == trunk.id and started.state.kind.value == "regression"
    assert "L3 (a performance regression)" in s.forge.comments[7]
    culprit = UPSTREAM[6]
    for _ in range(30):  # each probe's report: matmul slower where the prefix holds the culprit
        waiting = s.waiting()
        if not waiting:
            break
        for run in waiting:
            record = Bisections(store).get(run.bisection or 0)
            assert record is not None
            probe = next(p for p in record.state.in_flight if p.id == run.probe)
            answer = timed(slower=0.3 if culprit in probe.commits else 0.001)
            done = dataclasses.replace(
                run, state=RunState.COMPLETED, verdict=Verdict.PASSED, report=answer, completed_at=AT
            )
            s.runs.save(done)
            await bisection.probe_finished(s.b, done)
    (finished,) = Bisections(store).for_pull(FORK, 7)
    assert finished.status is Status.DONE and [c.shas for c in finished.state.culprits] == [(culprit,)]
    blamed = Bisections(store).blamed(FORK)[culprit]
    assert blamed.startswith("L3 regressed on #7 (bundle-1): matmul") and "(+30.0%)" in blamed


async def test_a_noise_level_l3_change_is_not_bisected(store: Store) -> None:
    s = bench(store, performance=PerformanceConfig(critical=("matmul",)), failed=False)
    _, own = regressed_l3(store)
    quiet = dataclasses.replace(own, report=timed(slower=0.001))  # its stored cells say regressed; it is not
    s.runs.save(quiet)
    assert await bisection.tier_failed(s.b, quiet) is None
    assert Bisections(store).for_pull(FORK, 7) == [] and s.backend.started == []


async def test_a_regression_against_a_baseline_of_another_trunk_commit_is_not_bisected(store: Store) -> None:
    """Trunk watch's report is the newest baseline, but of an older trunk commit than the PR's base: what
    regressed may have come in between, and bisecting the PR's commits would blame one of them for it."""
    s = bench(store, performance=PerformanceConfig(critical=("matmul",)), failed=False)
    trunk, own = regressed_l3(store, trunk_head="0" * 40, by=WATCH)
    found = await tiers.baseline(s.b.tiering, Level.L3, BASE)
    assert found is not None and found.id == trunk.id  # what the PR's own check compares with
    assert await bisection.tier_failed(s.b, own) is None
    assert Bisections(store).for_pull(FORK, 7) == [] and s.backend.started == []


class RacedForge(Forge):
    """The PR, and the time-out sweep ending the run just after `complete` read it as waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.sweep: Callable[[], Any] | None = None
        self.shown: list[dict[str, Any]] = []

    async def get_pull(self, number: int) -> Pull:
        if self.sweep is not None:
            sweep, self.sweep = self.sweep, None
            await sweep()
        return await super().get_pull(number)

    async def new_check_run(self, sha: str, name: str, body: dict[str, Any]) -> int:
        self.shown.append(body)
        return 1

    async def update_check_run(self, check_id: int, body: dict[str, Any]) -> None:
        self.shown.append(body)


async def test_an_l3_result_that_loses_the_race_to_the_time_out_leaves_no_regressions(store: Store) -> None:
    """`complete` reads the run as waiting; the sweep times it out before the result is recorded: the time-out
    stands, and the result's regressions (matmul 30 % slower) are not left beside it."""
    forge = RacedForge()
    s = bench(store, performance=PerformanceConfig(critical=("matmul",)), forge=forge, failed=False)
    trunk = s.runs.add(TierRun(FORK, 0, "trunk", Level.L3, BASE, 1, RunState.DISPATCHED, AT))
    assert trunk is not None
    s.runs.save(
        dataclasses.replace(trunk, state=RunState.COMPLETED, verdict=Verdict.PASSED, report=timed(slower=0))
    )
    own = s.runs.add(TierRun(FORK, 7, "bundle-1", Level.L3, HEAD, 1, RunState.DISPATCHED, AT))
    assert own is not None and own.id is not None
    slower = report(benchmark(even(40, shift=0.3)), benchmark(even(40), kernel="softmax"))
    result = slower.model_copy(update={"run": slower.run.model_copy(update={"head_sha": HEAD})})

    async def sweep() -> None:
        await tiers.time_out(s.b.tiering, own)

    forge.sweep = sweep
    await tiers.complete(s.b.tiering, own.id, tiers.Finished("success", result.to_json()))
    final = s.runs.get(own.id)
    assert final is not None and final.state is RunState.TIMED_OUT
    assert s.runs.regressions(own.id) == ()
    assert [b.get("conclusion") for b in forge.shown if b.get("status") == "completed"] == ["timed_out"]


async def test_a_probe_whose_dispatch_fails_underneath_is_a_skip_not_a_wait_forever(store: Store) -> None:
    """GitHub answers 502 to one probe's dispatch: that probe never started, so it is a skip (its tier run
    marked refused) and the search goes on around it; its pushed branch is deleted with the others."""
    s = bench(store)
    real, calls = s.backend.start, []

    async def flaky(subject: Any, run: TierRun, *, workflow: str) -> int | None:
        calls.append(run.probe)
        if len(calls) == 2:
            raise RuntimeError("502 Bad Gateway")
        return await real(subject, run, workflow=workflow)

    s.backend.start = flaky  # type: ignore[method-assign]
    await bisection.start(s.b, 7)
    await s.oracle(UPSTREAM[10])

    (done,) = Bisections(store).for_pull(FORK, 7)
    assert done.status is Status.DONE and [c.shas for c in done.state.culprits] == [(UPSTREAM[10],)]
    assert done.state.in_flight == ()
    failed = [p for p in done.probes if p.probe == calls[1]]
    assert failed and failed[0].outcome is not None and failed[0].outcome.value == "skip"
    assert sorted(s.forge.deleted) == sorted(s.candidates.pushed)  # the unstarted probe's branch too
