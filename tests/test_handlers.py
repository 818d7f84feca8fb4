"""Handlers one by one, against the simulator: what each event starts, records or refuses."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import re
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from gidgethub.routing import Router
from pydantic import BaseModel, ConfigDict

from bot.app import worker as worker_module
from bot.app.clock import utc_now
from bot.app.context import Context
from bot.app.routing import Routes
from bot.app.worker import Rejected, Worker, job_backoff
from bot.core.config import ConfigError, parse_config_bytes
from bot.core.tiers import Level, RunState, TierRun
from bot.db.jobs import Job, JobQueue, JobState
from bot.db.registry import Fork, Registry
from bot.db.store import Store
from bot.flows.risk_files import DEFAULT_MODEL_PATH
from bot.git import mirror as mirror_module
from bot.github.client import GitHubClient
from handlers import ROUTES, poll
from handlers import register as register_module
from tests.support.github_sim import ZERO_SHA, GitHubSim
from tests.support.rig import sim_with_fork

UPSTREAM = "triton-lang/triton"
FORK = "meta/triton"
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
WORKFLOW_TEMPLATES = Path(__file__).parent.parent / "deploy" / "workflows"


@pytest.fixture
async def ctx(aiohttp_server: Any, tmp_path: Path, store: Store) -> AsyncIterator[Context]:
    sim, settings = await sim_with_fork(aiohttp_server, tmp_path, upstream=UPSTREAM, fork=FORK)
    async with aiohttp.ClientSession() as session:
        github = GitHubClient(  # the simulator checks JWTs against the time of day, as GitHub does
            session,
            app_id=sim.app_id,
            private_key=settings.private_key_pem(),
            base_url=settings.github_url,
            clock=utc_now,
        )
        context = Context(
            settings, store, JobQueue(store), Registry(store), github, "sluice[bot]", lambda: NOW
        )
        context.sim = sim  # type: ignore[attr-defined]  # the tests reach the simulator through the context
        yield context


def sim_of(ctx: Context) -> GitHubSim:
    sim: GitHubSim = ctx.sim  # type: ignore[attr-defined]
    return sim


def job(kind: str, payload: dict[str, Any], *, key: str | None = None) -> Job:
    return Job(id=1, kind=kind, key=key, payload=payload, attempts=1, delivery_id="d-1")


async def dispatch(ctx: Context, kind: str, payload: dict[str, Any]) -> None:
    """Run a job as the worker does: its payload parsed into its kind's model, then its routed callbacks."""
    await ROUTES.dispatch(job(kind, payload), ctx=ctx)


def queued(ctx: Context) -> list[tuple[str, str | None]]:
    found = []
    while (claimed := ctx.queue.claim("t", lease=dt.timedelta(minutes=1), now=NOW)) is not None:
        found.append((claimed.kind, claimed.key))
        ctx.queue.complete(claimed.id, "t", now=NOW)
    return found


def fork_record(ctx: Context, *, upstream_repo: str | None = UPSTREAM, installation_id: int = 1) -> Fork:
    sim = sim_of(ctx)
    record = Fork(
        repo=FORK,
        installation_id=installation_id,
        branch="main",
        upstream_url=f"{ctx.web_url}/{UPSTREAM}.git",
        upstream_branch="main",
        upstream_repo=upstream_repo,
        upstream_seen=None,
    )
    ctx.registry.register_fork(record, at=NOW)
    assert sim.repos[FORK]
    return record


def push_payload(
    ctx: Context, repo: str, ref: str, *, sender: str = "octocat", installation_id: int = 1
) -> dict[str, Any]:
    sim = sim_of(ctx)
    after = sim.git(repo, "rev-parse", "main").strip()
    payload = sim.push_payload(repo, ref, ZERO_SHA, after, pusher=sender)
    payload["installation"] = {"id": installation_id}
    payload["sender"] = {"login": sender}
    return payload


# ------------------------------------------------------------------ push


async def test_upstream_push_requests_an_ingestion_of_every_fork_tracking_it(ctx: Context) -> None:
    fork_record(ctx)
    ctx.registry.add_repos(1, [UPSTREAM])
    await dispatch(ctx, "push", push_payload(ctx, UPSTREAM, "refs/heads/main"))
    await dispatch(ctx, "push", push_payload(ctx, UPSTREAM, "refs/heads/main"))  # coalesces
    assert queued(ctx) == [("ingest", FORK)]


