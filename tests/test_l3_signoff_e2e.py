"""End to end, `sluice serve` against the simulator with the GitHub Actions backend: an ingestion PR's L3
run passes its tests but its report's matmul is 8 % slower than trunk's baseline report. Sluice stores the
regression with the tier run, `sluice/gate` waits for the gemm area's owner, and the owner's `/signoff l3`
opens it: Sluice merges, and the audit record names the signoff."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bot.core.tiers import Level, RunState, TierRun, Verdict
from bot.db.gates import GateStore
from bot.db.jobs import JobQueue
from bot.db.tier_runs import TierRuns
from runners import report as tier_report
from runners.report import Outcome, Report, RunInfo, SuiteResult
from tests.test_runners_compare import benchmark, environment
from tests.test_tiers_e2e import FORK, Rig, ingestion_pr, make_rig, say, templates

AT = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
AREAS = """    areas:
      - {name: gemm, kernels: [matmul], owners: ['@gina']}
  l3_policy: always
gate:
  required_tiers: [l1, l2, l3]
  auto_merge: true
"""


def bench_report(head: str, *, slower: float, seed: int) -> str:
    """An L3 report whose one suite passed and whose matmul and softmax were timed 60 times on a GPU."""
    rng = np.random.default_rng(seed)
    matmul = benchmark(0.25 * (1 + slower) * rng.lognormal(0.0, 0.01, 60), kernel="matmul")
    softmax = benchmark(0.10 * rng.lognormal(0.0, 0.01, 60), kernel="softmax")
    suite = SuiteResult(name="bench", kind="builtin", executed=1, passed=1, outcome=Outcome.PASSED)
    test = tier_report.TestResult(suite="bench", name="matmul[1024x1024]", outcome=Outcome.PASSED)
    return Report(
        run=RunInfo(tier="l3", head_sha=head, started_at=AT, finished_at=AT),
        environment=environment(),
        suites=(suite,),
        tests=(test,),
        benchmarks=(matmul, softmax),
    ).to_json()


@pytest.fixture
async def actions(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[Rig]:
    rig, server = await make_rig(
        aiohttp_server, tmp_path, database_url, backend="github", workflows=templates()
    )
    yield rig
    await server.close()
    rig.store.close()


def seed_baseline(rig: Rig, base: str) -> None:
    """Trunk's L3 report at the PR's base, as a trunk run leaves it in the store."""
    runs = TierRuns(rig.store)
    added = runs.add(TierRun(FORK, 0, "trunk", Level.L3, base, 1, RunState.DISPATCHED, AT))
    assert added is not None
    report = bench_report(base, slower=0.0, seed=1)
    done = dataclasses.replace(added, state=RunState.COMPLETED, verdict=Verdict.PASSED, report=report)
    runs.save(done)


async def test_a_regressed_metric_waits_for_the_area_owners_signoff_then_merges(actions: Rig) -> None:
    sim = actions.sim
    config = sim.git(FORK, "show", "main:.github/sluice.yml").rstrip("\n") + "\n" + AREAS  # after l3's suites
    sim.commit(FORK, "main", {".github/sluice.yml": config}, message="fork: L3 gates, by area")
    await actions.settle()
    sim.set_permission(FORK, "gina", "write")
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    for tier in ("1", "2"):
        (run,) = [r for r in sim.workflow_runs[FORK] if r["inputs"]["tier"] == tier]
        actions.act_as_runner(run)
        await actions.settle()
    (l3,) = [r for r in sim.workflow_runs[FORK] if r["inputs"]["tier"] == "3"]  # l3_policy: always
    seed_baseline(actions, l3["inputs"]["baseline_sha"])
    report = bench_report(head, slower=0.08, seed=2)
    sim.finish_run(FORK, l3["id"], "success", artifact=("sluice-tier-report", {"report.json": report}))
    await actions.settle()

    check = actions.checks(head)["sluice/L3"]
    assert check["conclusion"] == "success" and "regressed" in check["output"]["summary"]
    assert re.fullmatch(
        r"L3: tests passed \(\d+ tests?\), \d+ metrics? regressed beyond noise", check["output"]["title"]
    )
    (run,) = [r for r in TierRuns(actions.store).for_pull(FORK, number) if r.level is Level.L3]
    regressed = {(r.kernel, r.metric): r for r in TierRuns(actions.store).regressions(run.id or 0)}
    assert {kernel for kernel, _ in regressed} == {"matmul"}  # softmax kept its speed
    assert regressed["matmul", "median"].ratio == pytest.approx(1.08, abs=0.01)
    gate = actions.checks(head)["sluice/gate"]
    assert gate["status"] == "in_progress"
    assert "signoff of L3's regressed metrics in area `gemm`" in gate["output"]["summary"]
    assert not sim.issues[FORK][number].merged

    await say(actions, number, "/signoff l3", user="gina")
    assert sim.issues[FORK][number].merged
    gate = actions.checks(head)["sluice/gate"]
    assert gate["conclusion"] == "success" and "signed off by @gina" in gate["output"]["summary"]
    record = GateStore(actions.store).audit(FORK, number)
    assert record is not None
    assert [(a.login, a.head_sha, a.source) for a in record.approvals] == [("gina", head, "signoff-l3")]


async def test_an_l3_rerun_github_never_started_keeps_the_last_results_signoff(actions: Rig) -> None:
    """L3 passed with a regressed metric, so the gate waits for the area owner. `/l3` again: GitHub fails
    the new attempt's check run (5xx), the attempt never starts and the check run still shows the last
    result. The last result's regressions stand: nothing merges until someone signs them off."""
    sim = actions.sim
    config = sim.git(FORK, "show", "main:.github/sluice.yml").rstrip("\n") + "\n" + AREAS
    sim.commit(FORK, "main", {".github/sluice.yml": config}, message="fork: L3 gates, by area")
    await actions.settle()
    sim.set_permission(FORK, "dev", "write")
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    for tier in ("1", "2"):
        (run,) = [r for r in sim.workflow_runs[FORK] if r["inputs"]["tier"] == tier]
        actions.act_as_runner(run)
        await actions.settle()
    (l3,) = [r for r in sim.workflow_runs[FORK] if r["inputs"]["tier"] == "3"]
    seed_baseline(actions, l3["inputs"]["baseline_sha"])
    report = bench_report(head, slower=0.08, seed=2)
    sim.finish_run(FORK, l3["id"], "success", artifact=("sluice-tier-report", {"report.json": report}))
    await actions.settle()
    assert "signoff of L3's regressed metrics" in actions.checks(head)["sluice/gate"]["output"]["summary"]

    sim.fail_next("POST", r"/check-runs$", 502, times=50)  # every try of the tiers job, for a while
    payload = sim.issue_comment_payload(FORK, sim.add_comment(FORK, number, "/l3", user="dev"))
    await actions.deliver("issue_comment", payload)

    def l3_attempts() -> list[tuple[int, RunState]]:
        runs = TierRuns(actions.store).for_pull(FORK, number)
        return [(r.attempt, r.state) for r in runs if r.level is Level.L3]

    await until(actions, lambda: (2, RunState.UNDISPATCHED) in l3_attempts())
    assert l3_attempts() == [(1, RunState.COMPLETED), (2, RunState.UNDISPATCHED)]
    done = JobQueue(actions.store).counts()["done"]
    sim.review(FORK, number, user="carol", state="COMMENTED")  # an event that judges the gate again
    await until(actions, lambda: JobQueue(actions.store).counts()["done"] > done)  # the review's job

    assert not sim.issues[FORK][number].merged
    gate = actions.checks(head)["sluice/gate"]
    assert (
        gate["status"] == "in_progress" and "signoff of L3's regressed metrics" in gate["output"]["summary"]
    )


