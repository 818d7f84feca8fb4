"""End to end: ingestion PR → tiers complete → `sluice/gate` → pinned merge → rollback tag and closed audit
record, against the simulator (real git, real webhooks) and a real database."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select

from bot.app.clock import utc_now
from bot.app.context import Context
from bot.app.service import create_app
from bot.app.settings import Settings
from bot.app.status import fork_views
from bot.core.audit import AuditState
from bot.core.config import SluiceConfig
from bot.core.gate import Waiver
from bot.core.ingestion import BRANCH_PREFIX, CheckName
from bot.db.gates import GateStore
from bot.db.jobs import JobQueue, jobs
from bot.db.registry import Registry
from bot.db.store import Store
from bot.flows.merge import Outcome
from bot.flows.pick import Picker, learn_resolutions
from bot.git.repo import GitRepo
from bot.github.client import GitHubClient
from handlers import gatekeeping, resync
from tests.support import github_sim
from tests.support.github_sim import GitHubSim
from tests.support.rig import (
    fork_config,
    installation_created,
    serve_settings,
    serve_sim,
    upstream_and_fork,
    url_of,
)

SECRET = "gate-secret"
UPSTREAM = "triton-lang/triton"
FORK = "meta/triton"
CORE_PASS = "lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp"
ORIGINAL = "void pipeline() {\n  int depth = 2;\n  step(depth);\n}\n"
OURS = "void pipeline() {\n  int depth = 2;\n  step(depth, fork_hint());\n}\n"
THEIRS = "void pipeline() {\n  int depth = 2;\n  step(depth * 2);\n}\n"
RESOLVED = "void pipeline() {\n  int depth = 2;\n  step(depth * 2, fork_hint());\n}\n"
CODEOWNERS = "*  @meta/everyone\nlib/Dialect/  @meta/compiler\n"


@dataclass
class Rig:
    sim: GitHubSim
    sim_url: str
    bot_url: str
    store: Store
    settings: Settings
    server: Any = None  # the served bot: stopped (its workers with it) before the database goes

    @contextlib.asynccontextmanager
    async def ctx(self) -> AsyncIterator[Context]:
        """A handler's context beside the served bot's, for what a slash command would call."""
        async with aiohttp.ClientSession() as session:
            github = GitHubClient(
                session,
                app_id=self.sim.app_id,
                private_key=self.settings.private_key_pem(),
                base_url=self.settings.github_url,
                clock=utc_now,
            )
            store = self.store
            yield Context(
                self.settings, store, JobQueue(store), Registry(store), github, "sluice[bot]", utc_now
            )

    @property
    def gates(self) -> GateStore:
        return GateStore(self.store)

    async def settle(self, timeout: float = 90.0) -> None:
        """Every webhook delivered and every job done (none failed)."""
        queue, loop = JobQueue(self.store), asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            await self.sim.drain_hooks()
            counts = queue.counts()
            if counts["queued"] == 0 and counts["running"] == 0:
                with self.store._engine.connect() as conn:
                    errors = conn.execute(
                        select(jobs.c.kind, jobs.c.error).where(jobs.c.error.is_not(None))
                    ).all()
                assert [tuple(e) for e in errors] == []
                assert self.sim.schema_violations == [] and self.sim.undocumented_statuses == []
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"jobs did not settle: {queue.counts()}")

    def pull(self) -> Any:
        (pull,) = [i for i in self.sim.issues[FORK].values() if i.is_pull]
        return pull

    def head(self, pull: Any) -> str:
        return self.sim.git(FORK, "rev-parse", f"refs/heads/{pull.head_ref}")

    def gate(self, sha: str) -> dict[str, Any]:
        runs = [
            r for r in self.sim.check_runs[FORK] if r["head_sha"] == sha and r["name"] == CheckName.GATE.value
        ]
        return runs[-1]

    def trunk(self) -> str:
        return self.sim.git(FORK, "rev-parse", "refs/heads/main")


def fork_files(sim_url: str, gate: str) -> dict[str, str | bytes]:
    return {
        ".github/sluice.yml": fork_config(sim_url, UPSTREAM) + gate,
        ".github/CODEOWNERS": CODEOWNERS,
    }


async def start(
    aiohttp_server: Any,
    tmp_path: Path,
    database_url: str,
    *,
    gate: str,
    semantic: bool,
    docs: int = 1,
) -> Rig:
    sim, sim_url = await serve_sim(aiohttp_server, tmp_path / "sim")
    upstream_and_fork(sim, UPSTREAM, FORK, {"README.md": "triton\n", CORE_PASS: ORIGINAL, "docs/a.md": "a\n"})
    files = {**fork_files(sim_url, gate), CORE_PASS: OURS}
    sim.commit(FORK, "main", files, message="fork: hints, Sluice config")
    store = Store.open(database_url)
    if semantic:
        sim.commit(UPSTREAM, "main", {CORE_PASS: THEIRS}, message="[Pipeliner] deeper pipelines")
        remember_resolution(sim, store)
    else:
        for n in range(docs):
            sim.commit(UPSTREAM, "main", {f"docs/{n}.md": f"{n}\n"}, message=f"docs: page {n}")
    settings = serve_settings(
        sim, sim_url, secret=SECRET, data_dir=tmp_path / "data", allow_private_upstreams=True
    )
    bot = await aiohttp_server(create_app(settings, store=store, background=True))
    sim.hook(f"{url_of(bot)}/webhook", SECRET)
    rig = Rig(sim, sim_url, url_of(bot), store, settings, bot)
    for repo in (FORK, UPSTREAM):  # the upstream's pushes start ingestions
        payload = installation_created(sim, repo, sim.install(repo))
        assert await sim.deliver(f"{rig.bot_url}/webhook", "installation", payload, secret=SECRET) == 202
    await rig.settle()
    return rig


def remember_resolution(sim: GitHubSim, store: Store) -> None:
    """A person resolved this conflict before (`sluice remember`): the pick reuses it, as `semantic`."""
    sim.git(FORK, "fetch", "--quiet", str(sim.repo_path(UPSTREAM)), "main:refs/remotes/upstream/main")
    repo = GitRepo(sim.repo_path(FORK))
    upstream = repo.commits("refs/remotes/upstream/main", "-1")[-1]
    resolution = sim.commit(
        FORK, "scratch", {CORE_PASS: RESOLVED}, message="resolve", parent=sim.git(FORK, "rev-parse", "main")
    )
    resolved = repo.commits(resolution, "-1")[-1]
    learned = learn_resolutions(Picker(repo, SluiceConfig()), upstream, resolved)
    assert learned, "the resolution taught nothing"
    now = dt.datetime.now(dt.UTC)
    for key, (path, lines) in learned.items():
        store.remember_resolution(
            FORK,
            key,
            lines,
            path=path,
            recorded_by="alice",
            upstream_sha=upstream.sha,
            fork_sha=resolution,
            at=now,
        )
    sim.git(FORK, "update-ref", "-d", "refs/heads/scratch")
    sim.git(FORK, "update-ref", "-d", "refs/remotes/upstream/main")


@pytest.fixture
async def teardown() -> AsyncIterator[list[Rig]]:
    """Each rig's bot stopped, then its store closed, before `database_url` drops the test's schema (its
    workers would otherwise still be claiming jobs from tables that are gone)."""
    started: list[Rig] = []
    yield started
    for rig in started:
        if rig.server is not None:
            await rig.server.close()
        rig.store.close()


AUTO_L1 = "gate:\n  required_tiers: [l1]\n  auto_merge: true\n"


async def test_a_semantic_resolution_waits_for_a_code_owner_then_merges_with_a_rollback_tag(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=True)
    teardown.append(rig)
    pull = rig.pull()
    head, trunk_before = rig.head(pull), rig.trunk()
    record = rig.gates.audit(FORK, pull.number)
    assert record is not None and [(c.path, c.cls, c.how) for c in record.conflicts] == [
        (CORE_PASS, "semantic", "reused")
    ]

    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    gate = rig.gate(head)
    assert (gate["status"], gate["conclusion"]) == ("in_progress", None)
    assert "@meta/compiler" in gate["output"]["summary"] and CORE_PASS in gate["output"]["summary"]
    assert not pull.merged

    rig.sim.add_team_member("meta/everyone", "bob")
    rig.sim.review(FORK, pull.number, user="bob", state="APPROVED")  # owns `*`, not the dialects: no
    await rig.settle()
    assert not pull.merged and rig.gate(head)["conclusion"] is None

    rig.sim.add_team_member("meta/compiler", "alice")
    rig.sim.set_permission(FORK, "alice", "write")
    rig.sim.review(FORK, pull.number, user="alice", state="APPROVED")
    await rig.settle()
    assert pull.merged and rig.gate(head)["conclusion"] == "success"
    # one commit per upstream commit (rebase), on top of the trunk it was judged against
    assert rig.sim.git(FORK, "rev-parse", "main~1") == trunk_before
    assert "Upstream-Commit:" in rig.sim.git(FORK, "log", "-1", "--format=%B", "main")
    ingestion_id = pull.head_ref.removeprefix(BRANCH_PREFIX)
    tag = f"sluice/rollback/{ingestion_id}"
    assert rig.sim.git(FORK, "rev-parse", f"refs/tags/{tag}") == trunk_before
    closed = rig.gates.audit(FORK, pull.number)
    assert closed is not None and closed.state is AuditState.CLOSED
    assert (closed.merge_sha, closed.rollback_tag, closed.rollback_sha) == (rig.trunk(), tag, trunk_before)
    assert [a.login for a in closed.approvals] == ["alice"]
    assert next((t.name, t.conclusion) for t in closed.tiers) == (CheckName.L1.value, "success")
    assert closed.upstream_target and closed.commits[0].status == "auto_resolved"


async def test_an_approval_followed_by_a_new_push_does_not_merge(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=True)
    teardown.append(rig)
    pull = rig.pull()
    old = rig.head(pull)
    rig.sim.add_team_member("meta/compiler", "alice")
    rig.sim.review(FORK, pull.number, user="alice", state="APPROVED")  # L1 has not run: the gate waits
    await rig.settle()
    new = rig.sim.commit(
        FORK, pull.head_ref, {"docs/a.md": "a, by a person\n"}, message="touch up", pusher="carol"
    )
    await rig.settle()
    rig.sim.finish_check(FORK, new, CheckName.L1.value, "success")
    await rig.settle()
    assert not pull.merged and old != new
    summary = rig.gate(new)["output"]["summary"]
    assert "@alice were given on an older head" in summary


async def test_a_later_changes_requested_withdraws_the_same_owner_s_approve_and_approve_gives_it_back(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=True)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    rig.sim.add_team_member("meta/compiler", "alice")
    rig.sim.set_permission(FORK, "alice", "write")
    now, clock = utc_now(), rig.sim.now
    rig.gates.record_approval(
        FORK, pull.number, login="alice", head_sha=head, at=now - dt.timedelta(seconds=9)
    )
    rig.sim.now = lambda: now - dt.timedelta(seconds=5)  # she changes her mind, seconds later
    rig.sim.review(FORK, pull.number, user="alice", state="CHANGES_REQUESTED")
    rig.sim.now = clock
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    assert not pull.merged and rig.gate(head)["conclusion"] is None
    async with rig.ctx() as ctx:  # and `/approve`s again, after that review
        assert await gatekeeping.approve(ctx, FORK, pull.number, login="alice") is Outcome.MERGED


async def test_a_waiver_past_its_expiry_stops_counting(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    gate = "gate:\n  required_tiers: [l1, l2]\n  auto_merge: false\n"
    rig = await start(aiohttp_server, tmp_path, database_url, gate=gate, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    rig.sim.finish_check(FORK, head, CheckName.L2.value, "failure")
    await rig.settle()
    assert rig.gate(head)["conclusion"] == "failure"

    expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3)
    waiver = Waiver(
        CheckName.L2,
        "@meta/gpu",
        "the GPU pool is being replaced",
        "rerun L2 on the new pool",
        expires,
        "lead",
        head,
    )
    async with rig.ctx() as ctx:
        assert await gatekeeping.waive(ctx, FORK, pull.number, waiver) is Outcome.OPEN
    await rig.settle()
    opened = rig.gate(head)
    assert opened["conclusion"] == "success" and "waived by @lead" in opened["output"]["summary"]
    assert not pull.merged  # auto_merge is off: a person merges

    await asyncio.sleep(max(0.0, (expires - dt.datetime.now(dt.UTC)).total_seconds()) + 0.2)
    rerun = rig.sim.rerequest_payload(FORK, opened["id"], sender="carol")  # GitHub's Re-run on sluice/gate
    assert await rig.sim.deliver(f"{rig.bot_url}/webhook", "check_run", rerun, secret=SECRET) == 202
    await rig.settle()
    closed = rig.gate(head)
    assert closed["conclusion"] == "failure" and "expired" in closed["output"]["summary"]


async def waived_l2(rig: Rig, seconds: float) -> tuple[Any, str, dt.datetime]:
    """An ingestion PR whose L2 failed, waived for `seconds`: its pull, head, and the waiver's expiry."""
    pull = rig.pull()
    head = rig.head(pull)
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    rig.sim.finish_check(FORK, head, CheckName.L2.value, "failure")
    await rig.settle()
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
    waiver = Waiver(
        CheckName.L2, "@meta/gpu", "the GPU pool is being replaced", "rerun L2", expires, "lead", head
    )
    async with rig.ctx() as ctx:
        assert await gatekeeping.waive(ctx, FORK, pull.number, waiver) is Outcome.OPEN
    await rig.settle()
    assert rig.gate(head)["conclusion"] == "success"
    return pull, head, expires