async def test_fork_trunk_push_requests_an_ingestion_even_when_sluice_merged(ctx: Context) -> None:
    fork_record(ctx)
    await dispatch(ctx, "push", push_payload(ctx, FORK, "refs/heads/main", sender="sluice[bot]"))
    assert queued(ctx) == [("ingest", FORK)]


@pytest.mark.parametrize(
    ("repo", "ref", "sender"),
    [
        pytest.param(
            FORK, "refs/heads/sluice/ingest/bundle-abc", "octocat", id="ingestion-branch-by-a-person"
        ),
        pytest.param(
            FORK, "refs/heads/sluice/ingest/bundle-abc", "sluice[bot]", id="ingestion-branch-by-sluice"
        ),
        pytest.param(FORK, "refs/heads/feature", "octocat", id="fork-side-branch"),
        pytest.param(UPSTREAM, "refs/heads/release/3.4", "octocat", id="other-upstream-branch"),
        pytest.param(UPSTREAM, "refs/tags/v3.4.0", "octocat", id="tag"),
        pytest.param(UPSTREAM, "refs/heads/main", "sluice[bot]", id="sluice-pushing-upstream"),
    ],
)
async def test_pushes_that_change_no_plan_start_nothing(
    ctx: Context, repo: str, ref: str, sender: str
) -> None:
    fork_record(ctx)
    await dispatch(ctx, "push", push_payload(ctx, repo, ref, sender=sender))
    assert queued(ctx) == []


async def test_a_repo_is_checked_for_a_config_when_first_seen_or_when_its_config_changes(
    ctx: Context,
) -> None:
    fork_record(ctx)
    installation_id = sim_of(ctx).install(UPSTREAM)
    payload = push_payload(ctx, UPSTREAM, "refs/heads/main", installation_id=installation_id + 1)
    await dispatch(ctx, "push", payload)  # GitHub does not confirm that installation: not recorded
    assert queued(ctx) == [("ingest", FORK)] and ctx.registry.installation_of(UPSTREAM) is None
    payload = push_payload(ctx, UPSTREAM, "refs/heads/main", installation_id=installation_id)
    await dispatch(ctx, "push", payload)  # an installed repo Sluice had not seen: is it a fork?
    assert queued(ctx) == [("register", UPSTREAM), ("ingest", FORK)]
    assert ctx.registry.installation_of(UPSTREAM) == installation_id
    await dispatch(ctx, "push", payload)  # seen, not a fork, config untouched: just the forks
    assert queued(ctx) == [("ingest", FORK)]
    payload["commits"][-1]["added"].append(".github/sluice.yml")
    await dispatch(ctx, "push", payload)
    assert queued(ctx) == [("register", UPSTREAM), ("ingest", FORK)]
    fork_payload = push_payload(ctx, FORK, "refs/heads/main")
    fork_payload["commits"][-1]["modified"].append(".github/sluice.yml")
    await dispatch(ctx, "push", fork_payload)  # the fork's own config changed: register again
    assert queued(ctx) == [("register", FORK)]


@pytest.mark.parametrize(
    ("change", "registers"),
    [
        ({}, False),
        ({"forced": True}, True),  # back past a change no listed commit holds
        ({"commits": [{"added": [], "modified": [], "removed": []}] * 2048}, True),  # the list is cut
        ({"commits": [{"added": [f"f{n}" for n in range(3000)], "modified": [], "removed": []}]}, True),
    ],
)
async def test_a_push_whose_lists_cannot_tell_may_have_changed_the_config(
    ctx: Context, change: dict[str, Any], registers: bool
) -> None:
    fork_record(ctx)
    payload = push_payload(ctx, FORK, "refs/heads/main") | change
    await dispatch(ctx, "push", payload)
    assert queued(ctx) == ([("register", FORK)] if registers else [("ingest", FORK)])


# ------------------------------------------------------------------ installations and registration


def installation_payload(action: str, installation_id: int, repos: list[str]) -> dict[str, Any]:
    return {
        "action": action,
        "installation": {"id": installation_id, "account": {"login": "meta"}},
        "repositories": [{"full_name": r} for r in repos],
    }


