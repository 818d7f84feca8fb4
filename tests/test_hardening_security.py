"""Security hardening, end to end: `sluice serve` (intake and workers) against the simulator over loopback.

No installation's credentials read for another; no credentials in upstream URLs; upstreams only on allowed,
non-internal hosts; dead installation tokens minted again once, removed installations failed at once; and a
hostile `Retry-After` capped.
"""

from __future__ import annotations

import asyncio
import logging
import re
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select

from bot.app import cli
from bot.core.ingestion import BRANCH_PREFIX
from bot.core.upstream_access import AccessKind, UpstreamFacts, UpstreamRefused, address_refusal, decide
from bot.db.jobs import JobQueue, jobs
from bot.db.registry import Registry
from bot.db.store import Store
from bot.git.environment import git_environ
from bot.git.repo import GitRepo
from tests.support.github_sim import GitHubSim
from tests.support.rig import installation_created, serve_bot, serve_settings, serve_sim

SECRET = "security-secret"
CONFIG = ".github/sluice.yml"
FORK = "alpha/fork"  # installation A
PRIVATE = "beta/secret"  # installation B, private
PUBLIC = "beta/public"  # installation B, public
SIBLING = "alpha/upstream"  # installation A, private
LOOPBACK_ALLOWED = {"allow_private_upstreams": True}  # the simulator listens on loopback


@dataclass(frozen=True)
class JobRow:
    kind: str
    key: str | None
    state: str
    attempts: int
    error: str | None


@dataclass
class Rig:
    sim: GitHubSim
    sim_url: str  # http://127.0.0.1:PORT
    web_url: str  # where Sluice clones from: the sim, by the name the settings give it
    bot_url: str
    store: Store
    data_dir: Path

    def jobs(self) -> list[JobRow]:
        query = select(jobs.c.kind, jobs.c.key, jobs.c.state, jobs.c.attempts, jobs.c.error).order_by(
            jobs.c.id
        )
        with self.store._engine.connect() as conn:
            return [JobRow(*row) for row in conn.execute(query)]

    def job(self, kind: str, key: str | None) -> JobRow:
        return [j for j in self.jobs() if j.kind == kind and j.key == key][-1]

    async def settle(self, timeout: float = 90.0) -> None:
        """Until the sim delivered every webhook and no job is queued (a retry waiting too) or running."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            await self.sim.drain_hooks()
            counts = JobQueue(self.store).counts()
            if counts["queued"] == 0 and counts["running"] == 0:
                assert self.sim.schema_violations == [] and self.sim.undocumented_statuses == []
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"jobs did not settle: {JobQueue(self.store).counts()}")

    async def install(self, *repos: str) -> dict[str, int]:
        """Install the App on `repos` (in the sim and by webhook), then start the sim's webhooks."""
        ids = {repo: self.sim.install(repo) for repo in repos}
        self.sim.hook(f"{self.bot_url}/webhook", SECRET)
        for repo in repos:
            assert await self.deliver("installation", installation_payload(self.sim, repo, ids[repo])) == 202
        await self.settle()
        return ids

    async def deliver(self, event: str, payload: dict[str, Any]) -> int:
        return await self.sim.deliver(f"{self.bot_url}/webhook", event, payload, secret=SECRET)

    def config_run(self, repo: str) -> dict[str, Any]:
        return [r for r in self.sim.check_runs[repo] if r["name"] == "sluice/config"][-1]

    def pulls(self) -> list[Any]:
        return [i for i in self.sim.issues[FORK].values() if i.is_pull and i.state == "open"]

    def mirror(self, fork: str = FORK) -> Path:
        return self.data_dir / "mirrors" / f"{fork}.git"

    def git_credentials(self, repo: str, *, ok: bool | None = None, since: int = 0) -> set[int | None]:
        """The installations whose tokens git requests for `repo` carried (None: anonymous)."""
        return {
            r.installation
            for r in self.sim.git_requests[since:]
            if r.repo == repo and (ok is None or (r.status < 400) == ok)
        }


def installation_payload(sim: GitHubSim, full_name: str, installation_id: int) -> dict[str, Any]:
    permissions = {"contents": "write", "pull_requests": "write", "checks": "write"}
    return installation_created(sim, full_name, installation_id, permissions=permissions)


MakeRig = Callable[..., Awaitable[Rig]]


