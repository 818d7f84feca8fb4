"""Bisection end to end: the simulator, `sluice serve` with the real store, tier runs with real reports. A
bundle fails L1 for a real reason; Sluice bisects it on candidate branches, blames the culprit, moves it
into a risky chain and rebuilds the bundle, which merges through the gate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.core.bisect_pr import CANDIDATE_PREFIX, COMMENT_MARKER, Status
from bot.core.ingestion import BRANCH_PREFIX
from bot.db.bisections import Bisections
from bot.db.gates import GateStore
from bot.db.tier_runs import TierRuns
from tests.support.github_sim import GitHubSim
from tests.test_tiers_e2e import FORK, UPSTREAM, Rig, say, templates
from tests.test_tiers_e2e import make_rig as tiers_rig

GATE = "gate:\n  required_tiers: [l1]\n  auto_merge: true\n"
CULPRIT_FILE = "ci/l1.mode"  # the fork's L1 suite fails once this says `fail` (an API rename, as it were)


async def make_rig(
    aiohttp_server: Any,
    tmp_path: Path,
    database_url: str,
    *,
    backend: str,
    commits: list[dict[str, str]],
    config: str = "",
) -> tuple[Rig, Any, list[str]]:
    """The fork with its tier commands, and `commits` on upstream before Sluice is installed (one bundle)."""
    shas: list[str] = []

    def upstream(sim: GitHubSim) -> None:
        for n, change in enumerate(commits):
            shas.append(sim.commit(UPSTREAM, "main", change, message=f"upstream: change {n}"))

    rig, server = await tiers_rig(
        aiohttp_server,
        tmp_path,
        database_url,
        backend=backend,
        workflows=templates() if backend == "github" else {},
        config=config + GATE,  # `config` may go on with the `tiers` section first
        before_install=upstream,
        settle_timeout=300,
    )
    return rig, server, shas


@pytest.fixture
async def teardown() -> AsyncIterator[list[tuple[Rig, Any]]]:
    started: list[tuple[Rig, Any]] = []
    yield started
    for rig, server in started:
        await server.close()
        rig.store.close()


def pulls(rig: Rig) -> list[Any]:
    return [i for i in rig.sim.issues[FORK].values() if i.is_pull and i.head_ref.startswith(BRANCH_PREFIX)]


def upstream_of(rig: Rig, rev: str, count: int) -> list[str]:
    """The Upstream-Commit trailers of the newest `count` first-parent commits of `rev`, oldest first."""
    log = rig.sim.git(
        FORK, "log", "--first-parent", f"-{count}", "--format=%(trailers:key=Upstream-Commit,valueonly)", rev
    )
    return [line.strip() for line in reversed(log.splitlines()) if line.strip()]


def docs(n: int) -> list[dict[str, str]]:
    return [{f"docs/page-{i}.md": f"page {i}\n"} for i in range(n)]


async def test_a_bundle_of_16_with_one_culprit_is_bisected_and_the_other_15_merge(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[tuple[Rig, Any]]
) -> None:
    changes = docs(16)
    changes[10] = {**changes[10], CULPRIT_FILE: "fail\n"}
    rig, server, shas = await make_rig(
        aiohttp_server, tmp_path, database_url, backend="local", commits=changes
    )
    teardown.append((rig, server))
    culprit = shas[10]

    (bisection,) = Bisections(rig.store).for_pull(FORK, min(p.number for p in pulls(rig)))
    assert bisection.status is Status.DONE and bisection.level.value == "l1"
    assert [c.shas for c in bisection.state.culprits] == [(culprit,)]
    assert bisection.state.culprits[0].confirmed
    runs = TierRuns(rig.store).for_pull(FORK, bisection.pull)
    probes = [r for r in runs if r.bisection == bisection.id]
    failed_own = [
        r for r in runs if r.bisection is None and r.head_sha == bisection.head_sha and r.level.value == "l1"
    ]
    assert (
        len(failed_own) == 1 and failed_own[0].verdict is not None and failed_own[0].verdict.value == "failed"
    )
    assert len(probes) == bisection.state.runs and len(failed_own) + len(probes) <= 9  # 2·log2(16)+1
    assert all(p.state.value == "completed" for p in probes)  # none discarded as stale

    # the culprit is blamed for the planner and sits in a risky chain, with the failure attached
    assert culprit in Bisections(rig.store).blamed(FORK)
    chain = next(p for p in pulls(rig) if p.head_ref.startswith(f"{BRANCH_PREFIX}chain-"))
    assert culprit in upstream_of(rig, rig.head(chain.head_ref), 1)
    assert "bisected" in chain.body and "L1 failed" in chain.body

    # the bundle was rebuilt without it, passed and merged: the other 15 are on trunk
    bundle = next(p for p in pulls(rig) if p.number == bisection.pull)
    assert bundle.merged
    record = GateStore(rig.store).audit(FORK, bundle.number)
    assert record is not None and record.state.value == "closed"
    assert [(b.tier, b.status, b.runs, b.culprits) for b in record.bisections] == [
        ("L1", "done", bisection.state.runs, (culprit,))
    ]
    assert upstream_of(rig, "main", 15) == [s for s in shas if s != culprit]

    # the PR showed the bisection; the candidate branches are gone
    (comment,) = [c for c in rig.sim.comments[(FORK, bundle.number)] if COMMENT_MARKER in c]
    assert "done, 1 culprit" in comment and culprit[:10] in comment
    branches = rig.sim.git(FORK, "for-each-ref", "--format=%(refname:short)", "refs/heads/")
    assert CANDIDATE_PREFIX not in branches


async def test_an_infrastructure_failure_is_retried_and_not_bisected(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[tuple[Rig, Any]], monkeypatch: Any
) -> None:
    monkeypatch.setenv("TIER_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("SLUICE_TIER_PASS_ENV", "TIER_STATE_DIR")
    changes = docs(3)
    changes[1] = {**changes[1], CULPRIT_FILE: "flaky-gpu\n"}
    rig, server, _ = await make_rig(aiohttp_server, tmp_path, database_url, backend="local", commits=changes)
    teardown.append((rig, server))
    (pull,) = pulls(rig)
    runs = TierRuns(rig.store).for_pull(FORK, pull.number)
    l1 = [(r.attempt, r.verdict and r.verdict.value, r.bisection) for r in runs if r.level.value == "l1"]
    assert l1 == [(1, "infrastructure", None), (2, "passed", None)]
    assert Bisections(rig.store).for_pull(FORK, pull.number) == [] and pull.merged


async def test_a_probe_result_for_a_superseded_head_is_ignored(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[tuple[Rig, Any]]
) -> None:
    changes = docs(4)
    changes[2] = {**changes[2], CULPRIT_FILE: "fail\n"}
    rig, server, _ = await make_rig(aiohttp_server, tmp_path, database_url, backend="github", commits=changes)
    teardown.append((rig, server))
    (pull,) = pulls(rig)
    (l1,) = rig.sim.workflow_runs[FORK]
    rig.act_as_runner(l1)  # the bundle fails L1
    await rig.settle()
    (bisection,) = Bisections(rig.store).for_pull(FORK, pull.number)
    assert bisection.status is Status.RUNNING
    (probe,) = [r for r in rig.sim.workflow_runs[FORK] if r["id"] != l1["id"]]
    assert probe["inputs"]["head_sha"] != bisection.head_sha and probe["inputs"]["pull"] == str(pull.number)
    # it runs only the suite that failed: L1's `unit` (index 0), as the dispatch's selection 2 + 0
    assert (bisection.suite, bisection.suite_name) == (0, "unit") and probe["inputs"]["selection"] == "2"

    rig.sim.commit(UPSTREAM, "main", {"docs/late.md": "late\n"}, message="upstream: one more")
    await rig.settle()  # the bundle is rebuilt: a new head, its own L1 dispatched
    assert rig.head(pull.head_ref) != bisection.head_sha
    (recorded,) = [r for r in TierRuns(rig.store).for_pull(FORK, pull.number) if r.bisection == bisection.id]
    assert recorded.state.value == "dispatched"  # the PR's new head does not discard a probe as stale

    dispatched = len(rig.sim.workflow_runs[FORK])
    rig.act_as_runner(probe)  # the old state's probe result arrives late
    await rig.settle()
    (after,) = Bisections(rig.store).for_pull(FORK, pull.number)
    assert after.status is Status.SUPERSEDED and after.state.runs == 0  # the result did not count
    assert len(rig.sim.workflow_runs[FORK]) == dispatched  # and nothing more was dispatched for it
    assert Bisections(rig.store).blamed(FORK) == {}
    branches = rig.sim.git(FORK, "for-each-ref", "--format=%(refname:short)", "refs/heads/")
    assert CANDIDATE_PREFIX not in branches


# --- `/bisect [tier]` ---------------------------------------------------------------------------------


@pytest.fixture
async def manual(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[tuple[Rig, Any]]
) -> tuple[Rig, int]:
    """A bundle of 4 whose L1 failed, with automatic bisection off; its PR number."""
    changes = docs(4)
    changes[1] = {**changes[1], CULPRIT_FILE: "fail\n"}
    rig, server, _ = await make_rig(
        aiohttp_server,
        tmp_path,
        database_url,
        backend="github",
        commits=changes,
        config="bisect:\n  auto: false\n  max_runs: 6\n",
    )
    teardown.append((rig, server))
    (pull,) = pulls(rig)
    (l1,) = rig.sim.workflow_runs[FORK]
    rig.act_as_runner(l1)
    await rig.settle()
    assert Bisections(rig.store).for_pull(FORK, pull.number) == []  # `auto: false`
    for user, role in (("dev", "write"), ("mallory", "read")):
        rig.sim.set_permission(FORK, user, role)
    return rig, pull.number


def last_reply(rig: Rig, number: int) -> str:
    return rig.sim.comments[(FORK, number)][-1]


async def test_bisect_starts_a_bisection_of_the_failed_tier_and_a_second_is_refused(
    manual: tuple[Rig, int],
) -> None:
    rig, number = manual
    await say(rig, number, "/bisect", user="dev")
    assert "bisection of #" in last_reply(rig, number) and "on L1 started by @dev" in last_reply(rig, number)
    (bisection,) = Bisections(rig.store).for_pull(FORK, number)
    assert bisection.status is Status.RUNNING and bisection.started_by == "dev"
    assert bisection.state.budget.max_runs == 6  # from the config
    probes = [r for r in TierRuns(rig.store).for_pull(FORK, number) if r.bisection == bisection.id]
    assert len(probes) == 1 and probes[0].head_sha != bisection.head_sha

    await say(rig, number, "/bisect l1", user="dev")
    assert "already runs" in last_reply(rig, number)
    assert len(Bisections(rig.store).for_pull(FORK, number)) == 1


@pytest.mark.parametrize(
    "line", ["/bisect l9", "/bisect l1;rm -rf /", "/bisect --upload-pack=x", "/bisect l1 l2", "/bisect ١"]
)
async def test_bisect_refuses_a_hostile_tier_argument(manual: tuple[Rig, int], line: str) -> None:
    rig, number = manual
    await say(rig, number, line, user="dev")
    reply = last_reply(rig, number)
    assert "Sluice did not run" in reply and "Usage: `/bisect [<tier>]`" in reply
    assert Bisections(rig.store).for_pull(FORK, number) == []


async def test_bisect_is_refused_to_a_reader_and_on_a_pr_that_is_no_ingestion(
    manual: tuple[Rig, int],
) -> None:
    rig, number = manual
    await say(rig, number, "/bisect", user="mallory")
    assert "has read access" in last_reply(rig, number) and "`/bisect` needs" in last_reply(rig, number)
    trunk = rig.head("main")
    rig.sim.commit(FORK, "feature", {"src/a.py": "a = 1\n"}, message="fork: a", parent=trunk, pusher="dev")
    pull = rig.sim.open_pull(FORK, head="feature", base="main", title="A fork change", user="dev")
    await rig.settle()
    await say(rig, pull["number"], "/bisect l1", user="dev")
    assert "acts on an open ingestion PR" in last_reply(rig, pull["number"])
    assert Bisections(rig.store).for_pull(FORK, number) == []
    assert Bisections(rig.store).for_pull(FORK, pull["number"]) == []