async def test_installation_lifecycle_records_and_forgets(ctx: Context) -> None:
    sim = sim_of(ctx)
    inst = sim.install(FORK)
    await dispatch(ctx, "installation", installation_payload("created", inst, [FORK]))
    assert ctx.registry.installed_repos(inst) == [FORK]
    assert queued(ctx) == [("register", FORK)]
    fork_record(ctx, installation_id=inst)
    removed = {
        "action": "removed",
        "installation": {"id": inst},
        "repositories_removed": [{"full_name": FORK}],
    }
    await dispatch(ctx, "installation_repositories", removed)  # GitHub still has it: kept
    assert ctx.registry.installed_repos(inst) == [FORK] and ctx.registry.fork(FORK) is not None
    sim.uninstall(FORK)
    await dispatch(ctx, "installation_repositories", removed)
    assert ctx.registry.installed_repos(inst) == [] and ctx.registry.fork(FORK) is None
    added = {"action": "added", "installation": {"id": inst}, "repositories_added": [{"full_name": FORK}]}
    sim.install(FORK)
    await dispatch(ctx, "installation_repositories", added)
    assert queued(ctx) == [("register", FORK)]
    deleted = installation_payload("deleted", inst, [FORK])
    await dispatch(ctx, "installation", deleted)  # GitHub still has the installation: kept
    assert ctx.registry.installation_of(FORK) == inst
    sim.delete_installation(inst)
    await dispatch(ctx, "installation", deleted)
    assert ctx.registry.installed_repos(inst) == [] and ctx.registry.installation_of(FORK) is None


async def test_register_reads_the_config_and_requests_the_first_ingestion(ctx: Context) -> None:
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    config = f"upstream:\n  url: {ctx.web_url}/{UPSTREAM}.git\nfork:\n  branch: main\n"
    sim.commit(FORK, "main", {".github/sluice.yml": config}, message="sluice config")
    ctx.registry.add_repos(installation_id, [FORK])
    await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    fork = ctx.registry.fork(FORK)
    assert fork is not None and fork.upstream_repo == UPSTREAM and fork.branch == "main"
    assert queued(ctx) == [("ingest", FORK)]
    (run,) = [r for r in sim.check_runs[FORK] if r["name"] == "sluice/config"]
    assert run["conclusion"] == "success" and "triton-lang/triton" in run["output"]["summary"]
    # the tiers run as the fork's workflows (the GitHub backend), and trunk has none yet: it says so
    summary = run["output"]["summary"]
    assert "**Tier workflows** (the tiers may not run where the config says)" in summary
    assert "`.github/workflows/sluice-l3.yml` is not on trunk, so L3 cannot run" in summary


async def test_a_trunk_that_is_not_the_default_branch_governs_with_its_own_config(ctx: Context) -> None:
    """The default branch's file names another trunk: the file there is the one the gate, the tiers and
    ingestion read, so registration reads it too, and wants it there."""
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    url = f"upstream:\n  url: {ctx.web_url}/{UPSTREAM}.git\n"
    sim.commit(FORK, "main", {".github/sluice.yml": url + "fork:\n  branch: xpu\n"}, message="config")
    ctx.registry.add_repos(installation_id, [FORK])
    sim.commit(
        FORK,
        "xpu",
        {"x.txt": "x\n"},
        message="trunk without the file",
        parent=sim.git(FORK, "rev-parse", "main^"),
    )
    with pytest.raises(
        Rejected, match=re.escape("`fork.branch` names `xpu`, which has no .github/sluice.yml")
    ):
        await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    assert ctx.registry.fork(FORK) is None
    trunk_config = url + "fork:\n  branch: xpu\n" + "strategy: merge\n"
    sim.commit(FORK, "xpu", {".github/sluice.yml": trunk_config}, message="config on trunk")
    await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    fork = ctx.registry.fork(FORK)
    assert fork is not None and fork.branch == "xpu"
    (run,) = [
        r for r in sim.check_runs[FORK] if r["name"] == "sluice/config" and r["conclusion"] == "success"
    ]
    assert run["head_sha"] == sim.git(FORK, "rev-parse", "xpu")  # told where the file was read
    default_push = push_payload(ctx, FORK, "refs/heads/main")  # a config change on the default branch
    default_push["commits"][-1]["modified"].append(".github/sluice.yml")
    await dispatch(ctx, "push", default_push)
    assert ("register", FORK) in queued(ctx)


