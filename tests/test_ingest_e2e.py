"""End to end: upstream push → simulator webhook → `sluice serve` (intake, jobs, workers) → ingestion PRs."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.core import dashboard
from bot.core.audit import AuditState
from bot.core.ingestion import BRANCH_PREFIX, CLASSIFICATION_MARKER
from bot.db.gates import GateStore
from bot.db.jobs import JobQueue
from bot.db.lag import LagHistory
from bot.db.registry import Registry
from bot.db.store import Store
from tests.support.github_sim import GitHubSim
from tests.support.rig import (
    fork_config,
    installation_created,
    serve_bot,
    serve_settings,
    serve_sim,
    upstream_and_fork,
)

SECRET = "e2e-secret"
UPSTREAM = "triton-lang/triton"
FORK = "meta/triton"
CORE_PASS = "lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp"


@dataclass
class Rig:
    sim: GitHubSim
    sim_url: str
    bot_url: str
    store: Store
    data_dir: Path

    @property
    def queue(self) -> JobQueue:
        return JobQueue(self.store)

    async def settle(self, timeout: float = 90.0) -> None:
        """Wait until the sim has delivered every webhook and the bot has no queued or running job."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            await self.sim.drain_hooks()
            counts = self.queue.counts()
            if counts["queued"] == 0 and counts["running"] == 0:
                assert self.job_errors() == []
                # every request the bot made fits GitHub's published schemas, every answer is documented
                assert self.sim.schema_violations == [] and self.sim.undocumented_statuses == []
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"jobs did not settle: {self.queue.counts()}")

    def job_errors(self) -> list[tuple[str, str, str]]:
        from sqlalchemy import select

        from bot.db.jobs import jobs

        with self.store._engine.connect() as conn:
            rows = conn.execute(
                select(jobs.c.kind, jobs.c.state, jobs.c.error).where(jobs.c.error.is_not(None))
            )
            return [(r.kind, r.state, r.error) for r in rows]

    def pulls(self, state: str = "open") -> list[Any]:
        return [i for i in self.sim.issues[FORK].values() if i.is_pull and state in ("all", i.state)]

    def tracking_issues(self) -> list[Any]:
        """The fork's issues but its dashboard (which every ingestion run keeps up to date)."""
        issues = [i for i in self.sim.issues[FORK].values() if not i.is_pull]
        return [i for i in issues if dashboard.LABEL not in self.labels(i.number)]

    def labels(self, number: int) -> list[str]:
        return sorted(self.sim.labels[(FORK, number)])

    async def merge(self, installation: int, number: int) -> None:
        """Merge the fork's PR `number` through the API, as the gate (or a person) does."""
        token = self.sim.installation_token(installation)
        async with aiohttp.ClientSession(headers={"Authorization": f"token {token}"}) as session:
            url = f"{self.sim_url}/repos/{FORK}/pulls/{number}/merge"
            async with session.put(url, json={"merge_method": "merge"}) as resp:
                assert resp.status == 200, await resp.text()

    def sticky(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.sim.comment_objects(FORK, number) if CLASSIFICATION_MARKER in c["body"]]


async def installation_event(rig: Rig, full_name: str, installation_id: int) -> int:
    payload = installation_created(rig.sim, full_name, installation_id)
    return await rig.sim.deliver(f"{rig.bot_url}/webhook", "installation", payload, secret=SECRET)


