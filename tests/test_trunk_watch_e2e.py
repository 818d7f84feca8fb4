"""Trunk watch end to end: the simulator, `sluice serve` with its trunk-watch loop, the `local` tier backend.

Fork trunk passes L2; three commits land, the middle one breaks L2's test; the next scheduled trunk run fails,
Sluice bisects the three commits to the middle one and opens one tracking issue; a later failing run updates
that issue (never a second one), and the run after the fix closes it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.core.tiers import RunState
from bot.core.trunk_watch import LABEL, PROBE, WATCH
from bot.db.tier_runs import TierRuns
from bot.db.trunk_watch import TrunkWatchStore
from tests.support.github_sim import GitHubSim, Issue
from tests.test_tiers_e2e import FORK, Rig, templates
from tests.test_tiers_e2e import make_rig as tiers_rig

WATCHING = "trunk_watch:\n  enabled: true\n  interval_hours: 1\n"


async def make_rig(
    aiohttp_server: Any, tmp_path: Path, database_url: str, *, backend: str, workflows: dict[str, str]
) -> tuple[Rig, Any]:
    return await tiers_rig(
        aiohttp_server,
        tmp_path,
        database_url,
        backend=backend,
        workflows=workflows,
        config=WATCHING,
        trunk_watch_interval=0.2,  # the loop looks often; the fork's config says when trunk is due
    )


@pytest.fixture
async def rig(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[Rig]:
    made, server = await make_rig(aiohttp_server, tmp_path, database_url, backend="local", workflows={})
    yield made
    await server.close()
    made.store.close()


@pytest.fixture
async def actions(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[Rig]:
    made, server = await make_rig(
        aiohttp_server, tmp_path, database_url, backend="github", workflows=templates()
    )
    yield made
    await server.close()
    made.store.close()


async def trunk_runs_finished(rig: Rig, count: int, timeout: float = 120.0) -> None:
    """Wait until `count` scheduled trunk runs exist and nothing is left to do."""
    deadline = asyncio.get_running_loop().time() + timeout
    watch = TrunkWatchStore(rig.store)
    while asyncio.get_running_loop().time() < deadline:
        await rig.settle()
        runs = watch.trunk_runs(FORK, ingestion=WATCH, limit=100)
        waiting = watch.waiting(FORK)
        if len(runs) >= count and not waiting:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{count} trunk runs did not finish: {watch.trunk_runs(FORK, ingestion=WATCH)}")


def tracking_issues(sim: GitHubSim) -> list[Issue]:
    return [
        i
        for i in sim.issues[FORK].values()
        if not i.is_pull and LABEL in sim.labels.get((FORK, i.number), [])
    ]


async def test_a_breaking_trunk_commit_is_bisected_and_tracked_in_one_issue(rig: Rig) -> None:
    await trunk_runs_finished(rig, 1)  # the first look dispatches the first trunk run at once
    watch = TrunkWatchStore(rig.store)
    (first,) = watch.trunk_runs(FORK, ingestion=WATCH)
    assert (
        first.verdict is not None and first.verdict.value == "passed" and first.head_sha == rig.head("main")
    )

    a = rig.sim.commit(FORK, "main", {"docs/a.md": "a\n"}, message="docs: a note", pusher="dev")
    b = rig.sim.commit(FORK, "main", {"ci/l2.mode": "fail\n"}, message="gpu: a faster path", pusher="dev")
    c = rig.sim.commit(FORK, "main", {"docs/c.md": "c\n"}, message="docs: another note", pusher="dev")
    await rig.settle()
    assert len(watch.trunk_runs(FORK, ingestion=WATCH)) == 1  # trunk moved, but the interval has not passed
    rig.clock.offset += dt.timedelta(hours=2)
    await trunk_runs_finished(rig, 2)

    second = watch.trunk_runs(FORK, ingestion=WATCH)[0]
    assert second.head_sha == c and second.verdict is not None and second.verdict.value == "failed"
    probes = sorted(watch.trunk_runs(FORK, ingestion=PROBE), key=lambda r: r.id or 0)
    assert [(r.head_sha, r.attempt) for r in probes] == [(a, 1), (b, 1), (b, 2)]  # split, split, confirm
    assert all(r.state is RunState.COMPLETED for r in probes)
    (failure,) = [t for t, _ in watch.open_failures(FORK)]
    assert failure.culprit is not None and failure.culprit.sha == b
    assert (failure.good_sha, failure.bad_sha) == (first.head_sha, c)

    (issue,) = tracking_issues(rig.sim)
    body = issue.body or ""
    assert issue.state == "open" and "L2" in issue.title and "gpu" in issue.title
    assert f"**Culprit**: `{b[:10]}` gpu: a faster path (" in body
    assert f"`{first.head_sha[:10]}`" in body and f"`{c[:10]}`" in body and "3 trunk commits between" in body
    assert "AssertionError: tensors not close" in body  # the evidence: the failing test's message
    assert "| trunk commit | why | outcome | run |" in body and f"| `{a[:10]}` | search | pass |" in body

    # a later scheduled run still fails: the same issue is updated, no second one is opened
    d = rig.sim.commit(FORK, "main", {"docs/d.md": "d\n"}, message="docs: a third note", pusher="dev")
    rig.clock.offset += dt.timedelta(hours=2)
    await trunk_runs_finished(rig, 3)
    (again,) = tracking_issues(rig.sim)
    assert again.number == issue.number and again.state == "open"
    assert f"still failing at `{d[:10]}`" in (again.body or "")
    assert (
        len(watch.trunk_runs(FORK, ingestion=PROBE)) == 3
    )  # a failure already tracked is not bisected again

    # a fork PR on a trunk commit trunk watch did not run: its L2 failure is trunk's latest report's too
    base = rig.sim.commit(FORK, "main", {"docs/e.md": "e\n"}, message="docs: a fourth note", pusher="dev")
    rig.sim.commit(FORK, "feature", {"src/f.py": "f = 1\n"}, message="fork: f", parent=base, pusher="dev")
    pull = rig.sim.open_pull(FORK, head="feature", base="main", title="A fork change", user="dev")
    await rig.settle()
    verdicts = [
        (r.level.value, r.verdict and r.verdict.value)
        for r in TierRuns(rig.store).for_pull(FORK, pull["number"])
    ]
    assert verdicts == [("l1", "passed"), ("l2", "broken-trunk")]

    # the fix lands: the next run passes and the issue is closed, saying so
    e = rig.sim.commit(FORK, "main", {"ci/l2.mode": "pass\n"}, message="gpu: fix the path", pusher="dev")
    rig.clock.offset += dt.timedelta(hours=2)
    await trunk_runs_finished(rig, 4)
    (closed,) = tracking_issues(rig.sim)
    assert closed.number == issue.number and closed.state == "closed" and closed.title.endswith("(fixed)")
    assert f"passes at `{e[:10]}`" in (closed.body or "")
    assert any(
        f"Passes again on fork trunk at `{e[:10]}`" in text for text in rig.sim.comments[(FORK, issue.number)]
    )
    assert watch.open_failures(FORK) == []


async def test_with_the_github_backend_a_trunk_run_is_a_dispatch_without_a_check_run(actions: Rig) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while not actions.sim.workflow_runs[FORK] and loop.time() < deadline:
        await actions.settle()
        await asyncio.sleep(0.2)
    (dispatched,) = actions.sim.workflow_runs[FORK]
    head = actions.head("main")
    assert dispatched["name"] == "sluice-l2.yml" and dispatched["inputs"]["pull"] == "0"
    assert dispatched["inputs"]["head_sha"] == head and dispatched["inputs"]["tier"] == "2"
    actions.act_as_runner(dispatched)  # the simulator then sends workflow_run completed
    await trunk_runs_finished(actions, 1)
    (run,) = TrunkWatchStore(actions.store).trunk_runs(FORK, ingestion=WATCH)
    assert run.run_id == dispatched["id"] and run.verdict is not None and run.verdict.value == "passed"
    assert not [name for name in actions.checks(head) if name.startswith("sluice/L")]  # no tier check run
    assert TierRuns(actions.store).pull_for_head(FORK, head) is None  # and no PR a button could name

    # trunk moves; its run stalls: past L2's timeout it is marked timed out, and not dispatched again
    moved = actions.sim.commit(FORK, "main", {"docs/a.md": "a\n"}, message="docs: a note", pusher="dev")
    actions.clock.offset += dt.timedelta(hours=2)
    while len(actions.sim.workflow_runs[FORK]) < 2 and loop.time() < deadline + 60:
        await actions.settle()
        await asyncio.sleep(0.2)
    stalled = actions.sim.workflow_runs[FORK][-1]
    assert stalled["inputs"]["head_sha"] == moved
    actions.clock.offset += dt.timedelta(hours=7)  # L2's timeout_minutes: 360
    await trunk_runs_finished(actions, 2)
    newest = TrunkWatchStore(actions.store).trunk_runs(FORK, ingestion=WATCH)[0]
    assert (newest.head_sha, newest.state) == (moved, RunState.TIMED_OUT)
    assert len(actions.sim.workflow_runs[FORK]) == 2  # the same head is not due again