async def test_a_fixed_config_starts_the_tiers_of_the_prs_that_never_got_one(ctx: Context) -> None:
    """A PR opened while the config was broken got no tier run: registering the fixed config starts it,
    and leaves alone a PR whose head has one, a PR into another branch and the ingestion PRs."""
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    config = f"upstream:\n  url: {ctx.web_url}/{UPSTREAM}.git\n"
    sim.commit(FORK, "main", {".github/sluice.yml": config}, message="sluice config")
    trunk = sim.git(FORK, "rev-parse", "main")
    sim.commit(FORK, "release", {"r.txt": "r\n"}, message="release", parent=trunk)
    opened = {}
    for branch, base in (
        ("waiting", "main"),
        ("started", "main"),
        ("sluice/ingest/bundle-1", "main"),
        ("elsewhere", "release"),
    ):
        sim.commit(FORK, branch, {f"{branch}.txt": "x\n"}, message=branch, parent=trunk)
        opened[branch] = sim.open_pull(FORK, head=branch, base=base, title=branch, user="dev")
    started = opened["started"]
    run = TierRun(FORK, started["number"], "", Level.L1, started["head"]["sha"], 1, RunState.DISPATCHED, NOW)
    assert ctx.tier_runs.add(run) is not None
    ctx.registry.add_repos(installation_id, [FORK])
    await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    assert queued(ctx) == [("ingest", FORK), ("tiers", f"{FORK}#{opened['waiting']['number']}")]


async def test_only_an_edit_that_moves_a_pr_onto_fork_trunk_asks_for_its_tiers(ctx: Context) -> None:
    sim = sim_of(ctx)
    fork_record(ctx, installation_id=sim.install(FORK))
    trunk = sim.git(FORK, "rev-parse", "main")
    sim.commit(FORK, "feature", {"a.txt": "a\n"}, message="a", parent=trunk)
    number = int(sim.open_pull(FORK, head="feature", base="main", title="A", user="dev")["number"])
    edited = sim.pull_request_payload(FORK, number, "edited", sender="dev")
    await dispatch(ctx, "pull_request", edited | {"changes": {"title": {"from": "a"}}})
    await dispatch(ctx, "pull_request", edited | {"changes": {"body": {"from": "an old body"}}})
    assert queued(ctx) == []  # the same head, the same base: nothing to run again
    moved = {"base": {"ref": {"from": "dev"}, "sha": {"from": trunk}}}
    await dispatch(ctx, "pull_request", edited | {"changes": moved})
    assert queued(ctx) == [("tiers", f"{FORK}#{number}")]


async def test_register_says_nothing_of_tier_workflows_that_agree_with_the_config(ctx: Context) -> None:
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    config = f"upstream:\n  url: {ctx.web_url}/{UPSTREAM}.git\n"
    workflows = {
        f".github/workflows/{p.name}": p.read_text() for p in WORKFLOW_TEMPLATES.glob("sluice-l*.yml")
    }
    sim.commit(FORK, "main", {".github/sluice.yml": config, **workflows}, message="sluice config and tiers")
    ctx.registry.add_repos(installation_id, [FORK])
    await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    (run,) = [r for r in sim.check_runs[FORK] if r["name"] == "sluice/config"]
    assert run["conclusion"] == "success" and "Tier workflows" not in run["output"]["summary"]


async def test_a_repo_without_config_is_not_a_fork(ctx: Context) -> None:
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    ctx.registry.add_repos(installation_id, [FORK])
    await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    assert ctx.registry.fork(FORK) is None and queued(ctx) == []


async def test_a_broken_config_is_rejected_with_its_problems_and_registers_nothing(ctx: Context) -> None:
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    sim.commit(FORK, "main", {".github/sluice.yml": "stratgy: merge\n"}, message="typo")
    ctx.registry.add_repos(installation_id, [FORK])
    with pytest.raises(Rejected, match="stratgy"):
        await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    assert ctx.registry.fork(FORK) is None and queued(ctx) == []
    # the people who pushed it see why on the commit
    (run,) = [r for r in sim.check_runs[FORK] if r["name"] == "sluice/config"]
    assert run["conclusion"] == "failure" and run["head_sha"] == sim.git(FORK, "rev-parse", "main")
    assert "stratgy" in run["output"]["summary"] and "strategy" in run["output"]["summary"]