async def _rig_factory(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[MakeRig]:
    stores: list[Store] = []
    bots: list[Any] = []

    async def make(*, web_host: str | None = None, **overrides: Any) -> Rig:
        sim, sim_url = await serve_sim(aiohttp_server, tmp_path / "sim")
        web_url = sim_url.replace("127.0.0.1", web_host) if web_host else sim_url
        store = Store.open(database_url)
        settings = serve_settings(
            sim, sim_url, secret=SECRET, data_dir=tmp_path / "data", git_url=web_url, **overrides
        )
        bot, bot_url = await serve_bot(aiohttp_server, settings, store)
        stores.append(store)
        bots.append(bot)
        return Rig(sim, sim_url, web_url, bot_url, store, tmp_path / "data")

    yield make
    for bot in bots:
        await bot.close()
    for store in stores:
        store.close()


@pytest.fixture
async def make_rig(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[MakeRig]:
    """A rig on SQLite and on PostgreSQL: for the cases where the registry decides."""
    async for make in _rig_factory(aiohttp_server, tmp_path, database_url):
        yield make


@pytest.fixture
async def make_sqlite_rig(aiohttp_server: Any, tmp_path: Path, sqlite_url: str) -> AsyncIterator[MakeRig]:
    async for make in _rig_factory(aiohttp_server, tmp_path, sqlite_url):
        yield make


def seed_upstream(sim: GitHubSim, repo: str, *, private: bool) -> list[str]:
    sim.create_repo(repo, private=private)
    return [
        sim.commit(repo, "main", {"README.md": "upstream\n", "docs/guide.md": "guide\n"}, message="initial"),
        sim.commit(
            repo, "main", {"docs/keys.md": "internal roadmap\n"}, message="docs: the internal roadmap"
        ),
    ]


def seed_fork(sim: GitHubSim, upstream_url: str, *, from_repo: str | None = None) -> str:
    """The fork: the upstream's first commit (when `from_repo`), its own commit and `.github/sluice.yml`."""
    sim.create_repo(FORK)
    parent = None
    if from_repo is not None:
        first = sim.git(from_repo, "rev-list", "--max-parents=0", "main").split()[0]
        sim.git(FORK, "fetch", "--quiet", str(sim.repo_path(from_repo)), f"{first}:refs/heads/main")
        parent = first
    config = f"upstream:\n  url: {upstream_url}\n  branch: main\nfork:\n  branch: main\n"
    files = {CONFIG: config, "third_party/ext/ext.py": "x = 1\n"}
    return sim.commit(FORK, "main", files, message="fork: extension and Sluice config", parent=parent)


def has_object(repo: Path, sha: str) -> bool:
    if not repo.exists():
        return False
    return subprocess.run(["git", "cat-file", "-e", sha], cwd=repo, capture_output=True).returncode == 0


# ------------------------------------------------------------------ whose access reads the upstream


async def test_a_private_repository_of_another_installation_never_reaches_the_fork(make_rig: MakeRig) -> None:
    rig = await make_rig(**LOOPBACK_ALLOWED)
    secret = seed_upstream(rig.sim, PRIVATE, private=True)
    head = seed_fork(rig.sim, f"{rig.web_url}/{PRIVATE}.git")
    b = (await rig.install(PRIVATE))[PRIVATE]  # B registers its own repository: reads it with its token
    since = len(rig.sim.git_requests)
    await rig.install(FORK)

    for sha in secret:  # not one object of the private repository left the simulator's copy of it
        assert not has_object(rig.sim.repo_path(FORK), sha) and not has_object(rig.mirror(), sha)
    run = rig.config_run(FORK)
    assert run["conclusion"] == "failure" and run["head_sha"] == head
    summary = run["output"]["summary"]
    assert "never uses one installation's access on behalf of another" in summary
    assert (
        f"add `downstreams: [{FORK}]` to {PRIVATE}'s {CONFIG}" in summary
        and f"make {PRIVATE} public" in summary
    )
    job = rig.job("register", FORK)
    assert job.state == "failed" and job.attempts == 1  # rejected, not retried
    assert Registry(rig.store).fork(FORK) is None
    assert b not in rig.git_credentials(PRIVATE, since=since)  # for A, B's token never went to git
    assert rig.git_credentials(PRIVATE, ok=True, since=since) == set()  # nor was any git request answered


async def test_the_upstream_installation_lets_a_listed_downstream_read_it(make_rig: MakeRig) -> None:
    rig = await make_rig(**LOOPBACK_ALLOWED)
    secret = seed_upstream(rig.sim, PRIVATE, private=True)
    rig.sim.commit(PRIVATE, "main", {CONFIG: f"downstreams: [{FORK.upper()}]\n"}, message="let alpha read")
    seed_fork(rig.sim, f"{rig.web_url}/{PRIVATE}.git", from_repo=PRIVATE)
    ids = await rig.install(PRIVATE, FORK)

    assert rig.config_run(FORK)["conclusion"] == "success"
    assert "its config lists this fork as a downstream" in rig.config_run(FORK)["output"]["summary"]
    assert rig.config_run(PRIVATE)["conclusion"] == "success"  # B's file only grants: B is no fork
    assert Registry(rig.store).fork(PRIVATE) is None
    (pull,) = rig.pulls()
    assert pull.head_ref == f"{BRANCH_PREFIX}bundle-{secret[1][:10]}"
    assert rig.git_credentials(PRIVATE, ok=True) == {ids[PRIVATE]}  # read with B's token, as B allowed

    # B withdraws its consent: the next upstream push is refused for A, and its commit stays in B.
    withdrawn = rig.sim.commit(PRIVATE, "main", {CONFIG: "downstreams: [alpha/other]\n"}, message="withdraw")
    await rig.settle()
    run = rig.config_run(FORK)
    assert run["conclusion"] == "failure" and "downstreams" in run["output"]["summary"]
    job = rig.job("ingest", FORK)
    assert job.state == "failed" and job.attempts == 1
    assert not has_object(rig.mirror(), withdrawn) and not has_object(rig.sim.repo_path(FORK), withdrawn)
    # A fork PR (which compares with upstream) is refused the same way, and gets no comment.
    trunk = rig.sim.git(FORK, "rev-parse", "main").strip()
    rig.sim.commit(FORK, "feature", {"third_party/ext/ext.py": "x = 2\n"}, message="ext", parent=trunk)
    pull = rig.sim.open_pull(FORK, head="feature", base="main", title="ext")
    await rig.settle()
    job = rig.job("pull_request", FORK)
    assert job.state == "failed" and job.attempts == 1 and "downstreams" in (job.error or "")
    assert rig.sim.comment_objects(FORK, pull["number"]) == []
    assert not has_object(rig.mirror(), withdrawn)


async def test_an_upstream_config_that_cannot_be_parsed_grants_nothing(make_sqlite_rig: MakeRig) -> None:
    """A grant is read or it is not there: broken YAML that names the fork lets no one in."""
    rig = await make_sqlite_rig(**LOOPBACK_ALLOWED)
    secret = seed_upstream(rig.sim, PRIVATE, private=True)
    rig.sim.commit(PRIVATE, "main", {CONFIG: f"downstreams: [{FORK}\n"}, message="a broken grant")
    seed_fork(rig.sim, f"{rig.web_url}/{PRIVATE}.git", from_repo=PRIVATE)
    await rig.install(PRIVATE, FORK)

    run = rig.config_run(FORK)
    assert run["conclusion"] == "failure"
    assert f"add `downstreams: [{FORK}]` to {PRIVATE}'s {CONFIG}" in run["output"]["summary"]
    assert Registry(rig.store).fork(FORK) is None and rig.pulls() == []
    assert not has_object(rig.mirror(), secret[1])


async def test_an_upstream_in_the_forks_own_installation_is_read_with_the_forks_token(
    make_sqlite_rig: MakeRig,
) -> None:
    rig = await make_sqlite_rig(**LOOPBACK_ALLOWED)
    seed_upstream(rig.sim, SIBLING, private=True)
    seed_fork(rig.sim, f"{rig.web_url}/{SIBLING}.git", from_repo=SIBLING)
    ids = await rig.install(SIBLING, FORK)
    assert ids[SIBLING] == ids[FORK]

    assert rig.config_run(FORK)["conclusion"] == "success"
    assert len(rig.pulls()) == 1
    assert rig.git_credentials(SIBLING, ok=True) == {ids[FORK]}


async def test_a_public_upstream_is_fetched_anonymously(make_sqlite_rig: MakeRig) -> None:
    rig = await make_sqlite_rig(**LOOPBACK_ALLOWED)
    seed_upstream(rig.sim, PUBLIC, private=False)
    seed_fork(rig.sim, f"{rig.web_url}/{PUBLIC}.git", from_repo=PUBLIC)
    await rig.install(PUBLIC)  # the App is installed upstream too: its token is still not used for A
    since = len(rig.sim.git_requests)
    await rig.install(FORK)

    assert rig.git_credentials(PUBLIC, since=since) == {None}
    assert "read anonymously: it is public" in rig.config_run(FORK)["output"]["summary"]
    assert len(rig.pulls()) == 1


# ------------------------------------------------------------------ hosts and credentials


async def test_credentials_in_the_upstream_url_are_refused_and_kept_nowhere(
    make_sqlite_rig: MakeRig,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    rig = await make_sqlite_rig(**LOOPBACK_ALLOWED)
    seed_upstream(rig.sim, PUBLIC, private=False)
    leaked = "ghs_leak1234567890abcdef"
    url = rig.web_url.replace("://", f"://x-access-token:{leaked}@") + f"/{PUBLIC}.git"
    seed_fork(rig.sim, url, from_repo=PUBLIC)
    await rig.install(FORK)

    run = rig.config_run(FORK)
    assert run["conclusion"] == "failure" and "carries credentials" in run["output"]["summary"]
    assert rig.job("register", FORK).state == "failed" and rig.job("register", FORK).attempts == 1
    assert rig.sim.git_requests and rig.git_credentials(PUBLIC) == set()  # the upstream was never contacted
    kept = [
        run["output"]["summary"],
        caplog.text,
        *(j.error or "" for j in rig.jobs()),
        (rig.mirror() / "config").read_text(),
    ]
    assert not any(leaked in text for text in kept)
    assert leaked.encode() not in (tmp_path / "sluice.db").read_bytes()
    # `sluice config check` refuses the same file, without printing the secret
    config = tmp_path / "sluice.yml"
    config.write_text(f"upstream:\n  url: {url}\n")
    assert cli.main(["config", "check", str(config)]) == 2
    printed = capsys.readouterr()
    assert "carries credentials" in printed.out + printed.err and leaked not in printed.out + printed.err


def test_sluice_mirror_refuses_credentials_in_a_url_before_git_writes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["mirror", "--dir", str(tmp_path / "m"), "--fork-url", "https://user:s3cret@github.com/o/r.git"]
    assert cli.main([*args, "--upstream-url", "https://github.com/o/u.git"]) == 2
    err = capsys.readouterr().err
    assert "carries credentials" in err and "s3cret" not in err
    assert not (tmp_path / "m" / "config").exists() or "s3cret" not in (tmp_path / "m" / "config").read_text()


@pytest.mark.parametrize(
    ("overrides", "allowed"),
    [
        pytest.param(LOOPBACK_ALLOWED, False, id="another-host"),
        pytest.param({"allowed_upstream_hosts": "example.org, 127.0.0.1"}, True, id="listed-by-the-operator"),
    ],
)
async def test_an_upstream_on_another_host_is_refused_unless_the_operator_allows_it(
    make_sqlite_rig: MakeRig, overrides: dict[str, Any], allowed: bool
) -> None:
    rig = await make_sqlite_rig(web_host="localhost", **overrides)  # Sluice's GitHub is `localhost`
    seed_upstream(rig.sim, PUBLIC, private=False)
    seed_fork(rig.sim, f"{rig.sim_url}/{PUBLIC}.git", from_repo=PUBLIC)  # the same server as 127.0.0.1
    await rig.install(FORK)

    run = rig.config_run(FORK)
    if allowed:  # a listed IP literal may be a private address: the operator named it
        assert run["conclusion"] == "success" and len(rig.pulls()) == 1
    else:
        assert run["conclusion"] == "failure"
        assert (
            "names the host 127.0.0.1, which is not the GitHub host Sluice talks to (localhost)"
            in (run["output"]["summary"])
        )
        assert "SLUICE_ALLOWED_UPSTREAM_HOSTS" in run["output"]["summary"]
        assert rig.git_credentials(PUBLIC) == set()  # refused before any request went there


@pytest.mark.parametrize("web_host", [None, "localhost"], ids=["an-ip-literal", "a-name-resolving-to-it"])
async def test_loopback_upstreams_are_refused_by_default(
    make_sqlite_rig: MakeRig, web_host: str | None
) -> None:
    rig = await make_sqlite_rig(web_host=web_host)  # no allowance: the default settings
    seed_upstream(rig.sim, PUBLIC, private=False)
    seed_fork(rig.sim, f"{rig.web_url}/{PUBLIC}.git", from_repo=PUBLIC)
    await rig.install(FORK)

    run = rig.config_run(FORK)
    assert run["conclusion"] == "failure"
    assert re.search(
        r"resolves to a loopback, link-local or private address \(.*127\.0\.0\.1", run["output"]["summary"]
    )
    assert "SLUICE_ALLOW_PRIVATE_UPSTREAMS=true" in run["output"]["summary"]
    assert rig.job("register", FORK).attempts == 1 and Registry(rig.store).fork(FORK) is None
    assert rig.git_credentials(PUBLIC) == set()


# ------------------------------------------------------------------ installation tokens and GitHub's limits


def mints(sim: GitHubSim) -> list[int]:
    return [
        status
        for method, path, status in sim.requests
        if method == "POST" and path.endswith("/access_tokens")
    ]


async def registered_fork(make: MakeRig) -> tuple[Rig, int]:
    rig = await make(**LOOPBACK_ALLOWED)
    seed_upstream(rig.sim, PUBLIC, private=False)
    seed_fork(rig.sim, f"{rig.web_url}/{PUBLIC}.git", from_repo=PUBLIC)
    ids = await rig.install(FORK)
    assert Registry(rig.store).fork(FORK) is not None and mints(rig.sim) == [201]
    return rig, ids[FORK]


async def test_a_token_github_rejects_is_minted_again_once(make_sqlite_rig: MakeRig) -> None:
    rig, installation = await registered_fork(make_sqlite_rig)

    # The REST API answers 401 for the cached token: a new one is minted and the request sent again at once.
    rig.sim.revoke_tokens(installation)
    rig.sim.commit(
        FORK, "main", {CONFIG: rig.sim.git(FORK, "show", f"main:{CONFIG}").rstrip() + "\nstrategy: merge\n"}
    )
    await rig.settle()
    job = rig.job("register", FORK)
    assert job.state == "done" and job.attempts == 1
    assert mints(rig.sim) == [201, 201]
    assert ("GET", f"/repos/{FORK}", 401) in rig.sim.requests

    # git answers 401 for it: the retry mints a new one, and the ingestion goes through.
    rig.sim.revoke_tokens(installation)
    rig.sim.commit(FORK, "main", {"third_party/ext/more.py": "y = 2\n"}, message="fork: more")
    await rig.settle()
    job = rig.job("ingest", FORK)
    assert job.state == "done" and job.attempts == 2
    assert mints(rig.sim) == [201, 201, 201]


@pytest.mark.parametrize(
    ("how", "mint", "why"),
    [("delete_installation", 404, "no longer exists"), ("suspend", 403, "is suspended")],
)
async def test_a_removed_installation_fails_the_job_at_once_and_a_404_mint_is_permanent(
    make_sqlite_rig: MakeRig, how: str, mint: int, why: str
) -> None:
    rig, installation = await registered_fork(make_sqlite_rig)
    getattr(rig.sim, how)(installation)
    before = rig.sim.git(FORK, "rev-parse", "main").strip()

    # The API path: 401 with the cached token, then the mint answers 404 (removed) or 403 (suspended).
    after = rig.sim.commit(
        FORK, "main", {CONFIG: rig.sim.git(FORK, "show", f"main:{CONFIG}").rstrip() + "\nstrategy: merge\n"}
    )
    push = rig.sim.push_payload(FORK, "refs/heads/main", before, after)
    push["installation"] = {"id": installation}
    assert await rig.deliver("push", push) == 202
    await rig.settle()
    job = rig.job("register", FORK)
    assert job.state == "failed" and job.attempts == 1
    assert f"GitHub installation {installation} {why}" in (job.error or "")
    assert mints(rig.sim) == [201, mint]

    # No token cached any more: the ingestion's first mint fails, and that is the end of it.
    more = rig.sim.commit(FORK, "main", {"third_party/ext/more.py": "y = 2\n"}, message="fork: more")
    push = rig.sim.push_payload(FORK, "refs/heads/main", after, more)
    push["installation"] = {"id": installation}
    assert await rig.deliver("push", push) == 202
    await rig.settle()
    job = rig.job("ingest", FORK)
    assert job.state == "failed" and job.attempts == 1  # not retried as a transient failure
    assert why in (job.error or "") and mints(rig.sim) == [201, mint, mint]


async def test_a_hostile_retry_after_is_capped(make_sqlite_rig: MakeRig) -> None:
    rig = await make_sqlite_rig(**LOOPBACK_ALLOWED)
    seed_upstream(rig.sim, PUBLIC, private=False)
    seed_fork(rig.sim, f"{rig.web_url}/{PUBLIC}.git", from_repo=PUBLIC)
    rig.sim.secondary_rate_limit("POST", r"/pulls$", retry_after=10**9)  # 31 years
    installation = rig.sim.install(FORK)  # not `rig.install`: settling would wait out the capped wait
    rig.sim.hook(f"{rig.bot_url}/webhook", SECRET)
    assert await rig.deliver("installation", installation_payload(rig.sim, FORK, installation)) == 202
    waited = 0.0
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            async with session.get(f"{rig.bot_url}/metrics") as resp:
                found = re.search(
                    r"^sluice_github_rate_limit_wait_seconds_total (\S+)$", await resp.text(), re.M
                )
            waited = float(found.group(1)) if found else 0.0
            if waited:
                break
            await asyncio.sleep(0.1)
    assert waited == 15 * 60  # bot.github.client.RETRY_AFTER_MAX_S


# ------------------------------------------------------------------ the pure decisions, as tables


@pytest.mark.parametrize(
    ("address", "internal"),
    [
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("172.16.0.9", True),
        ("192.168.1.1", True),
        ("169.254.169.254", True),  # the cloud metadata service
        ("100.64.0.1", True),  # carrier-grade NAT
        ("0.0.0.0", True),
        ("::1", True),
        ("fe80::1%eth0", True),
        ("fd00::1", True),
        ("::ffff:127.0.0.1", True),  # loopback in IPv6 clothing
        ("224.0.0.1", True),
        ("140.82.112.3", False),  # github.com
        ("2606:50c0:8000::153", False),
    ],
)
def test_internal_addresses_are_refused_unless_allowed(address: str, internal: bool) -> None:
    refused = address_refusal("git.example.com", [address], listed_hosts=frozenset(), allow_private=False)
    assert (refused is not None) == internal
    assert address_refusal("git.example.com", [address], listed_hosts=frozenset(), allow_private=True) is None


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (dict(public=True, upstream_installation=2), (AccessKind.ANONYMOUS, None)),
        (dict(public=False, upstream_installation=1), (AccessKind.FORK_TOKEN, 1)),
        (dict(public=False, upstream_installation=2, downstreams=("Alpha/Fork",)), (AccessKind.CONSENTED, 2)),
        (dict(public=False, upstream_installation=2, downstreams=("alpha/other",)), None),
        (dict(public=False, upstream_installation=None, downstreams=(FORK,)), None),
        (dict(public=False, upstream_installation=1, upstream=None), None),
    ],
)
def test_who_reads_the_upstream(
    facts: dict[str, Any], expected: tuple[AccessKind, int | None] | None
) -> None:
    given = UpstreamFacts(
        **{
            "fork": FORK,
            "fork_installation": 1,
            "upstream_url": "https://github.com/beta/secret.git",
            "upstream": PRIVATE,
            **facts,
        }
    )
    if expected is None:
        with pytest.raises(UpstreamRefused):
            decide(given)
    else:
        assert (decide(given).kind, decide(given).installation_id) == expected


def test_git_never_sees_sluices_own_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """ssh, a credential helper, anything git starts: none of them gets the App's key or the secret."""
    monkeypatch.setenv("SLUICE_PRIVATE_KEY", "-----BEGIN RSA PRIVATE KEY-----")
    monkeypatch.setenv("SLUICE_WEBHOOK_SECRET", "s3cret")
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    subprocess.run(["git", "config", "alias.show-env", "!env"], cwd=tmp_path, check=True)  # git starts env
    seen = GitRepo(tmp_path).run("show-env")
    assert "PATH=" in seen and "GIT_TERMINAL_PROMPT=0" in seen and "SLUICE_" not in seen
    assert not any(k.startswith("SLUICE_") for k in git_environ())