async def until(rig: Rig, done: Callable[[], bool], *, seconds: float = 30.0) -> None:
    """Deliver webhooks until `done` (the jobs may be retrying a failure meanwhile: no settling)."""
    for _ in range(int(seconds * 10)):
        await rig.sim.drain_hooks()
        if done():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("not done in time")


def test_a_comparison_says_which_metrics_it_measured_so_a_missing_one_is_no_pass() -> None:
    """The performance oracle of bisections and trunk watch: a probe whose report lacks the regressed
    benchmark (or timed it only with low confidence) did not show it got faster."""
    from bot.core.bisect import Outcome as Answer
    from bot.core.config import parse_config
    from bot.core.l3_metrics import regression_outcome
    from bot.flows.tiers import compare_metrics

    config = parse_config("performance: {critical: [matmul, softmax]}")
    before = Report.model_validate_json(bench_report("a" * 40, slower=0.0, seed=1))
    slower = Report.model_validate_json(bench_report("b" * 40, slower=0.08, seed=2))
    compared = compare_metrics(before, slower, config)
    assert compared is not None
    (regressed,) = {r.name for r in compared.regressions if r.name.endswith("· median")}
    assert regressed.startswith("matmul") and regressed in compared.measured
    assert regression_outcome((regressed,), compared) is Answer.FAIL

    without = slower.model_copy(
        update={"benchmarks": tuple(b for b in slower.benchmarks if b.kernel != "matmul")}
    )
    missing = compare_metrics(before, without, config)
    assert missing is not None and regressed not in missing.measured and missing.regressions == ()
    assert any(name.startswith("softmax") for name in missing.measured)
    assert regression_outcome((regressed,), missing) is Answer.SKIP  # it used to read as a pass