async def test_a_config_naming_a_file_on_sluices_machine_is_refused_and_nothing_reads_it(
    ctx: Context, tmp_path: Path
) -> None:
    """`risk.model: /abs/path` in a repository's config would make the service read its own files (another
    tenant's, its key): the App refuses it at registration, before any planning could open it."""
    secret = tmp_path / "private-key.pem"
    secret.write_text("-----BEGIN PRIVATE KEY-----\nnot for a fork to read\n")
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    config = f"upstream:\n  url: {ctx.web_url}/{UPSTREAM}.git\nrisk:\n  model: {secret}\n"
    sim.commit(FORK, "main", {".github/sluice.yml": config}, message="a model on the server")
    ctx.registry.add_repos(installation_id, [FORK])
    with pytest.raises(Rejected, match="a path on Sluice's own machine"):
        await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    assert ctx.registry.fork(FORK) is None and queued(ctx) == []
    (run,) = [r for r in sim.check_runs[FORK] if r["name"] == "sluice/config"]
    assert run["conclusion"] == "failure" and "commit the model to the fork" in run["output"]["summary"]
    assert "not for a fork to read" not in json.dumps(sim.check_runs[FORK])


LATIN_1_CONFIG = "recognition:\n  emergency_patterns: ['^Correctif urgent: réparation']\n".encode("latin-1")


async def test_a_config_that_is_not_utf8_is_refused_on_its_check_run_not_altered(ctx: Context) -> None:
    """Read with U+FFFD for the byte, the pattern was valid and matched no subject: registered, and the
    fork's emergency picks taken for regular ones, while the runners refused the same file."""
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    sim.commit(FORK, "main", {".github/sluice.yml": LATIN_1_CONFIG}, message="config in latin-1")
    ctx.registry.add_repos(installation_id, [FORK])
    with pytest.raises(Rejected, match="not UTF-8 text"):
        await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    assert ctx.registry.fork(FORK) is None and queued(ctx) == []
    (run,) = [r for r in sim.check_runs[FORK] if r["name"] == "sluice/config"]
    assert run["conclusion"] == "failure"
    assert ".github/sluice.yml:2: not UTF-8 text (byte 0xe9 at offset 57)" in run["output"]["summary"]


async def test_trunk_config_refuses_a_file_that_is_not_utf8(ctx: Context) -> None:
    """The gate, the tiers and the commands read trunk's file as register does."""
    fork = fork_record(ctx, installation_id=sim_of(ctx).install(FORK))
    sim_of(ctx).commit(FORK, "main", {".github/sluice.yml": LATIN_1_CONFIG}, message="config in latin-1")
    with pytest.raises(ConfigError, match=r"main:\.github/sluice\.yml:2: not UTF-8 text \(byte 0xe9"):
        await ctx.trunk_config(fork)


# ------------------------------------------------------------------ the poll loop


async def test_poll_requests_an_ingestion_once_per_upstream_move(ctx: Context) -> None:
    fork_record(ctx, upstream_repo=None)  # an upstream the App is not installed on: no webhooks
    assert await poll.poll_once(ctx) == [FORK]
    assert await poll.poll_once(ctx) == []  # nothing moved
    assert queued(ctx) == [("ingest", FORK)]
    sim_of(ctx).commit(UPSTREAM, "main", {"docs/a.md": "a\n"}, message="docs")
    assert await poll.poll_once(ctx) == [FORK]


@contextlib.contextmanager
def silent_host() -> Iterator[str]:
    """An HTTP host that takes every connection and never says a word: a git URL on it."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(listener.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/o/r.git"
    finally:
        listener.close()
        for connection in held:
            connection.close()


async def test_an_upstream_that_never_answers_holds_up_neither_the_poll_nor_the_other_forks(
    ctx: Context, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(mirror_module.NETWORK_TIMEOUT_S, "ls-remote", 2.0)
    fork_record(ctx, upstream_repo=None)
    with silent_host() as url, caplog.at_level(logging.WARNING, logger="sluice.poll"):
        quiet = Fork("a/quiet", 1, "main", url, "main", None, None)  # polled first: forks go by name
        ctx.registry.register_fork(quiet, at=NOW)
        assert await asyncio.wait_for(poll.poll_once(ctx), 60) == [FORK]
    assert queued(ctx) == [("ingest", FORK)]
    assert "for a/quiet failed: git ls-remote failed in the mirror: no answer within 2 s" in caplog.text


def follow_release(ctx: Context, *, upstream_repo: str | None) -> Fork:
    """The fork follows upstream's `release` branch (which upstream has, for now)."""
    sim_of(ctx).git(UPSTREAM, "branch", "release", "main")
    installed = fork_record(ctx, upstream_repo=upstream_repo, installation_id=sim_of(ctx).install(FORK))
    record = replace(installed, upstream_branch="release")
    ctx.registry.register_fork(record, at=NOW)
    return record