@pytest.fixture
async def rig(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[Rig]:
    sim, sim_url = await serve_sim(aiohttp_server, tmp_path / "sim")
    # Upstream: a small history; the fork: upstream's history plus its own commit and .github/sluice.yml.
    upstream_and_fork(
        sim,
        UPSTREAM,
        FORK,
        {"README.md": "triton\n", CORE_PASS: "void pipeline() {\n  step();\n}\n", "docs/guide.md": "guide\n"},
    )
    sim.commit(
        FORK,
        "main",
        {".github/sluice.yml": fork_config(sim_url, UPSTREAM), "third_party/tlx/tlx.py": "x = 1\n"},
        message="fork: TLX extension and Sluice config",
    )
    store = Store.open(database_url)
    settings = serve_settings(
        sim,
        sim_url,
        secret=SECRET,
        data_dir=tmp_path / "data",
        allow_private_upstreams=True,  # the simulator listens on loopback, which Sluice refuses by default
    )
    bot, bot_url = await serve_bot(aiohttp_server, settings, store)
    sim.hook(f"{bot_url}/webhook", SECRET)
    yield Rig(sim, sim_url, bot_url, store, tmp_path / "data")
    await bot.close()
    store.close()


async def upstream_commits(rig: Rig, *changes: tuple[str, dict[str, str | None]]) -> list[str]:
    return [rig.sim.commit(UPSTREAM, "main", files, message=subject) for subject, files in changes]


def writes_to_the_fork(requests: list[tuple[str, str, int]]) -> list[tuple[str, str]]:
    """The REST calls and git pushes among `requests` that change the fork."""
    return [
        (method, path)
        for method, path, _ in requests
        if (method != "GET" and path.startswith(f"/repos/{FORK}/")) or path == f"/{FORK}.git/git-receive-pack"
    ]


def branch_blobs_have_markers(sim: GitHubSim, branch: str) -> bool:
    out = sim.git(
        FORK, "grep", "-l", "-e", "^<<<<<<<", "-e", "^>>>>>>>", f"refs/heads/{branch}", "--", check=False
    )
    return bool(out.strip())


async def test_upstream_pushes_open_then_update_ingestion_prs_without_duplicates(rig: Rig) -> None:
    fork_installation = rig.sim.install(FORK)
    upstream_installation = rig.sim.install(UPSTREAM)
    low = await upstream_commits(
        rig,
        ("docs: clarify the guide", {"docs/guide.md": "guide, clarified\n"}),
        ("test: add a lit test", {"test/TritonGPU/new.mlir": "// RUN: true\n"}),
    )
    risky = await upstream_commits(
        rig, ("[Pipeliner] overlap loads", {CORE_PASS: "void pipeline() {\n  step();\n  overlap();\n}\n"})
    )
    # GitHub throttles the first PR creation: the bot waits as told and carries on.
    rig.sim.secondary_rate_limit("POST", r"/pulls$", retry_after=1)
    assert await installation_event(rig, FORK, fork_installation) == 202
    assert await installation_event(rig, UPSTREAM, upstream_installation) == 202
    await rig.settle()
    async with aiohttp.ClientSession() as session, session.get(f"{rig.bot_url}/metrics") as resp:
        metrics = await resp.text()
    assert re.search(r'sluice_github_api_calls_total\{method="POST"\} [1-9]', metrics)
    assert re.search(
        r"sluice_github_rate_limit_waits_total\{reason=\"secondary_rate_limit\"\} 1.0", metrics
    ), metrics

    registry = Registry(rig.store)
    fork = registry.fork(FORK)
    assert fork is not None and fork.upstream_repo == UPSTREAM
    pulls = {p.head_ref: p for p in rig.pulls()}
    bundle = pulls[f"{BRANCH_PREFIX}bundle-{low[0][:10]}"]
    chain = pulls[f"{BRANCH_PREFIX}chain-{risky[0][:10]}"]
    assert bundle.title == f"[sluice] bundle: 2 upstream commits ({low[0][:7]}..{low[1][:7]})"
    assert chain.title.startswith("[sluice] risky chain (high): 1 upstream commit")
    assert rig.labels(bundle.number) == ["sluice:bundle"]
    assert rig.labels(chain.number) == ["sluice:risky-chain"]
    assert bundle.base_ref == "main" and chain.base_ref == bundle.head_ref  # the chain builds on the bundle
    for sha in low:
        assert sha[:10] in bundle.body
    assert "How to revert" in bundle.body and "Sluice-Ingestion: bundle-" in bundle.body
    assert "core-passes" in rig.sticky(chain.number)[0]["body"]
    # the branch holds the upstream commits, with trailers naming them and the ingestion
    log = rig.sim.git(FORK, "log", "--format=%B%x00", f"refs/heads/{bundle.head_ref}", "-2")
    assert f"Upstream-Commit: {low[1]}" in log and "Sluice-Ingestion: bundle-" in log
    bundle_head = rig.sim.git(FORK, "rev-parse", f"refs/heads/{bundle.head_ref}").strip()
    runs = {r["name"]: r for r in rig.sim.check_runs[FORK] if r["head_sha"] == bundle_head}
    assert sorted(runs) == ["sluice/L1", "sluice/L2", "sluice/L3", "sluice/gate"]
    # This fork has no tier workflows: L1's dispatch is refused (404), asking for action, not retried;
    # the tiers above it do not start; the gate waits.
    assert (
        runs["sluice/L1"]["conclusion"] == "action_required"
        and "HTTP 404" in runs["sluice/L1"]["output"]["title"]
    )
    assert {runs[name]["conclusion"] for name in ("sluice/L2", "sluice/L3")} == {"skipped"}
    assert runs["sluice/gate"]["conclusion"] is None  # waiting (queued, or in progress once it judged)
    assert (
        len(rig.sim.dispatches[FORK]) == 0
        and ("POST", f"/repos/{FORK}/actions/workflows/sluice-l1.yml/dispatches", 404) in rig.sim.requests
    )

    # A second upstream push: the bundle grows in place; nothing is opened twice.
    more = await upstream_commits(rig, ("docs: one more", {"docs/more.md": "more\n"}))
    await rig.settle()
    open_now = rig.pulls()
    assert len(open_now) == 2 and len(rig.pulls("all")) == 2
    grown = next(p for p in open_now if p.number == bundle.number)
    assert grown.title == f"[sluice] bundle: 3 upstream commits ({low[0][:7]}..{more[0][:7]})"
    assert len(rig.sticky(bundle.number)) == 1 and len(rig.sticky(chain.number)) == 1
    assert rig.labels(bundle.number) == ["sluice:bundle"]
    assert rig.labels(chain.number) == ["sluice:risky-chain"]
    new_head = rig.sim.git(FORK, "rev-parse", f"refs/heads/{bundle.head_ref}").strip()
    assert new_head != bundle_head
    assert {r["name"] for r in rig.sim.check_runs[FORK] if r["head_sha"] == new_head} == {
        "sluice/L1",
        "sluice/L2",
        "sluice/L3",
        "sluice/gate",
    }
    # Sluice's own pushes came back as push webhooks and were ignored: no ingestion job ran for them.
    assert any(p["pusher"] == rig.sim.bot_login for p in rig.sim.pushes)

    # The bundle merges (as the gate will merge it): the chain now builds on trunk, in the same PR.
    await rig.merge(fork_installation, bundle.number)
    await rig.settle()
    assert [p.number for p in rig.pulls()] == [chain.number]
    assert rig.pulls()[0].base_ref == "main"
    chain_head = rig.sim.git(FORK, "rev-parse", f"refs/heads/{chain.head_ref}").strip()
    trunk = rig.sim.git(FORK, "rev-parse", "refs/heads/main").strip()
    assert rig.sim.git(FORK, "rev-parse", f"{chain_head}^").strip() == trunk

    # The same push delivered again (a redelivery) changes nothing: the ingestion it runs writes nothing.
    # (Once first: the dashboard issue and the sticky comments' validation line catch up with the gate's and
    # the tiers' check runs, which moved since.)
    payload = rig.sim.push_payload(UPSTREAM, "refs/heads/main", low[0], more[0])
    since = len(rig.sim.requests)
    await rig.sim.deliver(f"{rig.bot_url}/webhook", "push", payload, secret=SECRET)
    await rig.settle()
    dashboard = {i.number for i in rig.sim.issues[FORK].values() if "sluice:dashboard" in (i.body or "")}
    sticky = {c["id"] for p in rig.pulls("all") for c in rig.sticky(p.number)}
    caught_up = {path for _, path in writes_to_the_fork(rig.sim.requests[since:])}
    assert caught_up <= {f"/repos/{FORK}/issues/{n}" for n in dashboard} | {
        f"/repos/{FORK}/issues/comments/{i}" for i in sticky
    }, caught_up
    before, since = [(p.number, p.title, p.body) for p in rig.pulls("all")], len(rig.sim.requests)
    await rig.sim.deliver(f"{rig.bot_url}/webhook", "push", payload, secret=SECRET)
    await rig.settle()
    assert [(p.number, p.title, p.body) for p in rig.pulls("all")] == before
    looked = {s for m, p, s in rig.sim.requests[since:] if (m, p) == ("GET", f"/repos/{FORK}/pulls")}
    assert looked & {200, 304}  # it did run and look (304: unchanged since, its cached copy)
    # at most the sticky comments' validation line catches up with the tiers' check runs
    writes = writes_to_the_fork(rig.sim.requests[since:])
    assert all(method == "PATCH" and "/issues/comments/" in path for method, path in writes), writes
    assert ("POST", f"/{FORK}.git/git-receive-pack") in writes_to_the_fork(rig.sim.requests[:since])


async def test_a_merge_fork_gets_units_in_the_streams_order_each_merging_only_its_own_commits(
    rig: Rig,
) -> None:
    """`strategy: merge`: the docs commit after the risky one goes in a bundle of its own, after the chain,
    since merging it brings everything before it; each unit's commits are merges of upstream commits."""
    config = fork_config(rig.sim_url, UPSTREAM) + "strategy: merge\n"
    rig.sim.commit(FORK, "main", {".github/sluice.yml": config}, message="fork: merge upstream")
    first, risky, last = await upstream_commits(
        rig,
        ("docs: clarify the guide", {"docs/guide.md": "guide, clarified\n"}),
        ("[Pipeliner] overlap loads", {CORE_PASS: "void pipeline() {\n  step();\n  overlap();\n}\n"}),
        ("docs: a second page", {"docs/more.md": "more\n"}),
    )
    assert await installation_event(rig, FORK, rig.sim.install(FORK)) == 202
    assert await installation_event(rig, UPSTREAM, rig.sim.install(UPSTREAM)) == 202
    await rig.settle()
    pulls = {p.head_ref.removeprefix(BRANCH_PREFIX): p for p in rig.pulls()}
    order = [f"bundle-{first[:10]}", f"chain-{risky[:10]}", f"bundle-{last[:10]}"]
    assert sorted(pulls) == sorted(order)
    assert [pulls[u].base_ref for u in order] == ["main", *(pulls[u].head_ref for u in order[:-1])]
    for unit, sha in zip(order, (first, risky, last), strict=True):
        head = rig.sim.git(FORK, "rev-parse", f"refs/heads/{pulls[unit].head_ref}").strip()
        assert rig.sim.git(FORK, "rev-parse", f"{head}^2").strip() == sha  # a merge of its upstream commit
    bundle_head = rig.sim.git(FORK, "rev-parse", f"refs/heads/{pulls[order[0]].head_ref}").strip()
    assert risky not in rig.sim.git(FORK, "rev-list", bundle_head)  # the bundle brings nothing risky


async def test_max_chain_pieces_keep_their_prs_over_replans_and_when_the_first_is_merged(rig: Rig) -> None:
    """`risk.max_chain: 2` cuts a chain of four into two PRs, the second on the first; a replan keeps both,
    and once the first is merged the second goes on as the same PR, on fork trunk."""
    config = fork_config(rig.sim_url, UPSTREAM) + "risk:\n  max_chain: 2\n"
    rig.sim.commit(FORK, "main", {".github/sluice.yml": config}, message="fork: chains of two at most")
    steps = ["step();"]
    changes = []
    for n in range(4):  # each adds a line below the last one's: a chain linked by lines
        steps.append(f"stage{n}();")
        body = "".join(f"  {line}\n" for line in steps)
        changes.append((f"[Pipeliner] stage {n}", {CORE_PASS: f"void pipeline() {{\n{body}}}\n"}))
    shas = await upstream_commits(rig, *changes)
    installation = rig.sim.install(FORK)
    rig.sim.install(UPSTREAM)
    assert await installation_event(rig, FORK, installation) == 202
    await rig.settle()
    first, second = f"chain-{shas[0][:10]}", f"chain-{shas[2][:10]}"
    pulls = {p.head_ref.removeprefix(BRANCH_PREFIX): p for p in rig.pulls()}
    assert sorted(pulls) == sorted([first, second])
    assert (pulls[first].base_ref, pulls[second].base_ref) == ("main", pulls[first].head_ref)
    numbers = {unit: pull.number for unit, pull in pulls.items()}

    runs = ingest_runs(rig)
    rig.sim.commit(FORK, "main", {"third_party/tlx/tlx.py": "x = 2\n"}, message="fork: TLX tweak")
    await rig.settle()
    assert ingest_runs(rig) > runs
    assert {
        p.head_ref.removeprefix(BRANCH_PREFIX): p.number for p in rig.pulls()
    } == numbers  # re-planned, kept

    await rig.merge(installation, numbers[first])
    await rig.settle()
    assert [(p.head_ref.removeprefix(BRANCH_PREFIX), p.number, p.base_ref) for p in rig.pulls()] == [
        (second, numbers[second], "main")
    ]


async def test_a_merge_forks_units_keep_their_prs_when_the_first_is_merged(rig: Rig) -> None:
    """`strategy: merge`: a chain cut by a bundled commit is two units around the bundle; once the first is
    merged, the bundle and the rest of the chain go on as the same PRs, the bundle now on fork trunk."""
    config = fork_config(rig.sim_url, UPSTREAM) + "strategy: merge\n"
    rig.sim.commit(FORK, "main", {".github/sluice.yml": config}, message="fork: merge upstream")
    risky, docs, follow_up = await upstream_commits(
        rig,
        ("[Pipeliner] overlap loads", {CORE_PASS: "void pipeline() {\n  step();\n  overlap();\n}\n"}),
        ("docs: clarify the guide", {"docs/guide.md": "guide, clarified\n"}),
        (
            "[Pipeliner] and prefetch",
            {CORE_PASS: "void pipeline() {\n  step();\n  overlap();\n  prefetch();\n}\n"},
        ),
    )
    installation = rig.sim.install(FORK)
    rig.sim.install(UPSTREAM)
    assert await installation_event(rig, FORK, installation) == 202
    await rig.settle()
    order = [f"chain-{risky[:10]}", f"bundle-{docs[:10]}", f"chain-{follow_up[:10]}"]
    numbers = {p.head_ref.removeprefix(BRANCH_PREFIX): p.number for p in rig.pulls()}
    assert sorted(numbers) == sorted(order)

    await rig.merge(installation, numbers[order[0]])
    await rig.settle()
    left = {p.head_ref.removeprefix(BRANCH_PREFIX): (p.number, p.base_ref) for p in rig.pulls()}
    assert left == {
        order[1]: (numbers[order[1]], "main"),
        order[2]: (numbers[order[2]], f"{BRANCH_PREFIX}{order[1]}"),
    }


async def test_a_conflict_that_needs_a_human_is_never_pushed_with_markers(rig: Rig) -> None:
    fork_installation = rig.sim.install(FORK)
    rig.sim.install(UPSTREAM)
    # The fork changed the pass's body; upstream changes the same line differently.
    rig.sim.commit(
        FORK, "main", {CORE_PASS: "void pipeline() {\n  fork_step();\n}\n"}, message="fork: own step"
    )
    clean = await upstream_commits(rig, ("docs: typo", {"docs/guide.md": "guide!\n"}))
    conflicting = await upstream_commits(
        rig, ("[Pipeliner] new step", {CORE_PASS: "void pipeline() {\n  new_step();\n}\n"})
    )
    assert await installation_event(rig, FORK, fork_installation) == 202
    await rig.settle()

    pulls = {p.head_ref: p for p in rig.pulls()}
    assert f"{BRANCH_PREFIX}bundle-{clean[0][:10]}" in pulls
    chain_branch = f"{BRANCH_PREFIX}chain-{conflicting[0][:10]}"
    # Not one commit of the chain applied: no PR (GitHub refuses an empty one), a tracking issue instead.
    assert chain_branch not in pulls
    issues = rig.tracking_issues()
    assert len(issues) == 1 and "sluice:needs-human" in rig.labels(issues[0].number)
    body = issues[0].body
    assert "Needs a human" in body and CORE_PASS in body
    assert f"git cherry-pick -x {conflicting[0]}" in body
    assert (
        rig.sim.git(FORK, "rev-parse", "--verify", "--quiet", f"refs/heads/{chain_branch}", check=False) == ""
    )
    for p in pulls.values():
        assert not branch_blobs_have_markers(rig.sim, p.head_ref)

    # A person follows the commands: resolves on top of the bundle and pushes the chain's branch.
    bundle_branch = f"{BRANCH_PREFIX}bundle-{clean[0][:10]}"
    bundle_head = rig.sim.git(FORK, "rev-parse", f"refs/heads/{bundle_branch}").strip()
    resolved = rig.sim.commit(
        FORK,
        chain_branch,
        {CORE_PASS: "void pipeline() {\n  fork_step();\n  new_step();\n}\n"},
        message=f"[Pipeliner] new step\n\n(cherry picked from commit {conflicting[0]})",
        parent=bundle_head,
        pusher="dev",
    )
    # and a reviewer pushes a fix-up to the bundle's PR branch.
    fixup = rig.sim.commit(
        FORK, bundle_branch, {"docs/guide.md": "guide!!\n"}, message="fix-up", pusher="dev"
    )
    # The next upstream push re-plans; Sluice must replace neither person's work.
    await upstream_commits(rig, ("docs: later", {"docs/later.md": "later\n"}))
    await rig.settle()
    assert rig.sim.git(FORK, "rev-parse", f"refs/heads/{chain_branch}").strip() == resolved
    assert rig.sim.git(FORK, "rev-parse", f"refs/heads/{bundle_branch}").strip() == fixup
    assert {p.head_ref for p in rig.pulls()} == {bundle_branch}  # still open, not closed as stale


async def test_the_tracking_issue_closes_into_the_pr_once_the_first_commit_applies(rig: Rig) -> None:
    fork_installation = rig.sim.install(FORK)
    rig.sim.install(UPSTREAM)
    original = rig.sim.git(FORK, "show", f"main:{CORE_PASS}")
    rig.sim.commit(
        FORK, "main", {CORE_PASS: "void pipeline() {\n  fork_step();\n}\n"}, message="fork: own step"
    )
    (conflicting,) = await upstream_commits(
        rig, ("[Pipeliner] new step", {CORE_PASS: "void pipeline() {\n  new_step();\n}\n"})
    )
    assert await installation_event(rig, FORK, fork_installation) == 202
    await rig.settle()
    (issue,) = rig.tracking_issues()
    assert rig.pulls() == [] and issue.state == "open"

    # The fork gives its own step up on trunk: the upstream commit now applies, and its PR takes over.
    rig.sim.commit(FORK, "main", {CORE_PASS: original}, message="fork: back to upstream's step")
    await rig.settle()
    (pull,) = rig.pulls()
    assert pull.head_ref == f"{BRANCH_PREFIX}chain-{conflicting[:10]}"
    assert issue.state == "closed"
    assert [c["body"] for c in rig.sim.comment_objects(FORK, issue.number)] == [
        f"Continued in #{pull.number}."
    ]
    assert rig.labels(pull.number) == ["sluice:risky-chain"] and len(rig.sticky(pull.number)) == 1
    (record,) = Registry(rig.store).ingestions(FORK)
    assert (record.state, record.pr_number, record.needs_human) == ("open", pull.number, None)


async def test_fork_pull_request_gets_a_patch_stack_comment(rig: Rig) -> None:
    fork_installation = rig.sim.install(FORK)
    rig.sim.install(UPSTREAM)
    await upstream_commits(
        rig, ("[Pipeliner] tweak", {CORE_PASS: "void pipeline() {\n  step();\n  tweak();\n}\n"})
    )
    assert await installation_event(rig, FORK, fork_installation) == 202
    await rig.settle()
    rig.sim.commit(
        FORK,
        "feature",
        {CORE_PASS: "void pipeline() {\n  step();\n  fork_hook();\n}\n"},
        message="fork: hook the pipeliner",
        parent=rig.sim.git(FORK, "rev-parse", "main").strip(),
    )
    pull = rig.sim.open_pull(FORK, head="feature", base="main", title="Hook the pipeliner")
    payload = rig.sim.pull_request_payload(FORK, pull["number"], "opened", sender="dev")
    assert await rig.sim.deliver(f"{rig.bot_url}/webhook", "pull_request", payload, secret=SECRET) == 202
    await rig.settle()
    comments = [
        c["body"] for c in rig.sim.comment_objects(FORK, pull["number"]) if "sluice:patch-stack" in c["body"]
    ]
    assert len(comments) == 1
    assert CORE_PASS in comments[0] and "[Pipeliner] tweak" in comments[0]
    assert "Likely future conflicts" in comments[0]


async def test_a_contributors_pr_from_a_branch_named_like_sluices_is_still_theirs(rig: Rig) -> None:
    """A branch is Sluice's by its name and by being in the fork itself: a contributor's fork may name a
    branch `sluice/ingest/…` too, and their PR still gets its patch-stack comment and its L1."""
    fork_installation = rig.sim.install(FORK)
    rig.sim.install(UPSTREAM)
    assert await installation_event(rig, FORK, fork_installation) == 202
    await rig.settle()
    outsider = "outsider/triton"
    rig.sim.create_repo(outsider)
    rig.sim.git(outsider, "fetch", "--quiet", str(rig.sim.repo_path(FORK)), "main:main")
    trunk = rig.sim.git(FORK, "rev-parse", "main").strip()
    branch = f"{BRANCH_PREFIX}bundle-0123456789"
    head = rig.sim.commit(
        outsider, branch, {CORE_PASS: "void pipeline() {}\n"}, message="theirs", parent=trunk
    )
    pull = rig.sim.open_pull(FORK, head=f"outsider:{branch}", base="main", title="Theirs", user="outsider")
    await rig.settle()

    comments = [c["body"] for c in rig.sim.comment_objects(FORK, pull["number"])]
    assert len([c for c in comments if "sluice:patch-stack" in c]) == 1
    assert "sluice/L1" in [r["name"] for r in rig.sim.check_runs[FORK] if r["head_sha"] == head]


async def test_a_fork_pr_retargeted_to_trunk_gets_l1_and_its_patch_stack_comment(rig: Rig) -> None:
    """GitHub reports a base change as `edited` (`changes.base`): the PR is now one into fork trunk."""
    fork_installation = rig.sim.install(FORK)
    rig.sim.install(UPSTREAM)
    assert await installation_event(rig, FORK, fork_installation) == 202
    await rig.settle()
    trunk = rig.sim.git(FORK, "rev-parse", "main").strip()
    rig.sim.commit(FORK, "dev", {"docs/dev.md": "dev\n"}, message="dev branch", parent=trunk)
    head = rig.sim.commit(FORK, "feature", {CORE_PASS: "void pipeline() {}\n"}, message="fork", parent=trunk)
    pull = rig.sim.open_pull(FORK, head="feature", base="dev", title="Hook the pipeliner")
    payload = rig.sim.pull_request_payload(FORK, pull["number"], "opened", sender="dev")
    assert await rig.sim.deliver(f"{rig.bot_url}/webhook", "pull_request", payload, secret=SECRET) == 202
    await rig.settle()

    def seen() -> tuple[list[str], list[str]]:
        checks = [r["name"] for r in rig.sim.check_runs[FORK] if r["head_sha"] == head]
        comments = [c["body"] for c in rig.sim.comment_objects(FORK, pull["number"])]
        return checks, [c for c in comments if "sluice:patch-stack" in c]

    assert seen() == ([], [])  # a PR into another branch: none of Sluice's business
    rig.sim.retarget_pull(FORK, pull["number"], base="dev", user="dev")  # no change: no event
    rig.sim.retarget_pull(FORK, pull["number"], base="main", user="dev")
    await rig.settle()
    checks, comments = seen()
    assert "sluice/L1" in checks and len(comments) == 1 and CORE_PASS in comments[0]


async def test_a_blocked_unit_that_left_the_plan_closes_its_tracking_issue_and_record(rig: Rig) -> None:
    """Upstream force-pushes the commit that needed a human away: its tracking issue closes, saying why,
    and its record stops counting as an open ingestion."""
    fork_installation = rig.sim.install(FORK)
    rig.sim.install(UPSTREAM)
    rig.sim.commit(
        FORK, "main", {CORE_PASS: "void pipeline() {\n  fork_step();\n}\n"}, message="fork: own step"
    )
    base = rig.sim.git(UPSTREAM, "rev-parse", "main").strip()
    (conflicting,) = await upstream_commits(
        rig, ("[Pipeliner] new step", {CORE_PASS: "void pipeline() {\n  new_step();\n}\n"})
    )
    assert await installation_event(rig, FORK, fork_installation) == 202
    await rig.settle()
    (issue,) = rig.tracking_issues()
    assert Registry(rig.store).ingestions(FORK)[0].state == "blocked"

    rig.sim.commit(UPSTREAM, "main", {"docs/guide.md": "guide v2\n"}, message="docs: rewritten", parent=base)
    await rig.settle()

    assert issue.state == "closed"
    (note,) = [c["body"] for c in rig.sim.comment_objects(FORK, issue.number)]
    assert note.startswith(
        f"Sluice closes this issue: the current plan no longer has `chain-{conflicting[:10]}`"
    )
    records = {r.id: r.state for r in Registry(rig.store).ingestions(FORK)}
    assert records[f"chain-{conflicting[:10]}"] == "closed"


async def test_a_pr_whose_unit_left_the_plan_is_closed(rig: Rig) -> None:
    fork_installation = rig.sim.install(FORK)
    rig.sim.install(UPSTREAM)
    base = rig.sim.git(UPSTREAM, "rev-parse", "main").strip()
    (gone,) = await upstream_commits(rig, ("docs: soon rewritten", {"docs/guide.md": "guide v1\n"}))
    assert await installation_event(rig, FORK, fork_installation) == 202
    await rig.settle()
    (old,) = rig.pulls()
    assert old.head_ref == f"{BRANCH_PREFIX}bundle-{gone[:10]}"
    # Upstream rewrites its history: the commit is gone, another takes its place.
    rig.sim.commit(UPSTREAM, "main", {"docs/guide.md": "guide v2\n"}, message="docs: rewritten", parent=base)
    await rig.settle()
    assert old.state == "closed" and not old.merged
    assert any("no longer has" in c["body"] for c in rig.sim.comment_objects(FORK, old.number))
    ended = GateStore(rig.store).audit(FORK, old.number)  # its record ends there, not open forever
    assert ended is not None and ended.state is AuditState.UNMERGED and ended.closed_at is not None
    assert ended.merge_sha is None
    (new,) = rig.pulls()
    assert new.number != old.number
    records = {r.id: r.state for r in Registry(rig.store).ingestions(FORK)}
    assert (
        records[f"bundle-{gone[:10]}"] == "closed"
        and records[new.head_ref.removeprefix(BRANCH_PREFIX)] == "open"
    )


def ingest_runs(rig: Rig) -> int:
    from sqlalchemy import func, select

    from bot.db.jobs import jobs

    query = select(func.count()).select_from(jobs).where(jobs.c.kind == "ingest", jobs.c.state == "done")
    with rig.store._engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


async def test_each_ingestion_run_adds_one_lag_point_shown_on_metrics_and_the_status_page(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sluice.ingest")
    fork_installation, upstream_installation = rig.sim.install(FORK), rig.sim.install(UPSTREAM)
    await upstream_commits(rig, ("docs: clarify the guide", {"docs/guide.md": "guide, clarified\n"}))
    assert await installation_event(rig, FORK, fork_installation) == 202
    assert await installation_event(rig, UPSTREAM, upstream_installation) == 202
    await rig.settle()
    history = LagHistory(rig.store)
    first = history.history(FORK)
    assert len(first) == ingest_runs(rig) >= 1
    assert first[-1].pending_commits == 1 and first[-1].open_ingestions == 1

    await upstream_commits(rig, ("docs: one more", {"docs/more.md": "more\n"}))
    await rig.settle()
    points = history.history(FORK)
    assert len(points) == ingest_runs(rig) > len(first)  # one per run, never overwritten
    assert points[-1].pending_commits == 2 and points[-1].at >= first[-1].at
    ingested = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"ingested {FORK}:")]
    assert ingested[-1].endswith(", 2 pending upstream commits, 0 backlog commits")

    async with aiohttp.ClientSession() as session:
        async with session.get(f"{rig.bot_url}/metrics") as resp:
            metrics = await resp.text()
        async with session.get(f"{rig.bot_url}/") as resp:
            assert resp.status == 200 and resp.content_type == "text/html"
            page = await resp.text()
    assert f'sluice_pending_commits{{fork="{FORK}"}} 2.0' in metrics
    assert f'sluice_open_ingestions{{fork="{FORK}"}} 1.0' in metrics
    assert f'sluice_backlog_commits{{fork="{FORK}"}} 0.0' in metrics
    (pull,) = rig.pulls()
    assert FORK in page and f"/{FORK}/pull/{pull.number}" in page
    assert 'id="dbu-meta-triton"' in page and 'id="bc-meta-triton"' in page
    assert points[-1].lead_time_days_median is None  # nothing picked onto trunk yet

    # The bundle merges (its picks land on trunk): the next run measures their lead time.
    await rig.merge(fork_installation, pull.number)
    await upstream_commits(rig, ("docs: a third", {"docs/third.md": "third\n"}))
    await rig.settle()
    landed = history.history(FORK)[-1]
    assert landed.pending_commits == 1 and landed.lead_time_days_median is not None
    assert 0 <= landed.lead_time_days_median <= (landed.lead_time_days_p90 or 0) < 1  # picked within a day