async def test_the_sweep_judges_the_gate_again_when_a_waiver_expires(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    """Nothing happens on the PR when its waiver ends; the periodic sweep asks for its gate once, and the
    gate turns red then, not at the PR's next event (a person could merge on the green one meanwhile)."""
    gate = "gate:\n  required_tiers: [l1, l2]\n  auto_merge: false\n"
    rig = await start(aiohttp_server, tmp_path, database_url, gate=gate, semantic=False)
    teardown.append(rig)
    _, head, expires = await waived_l2(rig, 3)
    async with rig.ctx() as ctx:
        assert await resync.tier_sweep_once(ctx) == [] and rig.gate(head)["conclusion"] == "success"

    await asyncio.sleep(max(0.0, (expires - dt.datetime.now(dt.UTC)).total_seconds()) + 0.2)
    async with rig.ctx() as ctx:
        await resync.tier_sweep_once(ctx)
        assert await gatekeeping.judge_expired_waivers(ctx) == []  # asked once
    await rig.settle()

    closed = rig.gate(head)
    assert closed["conclusion"] == "failure" and "expired" in closed["output"]["summary"]


async def test_a_pr_merged_while_waived_keeps_its_waiver_in_the_audit_record_read_after_the_expiry(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    """The record of a person's merge is written when Sluice reads the `closed` event, which may come after
    the waiver ended: it records the gate as it stood at the merge."""
    gate = "gate:\n  required_tiers: [l1, l2]\n  auto_merge: false\n"
    rig = await start(aiohttp_server, tmp_path, database_url, gate=gate, semantic=False)
    teardown.append(rig)
    pull, head, expires = await waived_l2(rig, 3)
    hook, rig.sim._hook = rig.sim._hook, None  # Sluice is down: the merge's webhooks go nowhere
    async with rig.ctx() as ctx:  # a person merges on the green gate
        api = ctx.github.for_installation(rig.sim.install(FORK))
        await api.put(
            f"/repos/{FORK}/pulls/{pull.number}/merge", data={"sha": head, "merge_method": "rebase"}
        )
    rig.sim._hook = hook

    await asyncio.sleep(max(0.0, (expires - dt.datetime.now(dt.UTC)).total_seconds()) + 0.2)
    closed = rig.sim.pull_request_payload(FORK, pull.number, "closed", sender="carol")  # redelivered, late
    assert await rig.sim.deliver(f"{rig.bot_url}/webhook", "pull_request", closed, secret=SECRET) == 202
    await rig.settle()

    record = rig.gates.audit(FORK, pull.number)
    assert record is not None and record.state is AuditState.CLOSED
    assert record.waived_tiers == ("sluice/L2",) and [w.tier for w in record.waivers] == [CheckName.L2]


async def test_the_audit_record_names_the_head_merged_and_the_patch_stack_picked_onto(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    """A person pushes a fix to the ingestion PR and merges it: the record's head is theirs (its tiers and
    approvals are that head's), not the commit Sluice pushed; and it says what it was picked onto."""
    gate = "gate:\n  required_tiers: [l1]\n  auto_merge: false\n"
    rig = await start(aiohttp_server, tmp_path, database_url, gate=gate, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    trunk, sluices = rig.trunk(), rig.head(pull)
    opened = rig.gates.audit(FORK, pull.number)
    assert opened is not None and (opened.head, opened.fork_base) == (sluices, trunk)
    assert opened.patch_stack_commits is not None and opened.patch_stack_commits >= 1
    theirs = rig.sim.commit(FORK, pull.head_ref, {"docs/a.md": "fix\n"}, message="fix", pusher="carol")
    await rig.settle()
    rig.sim.finish_check(FORK, theirs, CheckName.L1.value, "success")
    await rig.settle()
    async with rig.ctx() as ctx:
        api = ctx.github.for_installation(rig.sim.install(FORK))
        await api.put(
            f"/repos/{FORK}/pulls/{pull.number}/merge", data={"sha": theirs, "merge_method": "rebase"}
        )
    await rig.settle()

    record = rig.gates.audit(FORK, pull.number)
    assert record is not None and record.state is AuditState.CLOSED
    assert record.head == theirs and {t.head_sha for t in record.tiers} == {theirs}
    assert (record.fork_base, record.patch_stack_commits) == (trunk, opened.patch_stack_commits)


async def test_a_head_that_moves_during_the_merge_fails_safely_with_409(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    head, trunk = rig.head(pull), rig.trunk()

    def someone_pushes() -> None:
        rig.sim.commit(FORK, pull.head_ref, {"docs/b.md": "b\n"}, message="late push", pusher="carol")

    rig.sim.before_next("PUT", r"/pulls/\d+/merge$", someone_pushes)
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    merges = [
        status for method, path, status in rig.sim.requests if method == "PUT" and path.endswith("/merge")
    ]
    assert merges == [409]  # once: no retry loop
    assert not pull.merged and rig.trunk() == trunk
    assert "Merge refused" in rig.gate(head)["output"]["summary"]
    assert any("the head moved" in body for body in rig.sim.comments[(FORK, pull.number)])
    assert rig.gates.audit(FORK, pull.number).state is AuditState.OPEN  # type: ignore[union-attr]


async def test_a_merge_github_answers_base_branch_was_modified_is_tried_again_and_goes_through(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    """GitHub's 405 while it recomputes a PR whose base just moved (a stacked PR merged before it) passes."""
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    moved = {"message": github_sim.BASE_MODIFIED, "documentation_url": "x"}
    rig.sim.fail_next("PUT", r"/pulls/\d+/merge$", 405, times=2, body=moved)
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    merges = [s for method, path, s in rig.sim.requests if method == "PUT" and path.endswith("/merge")]
    assert merges == [405, 405, 200] and pull.merged
    assert not any("did not merge" in body for body in rig.sim.comments[(FORK, pull.number)])


async def test_a_merge_whose_answer_was_lost_is_recorded_as_merged_not_refused(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    """GitHub merged, then answered 502: the retried PUT gets 405 "not mergeable" (it is merged). Sluice
    reads the PR back: merged at the head it judged, so it is its merge, with its tag and closed record."""
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    rig.sim.fail_after_next("PUT", r"/pulls/\d+/merge$", 502)
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    merges = [s for method, path, s in rig.sim.requests if method == "PUT" and path.endswith("/merge")]
    assert merges == [502, 405] and pull.merged
    assert not any("did not merge" in body for body in rig.sim.comments[(FORK, pull.number)])
    assert rig.gate(head)["conclusion"] == "success"
    record = rig.gates.audit(FORK, pull.number)
    assert record is not None and record.state is AuditState.CLOSED and record.merge_sha == rig.trunk()


async def test_a_refused_merge_is_said_once_and_tried_again_only_when_something_changes(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    protected = {"message": 'Required status check "ci/extra" is expected.', "documentation_url": "x"}
    rig.sim.fail_next("PUT", r"/pulls/\d+/merge$", 405, times=2, body=protected)

    def merges() -> list[int]:
        return [
            status for method, path, status in rig.sim.requests if method == "PUT" and path.endswith("/merge")
        ]

    def refusals() -> list[str]:
        bodies = [c["body"] for c in rig.sim.comment_objects(FORK, pull.number)]
        return [b for b in bodies if "did not merge" in b]

    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    assert merges() == [405] and len(refusals()) == 1 and "ci/extra" in refusals()[0]
    assert rig.gate(head)["conclusion"] == "failure"

    rig.sim.review(FORK, pull.number, user="carol", state="COMMENTED")  # an event that changes nothing
    await rig.settle()
    assert merges() == [405] and len(refusals()) == 1
    assert "Merge refused" in rig.gate(head)["output"]["summary"]

    await asyncio.sleep(1.1)  # GitHub's completed_at is to the second
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")  # L1 completes again: tried again
    await rig.settle()
    assert merges() == [405, 405] and len(refusals()) == 1  # the same refusal: no second comment

    rig.sim.add_team_member("meta/everyone", "bob")
    rig.sim.set_permission(FORK, "bob", "write")  # an approval counts only with write access
    rig.sim.review(FORK, pull.number, user="bob", state="APPROVED")  # a new approval: tried again
    await rig.settle()
    assert merges() == [405, 405, 200] and pull.merged


async def test_consecutive_failed_ingestions_pause_ingestion_until_resumed(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    gate = "gate:\n  required_tiers: [l1]\n  pause_after_failures: 2\n"
    rig = await start(aiohttp_server, tmp_path, database_url, gate=gate, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    first = rig.head(pull)
    rig.sim.finish_check(FORK, first, CheckName.L1.value, "failure")
    await rig.settle()
    rig.sim.finish_check(
        FORK, first, CheckName.L1.value, "failure"
    )  # the same failure, judged again: still one
    await rig.settle()
    assert rig.gates.consecutive_failures(FORK) == 1 and rig.gates.paused(FORK) is None

    rig.sim.commit(UPSTREAM, "main", {"docs/c.md": "c\n"}, message="docs: more")
    await rig.settle()
    second = rig.head(pull)
    assert second != first
    rig.sim.finish_check(FORK, second, CheckName.L1.value, "failure")
    await rig.settle()
    assert rig.gates.paused(FORK) is not None
    assert any("paused automatic ingestion" in body for body in rig.sim.comments[(FORK, pull.number)])

    rig.sim.commit(UPSTREAM, "main", {"docs/d.md": "d\n"}, message="docs: even more")
    await rig.settle()
    assert rig.head(pull) == second  # paused: nothing ingested

    async with rig.ctx() as ctx:
        await gatekeeping.resume(ctx, FORK, by="lead")  # and ingests at once
    await rig.settle()
    assert rig.head(pull) != second and rig.gates.consecutive_failures(FORK) == 0


async def test_resume_merges_a_pr_whose_gate_passed_while_the_fork_was_paused(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    """Nothing else judges that gate again: its tiers all passed, and no review or push comes."""
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    async with rig.ctx() as ctx:
        await gatekeeping.pause(ctx, FORK, by="lead", reason="release week")
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    assert rig.gate(head)["conclusion"] == "success" and not pull.merged
    assert "paused (release week); `/resume` lifts it" in rig.gate(head)["output"]["summary"]
    async with rig.ctx() as ctx:
        outcomes = await gatekeeping.resume(ctx, FORK, by="lead")
    assert outcomes == {pull.number: Outcome.MERGED} and pull.merged
    await rig.settle()
    assert rig.gates.paused(FORK) is None


async def test_a_failure_of_a_pr_stacked_on_another_ingestion_pr_is_not_counted_by_the_throttle(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    """A stacked PR holds the commits of the PR below it: one culprit there fails every PR of the stack, and
    counting each would trip the throttle on one failure."""
    gate = "gate:\n  required_tiers: [l1]\n  pause_after_failures: 1\n"
    rig = await start(aiohttp_server, tmp_path, database_url, gate=gate, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    rig.sim.git(FORK, "update-ref", "refs/heads/sluice/ingest/bundle-below", rig.trunk())
    pull.base_ref = "sluice/ingest/bundle-below"  # as if it built on another ingestion PR
    rig.sim.finish_check(FORK, rig.head(pull), CheckName.L1.value, "failure")
    await rig.settle()
    assert rig.gates.consecutive_failures(FORK) == 0 and rig.gates.paused(FORK) is None
    assert rig.gate(rig.head(pull))["conclusion"] == "failure"  # the gate still says L1 failed

    pull.base_ref = "main"  # on trunk, the same failure counts (and one pauses, as configured)
    rig.sim.finish_check(FORK, rig.head(pull), CheckName.L1.value, "failure")
    await rig.settle()
    assert rig.gates.consecutive_failures(FORK) == 1 and rig.gates.paused(FORK) is not None


async def test_a_hold_keeps_an_open_gate_from_merging_until_released(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    async with rig.ctx() as ctx:
        assert (
            await gatekeeping.hold(ctx, FORK, pull.number, by="rm", reason="release freeze")
            is Outcome.WAITING
        )
        rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
        await rig.settle()
        assert not pull.merged and "held by @rm: release freeze" in rig.gate(head)["output"]["summary"]
        assert await gatekeeping.unhold(ctx, FORK, pull.number) is Outcome.MERGED
    assert pull.merged and rig.trunk() != head  # rebased: new commits on trunk


async def test_a_draft_merges_only_once_marked_ready_for_review(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    """GitHub refuses to merge a draft (405): an open gate leaves it, saying so, until it is marked ready."""
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    rig.sim.set_draft(FORK, pull.number, True, user="rm")
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    gate = rig.gate(head)
    assert not pull.merged and gate["conclusion"] == "success"  # open, not failed by a refused merge
    assert (
        "It is a draft: Sluice merges it once someone marks it ready for review." in gate["output"]["summary"]
    )
    rig.sim.set_draft(FORK, pull.number, False, user="rm")
    await rig.settle()
    assert pull.merged


async def test_an_open_gate_that_waits_again_shows_it_on_a_new_check_run(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    """GitHub never takes a completed check run back to in progress: a gate that passed and then waits again
    (a hold, a lost approval, a re-run) says so on a new run, or the PR would stay green while it is held."""
    gate = "gate:\n  required_tiers: [l1]\n  auto_merge: false\n"
    rig = await start(aiohttp_server, tmp_path, database_url, gate=gate, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    opened = rig.gate(head)
    assert opened["conclusion"] == "success"
    async with rig.ctx() as ctx:
        await gatekeeping.hold(ctx, FORK, pull.number, by="rm", reason="release freeze")
        await rig.settle()
        held = rig.gate(head)
        assert held["id"] != opened["id"] and (held["status"], held["conclusion"]) == ("in_progress", None)
        assert "held by @rm: release freeze" in held["output"]["summary"]
        assert await gatekeeping.unhold(ctx, FORK, pull.number) is Outcome.OPEN
    await rig.settle()
    assert (rig.gate(head)["id"], rig.gate(head)["conclusion"]) == (held["id"], "success")  # in place again
    assert not pull.merged  # auto_merge is off


async def test_a_check_run_another_app_names_like_a_tier_does_not_count(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=False)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    # A workflow with `checks: write` (GitHub Actions' App) posts its own `sluice/L1`, passed.
    ours = next(r for r in reversed(rig.sim.check_runs[FORK]) if r["name"] == CheckName.L1.value)
    forged = {**ours, "id": ours["id"] + 10_000, "app": {"id": 15368, "slug": "github-actions"}}
    forged |= {"status": "completed", "conclusion": "success"}
    rig.sim.check_runs[FORK].append(forged)
    rig.sim.finish_check(FORK, head, CheckName.L2.value, "neutral")  # an event: the gate judges again
    await rig.settle()
    assert not pull.merged and rig.gate(head)["conclusion"] is None
    rig.sim.check_runs[FORK].remove(forged)
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")  # Sluice's own L1 passes
    await rig.settle()
    assert pull.merged


async def test_an_approve_command_counts_for_the_head_it_was_given_on(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=True)
    teardown.append(rig)
    pull = rig.pull()
    rig.sim.finish_check(FORK, rig.head(pull), CheckName.L1.value, "success")
    await rig.settle()
    rig.sim.add_team_member("meta/compiler", "alice")
    rig.sim.set_permission(FORK, "alice", "write")
    async with rig.ctx() as ctx:
        assert await gatekeeping.approve(ctx, FORK, pull.number, login="mallory") is Outcome.WAITING
        assert await gatekeeping.approve(ctx, FORK, pull.number, login="alice") is Outcome.MERGED
    closed = rig.gates.audit(FORK, pull.number)
    assert closed is not None and [(a.login, a.source) for a in closed.approvals] == [("alice", "command")]


@pytest.mark.parametrize("permission", ["read", "triage", "none"])
async def test_a_code_owners_approval_counts_only_with_write_access(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig], permission: str
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=True)
    teardown.append(rig)
    pull = rig.pull()
    head = rig.head(pull)
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    rig.sim.add_team_member("meta/compiler", "alice")  # still in the owning team, her access taken away
    if permission != "none":
        rig.sim.set_permission(FORK, "alice", permission)
    rig.sim.review(FORK, pull.number, user="alice", state="APPROVED")
    await rig.settle()
    assert not pull.merged and rig.gate(head)["conclusion"] is None
    assert "@alice approved without write access" in rig.gate(head)["output"]["summary"]
    async with rig.ctx() as ctx:  # an `/approve` recorded while she had access counts no more than a review
        assert await gatekeeping.approve(ctx, FORK, pull.number, login="alice") is Outcome.WAITING
    rig.sim.set_permission(FORK, "alice", "maintain")
    rig.sim.review(FORK, pull.number, user="carol", state="COMMENTED")  # any review re-evaluates the gate
    await rig.settle()
    assert pull.merged


@pytest.mark.parametrize("who", ["sluice", "a person"])
async def test_a_rebase_merge_rolls_back_to_trunk_however_few_commits_github_lists(
    aiohttp_server: Any,
    tmp_path: Path,
    database_url: str,
    teardown: list[Rig],
    who: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GitHub lists at most 250 of a PR's commits (here 2, so a short PR shows it): the rollback point of a
    rebase merge is counted from the PR's own `commits`, never from that list."""
    monkeypatch.setattr(github_sim, "PULL_COMMITS_LISTED", 2)
    gate = f"gate:\n  required_tiers: [l1]\n  auto_merge: {'true' if who == 'sluice' else 'false'}\n"
    rig = await start(aiohttp_server, tmp_path, database_url, gate=gate, semantic=False, docs=3)
    teardown.append(rig)
    pull = rig.pull()
    head, trunk = rig.head(pull), rig.trunk()
    assert int(rig.sim.git(FORK, "rev-list", "--count", f"{trunk}..{head}")) > 2
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    if who == "a person":
        async with rig.ctx() as ctx:
            api = ctx.github.for_installation(rig.sim.install(FORK))
            await api.put(
                f"/repos/{FORK}/pulls/{pull.number}/merge", data={"sha": head, "merge_method": "rebase"}
            )
        await rig.settle()
    assert pull.merged
    tag = "sluice/rollback/" + pull.head_ref.removeprefix(BRANCH_PREFIX)
    assert rig.sim.git(FORK, "rev-parse", f"refs/tags/{tag}") == trunk
    closed = rig.gates.audit(FORK, pull.number)
    assert closed is not None and (closed.merge_sha, closed.rollback_sha) == (rig.trunk(), trunk)


@pytest.mark.parametrize("method", ["merge", "squash", "rebase"])
async def test_a_pr_a_person_merges_gets_its_rollback_tag_and_closed_record(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig], method: str
) -> None:
    gate = "gate:\n  required_tiers: [l1]\n  auto_merge: false\n"
    rig = await start(aiohttp_server, tmp_path, database_url, gate=gate, semantic=False, docs=3)
    teardown.append(rig)
    pull = rig.pull()
    head, trunk = rig.head(pull), rig.trunk()
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    assert (
        rig.gate(head)["conclusion"] == "success" and "a person merges" in rig.gate(head)["output"]["summary"]
    )
    assert not pull.merged
    async with rig.ctx() as ctx:  # the maintainer presses the button
        api = ctx.github.for_installation(rig.sim.install(FORK))
        await api.put(f"/repos/{FORK}/pulls/{pull.number}/merge", data={"sha": head, "merge_method": method})
    await rig.settle()
    tag = "sluice/rollback/" + pull.head_ref.removeprefix(BRANCH_PREFIX)
    assert rig.sim.git(FORK, "rev-parse", f"refs/tags/{tag}") == trunk
    closed = rig.gates.audit(FORK, pull.number)
    assert closed is not None and closed.state is AuditState.CLOSED
    assert (closed.merge_sha, closed.rollback_sha) == (rig.trunk(), trunk)


@pytest.mark.parametrize("how", ["merged", "closed"])
async def test_an_ingestion_pr_a_person_ends_while_paused_leaves_the_open_ingestions_at_once(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig], how: str
) -> None:
    """Paused, Sluice runs no ingestion pass to notice: the PR's `closed` event closes its record, so
    `/status`, the status page and `open_ingestions` stop counting it; a closed PR's unit, still planned,
    gets a new PR once ingestion resumes."""
    gate = "gate:\n  required_tiers: [l1]\n  auto_merge: false\n"
    rig = await start(aiohttp_server, tmp_path, database_url, gate=gate, semantic=False, docs=3)
    teardown.append(rig)
    pull, registry = rig.pull(), Registry(rig.store)
    unit = pull.head_ref.removeprefix(BRANCH_PREFIX)
    assert [(r.id, r.pr_number, r.state) for r in registry.ingestions(FORK)] == [(unit, pull.number, "open")]
    async with rig.ctx() as ctx:
        await gatekeeping.pause(ctx, FORK, by="lead", reason="release week")
        api = ctx.github.for_installation(rig.sim.install(FORK))
        if how == "merged":
            data = {"sha": rig.head(pull), "merge_method": "rebase"}
            await api.put(f"/repos/{FORK}/pulls/{pull.number}/merge", data=data)
        else:
            await api.patch(f"/repos/{FORK}/pulls/{pull.number}", data={"state": "closed"})
    await rig.settle()
    assert [(r.id, r.pr_number, r.state) for r in registry.ingestions(FORK)] == [
        (unit, pull.number, "closed")
    ]
    (view,) = fork_views(rig.store)
    assert view.open_ingestions == []

    async with rig.ctx() as ctx:
        await gatekeeping.resume(ctx, FORK, by="lead")
    await rig.settle()
    pulls = [i for i in rig.sim.issues[FORK].values() if i.is_pull and i.state == "open"]
    if how == "merged":  # its commits are on trunk: nothing left to ingest
        assert pulls == [] and registry.ingestions(FORK, state="open") == []
    else:  # still planned: a new PR, whose record replaces the closed one
        (again,) = pulls
        assert again.number != pull.number and again.head_ref == pull.head_ref
        assert [(r.id, r.pr_number, r.state) for r in registry.ingestions(FORK)] == [
            (unit, again.number, "open")
        ]