def config_runs(ctx: Context) -> list[dict[str, Any]]:
    return [r for r in sim_of(ctx).check_runs[FORK] if r["name"] == "sluice/config"]


async def test_a_polled_upstream_branch_that_is_gone_is_told_once_and_polled_on(ctx: Context) -> None:
    follow_release(ctx, upstream_repo=None)
    assert await poll.poll_once(ctx) == [FORK]
    sim_of(ctx).git(UPSTREAM, "branch", "-D", "release")
    assert await poll.poll_once(ctx) == [] and await poll.poll_once(ctx) == []
    (run,) = config_runs(ctx)  # once, not once a round
    assert (run["conclusion"], run["output"]["title"]) == ("failure", "The upstream branch is gone")
    assert "no branch `release` any more (git ls-remote finds none)" in run["output"]["summary"]
    assert run["head_sha"] == sim_of(ctx).git(FORK, "rev-parse", "main").strip()
    sim_of(ctx).git(UPSTREAM, "branch", "release", "main")  # back: ingested again
    assert await poll.poll_once(ctx) == [FORK]


async def test_deleting_the_upstream_branch_a_fork_follows_is_told_on_the_fork(ctx: Context) -> None:
    follow_release(ctx, upstream_repo=UPSTREAM)
    upstream_installation = sim_of(ctx).install(UPSTREAM)
    ctx.registry.add_repos(upstream_installation, [UPSTREAM])
    before = sim_of(ctx).git(UPSTREAM, "rev-parse", "release").strip()
    sim_of(ctx).git(UPSTREAM, "branch", "-D", "release")
    payload = sim_of(ctx).push_payload(UPSTREAM, "refs/heads/release", before, ZERO_SHA) | {
        "installation": {"id": upstream_installation},
        "sender": {"login": "octocat"},
    }
    await dispatch(ctx, "push", payload)
    (run,) = config_runs(ctx)
    assert run["conclusion"] == "failure" and "(@octocat deleted it)" in run["output"]["summary"]
    assert queued(ctx) == []


async def test_poll_skips_upstreams_that_send_webhooks(ctx: Context) -> None:
    fork_record(ctx)
    installation_id = sim_of(ctx).install(UPSTREAM)
    ctx.registry.add_repos(installation_id, [UPSTREAM])  # the App is installed upstream
    assert await poll.poll_once(ctx) == []


async def test_poll_asks_an_upstream_whose_installation_is_suspended_or_gone(ctx: Context) -> None:
    """A suspended installation sends no webhooks, and no event says when a suspension ends; one deleted
    while Sluice was down left its record behind. Either way the upstream is polled."""
    fork_record(ctx)
    installation_id = sim_of(ctx).install(UPSTREAM)
    ctx.registry.add_repos(installation_id, [UPSTREAM])
    sim_of(ctx).suspend(installation_id)
    assert await poll.poll_once(ctx) == [FORK]
    sim_of(ctx).commit(UPSTREAM, "main", {"docs/a.md": "a\n"}, message="docs")
    sim_of(ctx).delete_installation(installation_id)
    assert await poll.poll_once(ctx) == [FORK]


# ------------------------------------------------------------------ the worker


class NoPayload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def routes_with(router: Router, *kinds: str) -> Routes:
    """Sluice's routes plus a test router's callbacks for `kinds`, jobs that carry an empty payload."""
    return Routes(Router(ROUTES.router, router), {**ROUTES.payloads, **dict.fromkeys(kinds, NoPayload)})


