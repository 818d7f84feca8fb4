"""Performance bisection end to end: the simulator, `sluice serve` with the real store, the `local` tier
backend with real L3 reports whose `bench` suite times matmul and softmax. Trunk watch leaves L3's baseline
report on fork trunk; a bundle's L3 passes its tests, but one of its commits makes matmul (a critical kernel)
30 % slower: Sluice bisects the bundle against that same baseline report, moves the culprit into a risky
chain with the regression attached, and the rebuilt bundle merges. A change within the noise is not
bisected."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.core.bisect_pr import COMMENT_MARKER, Status
from bot.core.ingestion import BRANCH_PREFIX
from bot.core.tiers import Level, RunState, TierRun
from bot.core.trunk_watch import WATCH
from bot.db.bisections import Bisections
from bot.db.gates import GateStore
from bot.db.jobs import jobs
from bot.db.tier_runs import TierRuns
from bot.db.trunk_watch import TrunkWatchStore
from handlers.requests import BISECT
from runners.report import Report
from tests.support.github_sim import GitHubSim
from tests.test_bisect_e2e import docs, pulls, upstream_of
from tests.test_tiers_e2e import FORK, UPSTREAM, Rig, make_rig

CONFIG = (
    "  l3_policy: always\n"  # goes on with the `tiers` section
    "performance:\n  critical: [matmul]\n"
    "gate:\n  required_tiers: [l1, l2, l3]\n  auto_merge: true\n"
    "trunk_watch:\n  enabled: true\n  interval_hours: 24\n  l3_suites: [bench]\n"
)
MATMUL = "matmul[1024x1024:fp16]"


@pytest.fixture
async def rig(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[Rig]:
    made, server = await make_rig(
        aiohttp_server,
        tmp_path,
        database_url,
        backend="local",
        workflows={},
        config=CONFIG,
        benchmarks=True,
        trunk_watch_interval=0.2,
    )
    yield made
    await server.close()
    made.store.close()


async def trunk_baseline(rig: Rig, timeout: float = 120.0) -> str:
    """Wait for trunk watch's L3 run on fork trunk (the bench suite): the baseline report; its head."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        await rig.settle()
        runs = TrunkWatchStore(rig.store).trunk_runs(FORK, ingestion=WATCH, level=Level.L3, limit=5)
        done = [r for r in runs if r.state is RunState.COMPLETED and r.report]
        if done:
            return done[0].head_sha
        await asyncio.sleep(0.2)
    raise AssertionError("trunk watch left no L3 report on fork trunk")


def report_of(run: TierRun) -> Report:
    assert run.report is not None
    return Report.model_validate_json(run.report)


def push_upstream(sim: GitHubSim, changes: list[dict[str, str]]) -> list[str]:
    return [sim.commit(UPSTREAM, "main", c, message=f"upstream: change {n}") for n, c in enumerate(changes)]


async def test_a_bundle_commit_that_slows_a_critical_kernel_is_bisected_against_the_baseline(
    rig: Rig,
) -> None:
    base = await trunk_baseline(rig)
    changes = docs(8)
    changes[5] = {**changes[5], "ci/l3.slower": "0.3\n"}
    shas = push_upstream(rig.sim, changes)
    await rig.settle(timeout=300)
    culprit = shas[5]

    bundle_number = min(p.number for p in pulls(rig))
    (bisection,) = Bisections(rig.store).for_pull(FORK, bundle_number)
    assert bisection.status is Status.DONE and bisection.level is Level.L3
    assert bisection.state.kind.value == "regression"
    assert f"{MATMUL} · median" in bisection.regressions
    assert all(name.startswith("matmul[") for name in bisection.regressions)  # softmax kept its speed
    assert [c.shas for c in bisection.state.culprits] == [(culprit,)] and bisection.state.culprits[
        0
    ].confirmed

    # the PR's own L3 passed its tests; its regression is what was bisected, against trunk watch's report
    runs = TierRuns(rig.store)
    own = [r for r in runs.for_pull(FORK, bundle_number) if r.level is Level.L3 and r.bisection is None]
    first = next(r for r in own if r.head_sha == bisection.head_sha)
    assert first.verdict is not None and first.verdict.value == "passed"
    baseline = runs.get(bisection.baseline_run or 0)
    assert baseline is not None and baseline.head_sha == base and baseline.ingestion == WATCH
    probes = [r for r in runs.for_pull(FORK, bundle_number) if r.bisection == bisection.id]
    assert len(probes) == bisection.state.runs
    assert 1 + len(probes) <= 2 * math.ceil(math.log2(len(shas))) + 1
    assert all(p.state is RunState.COMPLETED and p.level is Level.L3 for p in probes)
    # the probes ran only the suite that timed matmul (L3 has two), through the dispatch's suite selection
    assert (bisection.suite, bisection.suite_name) == (0, "bench")
    assert all(p.suite == 0 and [s.name for s in report_of(p).suites] == ["bench"] for p in probes)
    assert [s.name for s in report_of(first).suites] == ["bench", "sweep"]  # the PR's own run: the whole tier

    # the culprit roots a risky chain, the regression attached; the bundle, rebuilt without it, merged
    assert culprit in Bisections(rig.store).blamed(FORK)
    chain = next(p for p in pulls(rig) if p.head_ref.startswith(f"{BRANCH_PREFIX}chain-"))
    assert culprit in upstream_of(rig, rig.head(chain.head_ref), 1)
    assert "bisected" in chain.body and f"L3 regressed on #{bundle_number}" in chain.body
    bundle = next(p for p in pulls(rig) if p.number == bundle_number)
    assert bundle.merged
    assert upstream_of(rig, "main", 7) == [s for s in shas if s != culprit]

    # the PR showed what was bisected; the audit record lists it
    (comment,) = [c for c in rig.sim.comments[(FORK, bundle_number)] if COMMENT_MARKER in c]
    assert "Bisection of L3 (a performance regression)" in comment and "done, 1 culprit" in comment
    assert "Its probes run only the suite `bench` of L3" in comment
    assert f"`{MATMUL} · median`" in comment and culprit[:10] in comment
    record = GateStore(rig.store).audit(FORK, bundle_number)
    assert record is not None and record.state.value == "closed"
    (entry,) = record.bisections
    assert (entry.tier, entry.status, entry.culprits) == ("L3", "done", (culprit,))
    assert entry.regressions == bisection.regressions


async def test_a_change_within_the_noise_is_not_bisected(rig: Rig) -> None:
    await trunk_baseline(rig)
    changes = docs(4)
    changes[2] = {**changes[2], "ci/l3.slower": "0.004\n"}  # 0.4 %: under the 2 % floor that matters
    push_upstream(rig.sim, changes)
    await rig.settle(timeout=300)

    (pull,) = pulls(rig)
    l3 = [r for r in TierRuns(rig.store).for_pull(FORK, pull.number) if r.level is Level.L3]
    assert [(r.verdict and r.verdict.value, r.bisection) for r in l3] == [("passed", None)]
    assert l3[0].report is not None and '"kernel":"matmul"' in l3[0].report.replace(" ", "")
    assert Bisections(rig.store).for_pull(FORK, pull.number) == []
    assert bisect_jobs(rig) == 0  # no critical kernel regressed: no bisection job was even asked for
    assert pull.merged


def bisect_jobs(rig: Rig) -> int:
    with rig.store._engine.connect() as conn:
        return len(conn.execute(select(jobs.c.id).where(jobs.c.kind == BISECT)).all())