async def test_worker_outcomes(ctx: Context) -> None:
    router = Router()

    @router.register("flaky")
    async def flaky(event: NoPayload, *, ctx: Context, job: Job) -> None:
        raise ConnectionError("GitHub went away")

    @router.register("refusing")
    async def refusing(event: NoPayload, *, ctx: Context, job: Job) -> None:
        raise Rejected("bad config", "fix it")

    worker = Worker(ctx, routes_with(router, "flaky", "refusing"), name="w")
    lease = dt.timedelta(minutes=5)
    for kind in ("flaky", "refusing", "no-such-kind"):
        ctx.queue.enqueue(kind, {}, key=None, now=NOW)
    for _ in range(3):
        claimed = ctx.queue.claim("w", lease=lease, now=NOW)
        assert claimed is not None
        await worker.run_job(claimed)
    counts = ctx.queue.counts()
    assert counts[JobState.QUEUED.value] == 1  # flaky: retried later
    assert counts[JobState.FAILED.value] == 2  # rejected and unknown kind: for good, at once
    assert ctx.queue.claim("w", lease=lease, now=NOW) is None  # the retry waits its back-off
    assert ctx.queue.claim("w", lease=lease, now=NOW + dt.timedelta(seconds=6)) is not None


async def test_a_worker_shutting_down_mid_job_hands_it_back_at_once(ctx: Context) -> None:
    started = asyncio.Event()
    router = Router()

    @router.register("slow")
    async def slow(event: NoPayload, *, ctx: Context, job: Job) -> None:
        started.set()
        await asyncio.sleep(3600)

    worker = Worker(ctx, routes_with(router, "slow"), name="w")
    ctx.queue.enqueue("slow", {}, key=FORK, now=NOW)
    claimed = ctx.queue.claim("w", lease=dt.timedelta(minutes=5), now=NOW)
    assert claimed is not None
    task = asyncio.create_task(worker.run_job(claimed))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    again = ctx.queue.claim("w2", lease=dt.timedelta(minutes=5), now=NOW)  # no waiting for the lease
    assert again is not None and again.id == claimed.id
    assert again.attempts == 1  # the shutdown gave its attempt back: restarts never use up a job's retries


async def test_a_worker_waits_out_a_database_failure_and_goes_on(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart or failover of the database fails a claim: the worker logs it, waits and claims again; it
    never ends while the service runs (the queue would stop with /healthz still answering ok)."""
    ran = asyncio.Event()
    router = Router()

    @router.register("after-the-blip")
    async def after(event: NoPayload, *, ctx: Context, job: Job) -> None:
        ran.set()

    claim, failures = ctx.queue.claim, [ConnectionError("server closed the connection unexpectedly")] * 2

    def flaky_claim(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return claim(*args, **kwargs)

    monkeypatch.setattr(ctx.queue, "claim", flaky_claim)
    monkeypatch.setattr(worker_module, "QUEUE_RETRY_S", (0.01,))
    ctx.queue.enqueue("after-the-blip", {}, key=None, now=NOW)
    stop = asyncio.Event()
    running = asyncio.create_task(Worker(ctx, routes_with(router, "after-the-blip"), name="w").run(stop))
    await asyncio.wait_for(ran.wait(), 10)
    stop.set()
    await asyncio.wait_for(running, 10)
    assert failures == [] and ctx.queue.counts()[JobState.DONE.value] == 1


async def test_a_heartbeat_the_database_fails_is_tried_again_so_the_lease_holds(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    router = Router()

    @router.register("long")
    async def long(event: NoPayload, *, ctx: Context, job: Job) -> None:
        await asyncio.sleep(1.0)

    beat, beats = ctx.queue.heartbeat, []

    def flaky_beat(*args: Any, **kwargs: Any) -> Any:
        beats.append(len(beats))
        if len(beats) == 1:
            raise ConnectionError("server closed the connection unexpectedly")
        return beat(*args, **kwargs)

    monkeypatch.setattr(ctx.queue, "heartbeat", flaky_beat)
    worker = Worker(ctx, routes_with(router, "long"), name="w")
    worker.lease = dt.timedelta(seconds=0.6)
    ctx.queue.enqueue("long", {}, key=FORK, now=NOW)
    claimed = ctx.queue.claim("w", lease=worker.lease, now=NOW)
    assert claimed is not None
    await worker.run_job(claimed)
    assert len(beats) >= 3  # the failed beat, then beats again: the lease went on being extended
    assert ctx.queue.counts()[JobState.DONE.value] == 1


def test_the_backoff_is_bounded_whatever_the_attempts() -> None:
    assert [job_backoff(n).total_seconds() for n in (1, 2, 3, 4)] == [5, 20, 80, 320]
    assert job_backoff(50) == job_backoff(8) == dt.timedelta(seconds=5 * 4**7)
    assert NOW + job_backoff(10_000) > NOW  # no OverflowError


@pytest.mark.parametrize(
    "url", ["file:///etc", "/srv/git/secret.git", "ssh://git@internal/x.git", "git@host:x.git"]
)
async def test_a_config_whose_upstream_is_not_https_is_rejected(ctx: Context, url: str) -> None:
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    sim.commit(FORK, "main", {".github/sluice.yml": f"upstream:\n  url: {url}\n"}, message="local upstream")
    ctx.registry.add_repos(installation_id, [FORK])
    with pytest.raises(Rejected, match="not an https:// URL"):
        await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    assert ctx.registry.fork(FORK) is None


async def test_register_parses_the_config_off_the_event_loop(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parsing a large file takes seconds: in a thread, so the webhooks, heartbeats and other jobs go on."""
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    sim.commit(FORK, "main", {".github/sluice.yml": "stratgy: merge\n"}, message="a config")
    ctx.registry.add_repos(installation_id, [FORK])
    parsed_where: list[str] = []

    def parse(*args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a worker thread runs no event loop
            parsed_where.append("a thread")
        else:
            parsed_where.append("the event loop")
        return parse_config_bytes(*args, **kwargs)

    monkeypatch.setattr(register_module, "parse_config_bytes", parse)
    with pytest.raises(Rejected, match="stratgy"):
        await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    assert parsed_where == ["a thread"]


async def test_a_risk_model_trunk_lacks_is_refused_on_the_config_check_by_register_and_by_ingest(
    ctx: Context,
) -> None:
    """`risk.model` naming a file not in trunk's tree passed the check; then every ingestion failed to plan,
    and only the server's log said why."""
    sim = sim_of(ctx)
    installation_id = sim.install(FORK)
    config = f"upstream:\n  url: {ctx.web_url}/{UPSTREAM}.git\nrisk:\n  model: models/risk.json\n"
    sim.commit(FORK, "main", {".github/sluice.yml": config}, message="a model not committed")
    ctx.registry.add_repos(installation_id, [FORK])
    missing = "risk.model names models/risk.json, which is not there in fork trunk's tree"
    with pytest.raises(Rejected, match=re.escape(missing)):
        await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    assert ctx.registry.fork(FORK) is None and queued(ctx) == []
    (run,) = [r for r in sim.check_runs[FORK] if r["name"] == "sluice/config"]
    assert run["conclusion"] == "failure" and missing in run["output"]["summary"]
    assert "sluice calibrate --out" in run["output"]["summary"]  # what to do

    # The fix commits the model alone, the config untouched: that push registers the fork all the same.
    before = sim.git(FORK, "rev-parse", "main").strip()
    after = sim.commit(
        FORK, "main", {"models/risk.json": DEFAULT_MODEL_PATH.read_text()}, message="the model"
    )
    payload = sim.push_payload(FORK, "refs/heads/main", before, after)
    await dispatch(
        ctx, "push", payload | {"installation": {"id": installation_id}, "sender": {"login": "dev"}}
    )
    assert queued(ctx) == [("register", FORK)]
    await dispatch(ctx, "register", {"repo": FORK, "installation_id": installation_id})
    assert ctx.registry.fork(FORK) is not None and ("ingest", FORK) in queued(ctx)

    # trunk's model goes bad with no change to the config (no registration): ingestion says so
    trunk = sim.commit(FORK, "main", {"models/risk.json": "{}"}, message="the model, emptied")
    unusable = "risk.model models/risk.json is not a usable risk model"
    with pytest.raises(Rejected, match=re.escape(unusable)):
        await dispatch(ctx, "ingest", {"fork": FORK, "reason": "push"})
    runs = [r for r in sim.check_runs[FORK] if r["name"] == "sluice/config" and r["head_sha"] == trunk]
    assert [r["conclusion"] for r in runs] == ["failure"] and unusable in runs[0]["output"]["summary"]
