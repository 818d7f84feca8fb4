"""The simulator serves git over smart HTTP as github.com does: who may fetch or push, what pushes set off."""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.support.github_sim import ZERO_SHA, GitHubSim, SimError
from tests.support.webhooks import signature
from tests.test_github_sim import FORK, sim

__all__ = ["sim"]  # the fixture, shared with the REST tests of the simulator
SECRET = "s3cret"
GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@e",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@e",
}


async def git(
    cwd: Path, *args: str, token: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run git without blocking the loop that serves the sim; never prompts, never reads user config."""
    auth = []
    if token is not None:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        auth = ["-c", f"http.extraHeader=Authorization: Basic {basic}"]
    proc = await asyncio.create_subprocess_exec(
        "git",
        "-c",
        "core.askPass=",
        "-c",
        "credential.helper=",
        *auth,
        *args,
        cwd=cwd,
        env={"PATH": os.environ["PATH"], "HOME": str(cwd), **GIT_ENV, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await proc.communicate()
    return subprocess.CompletedProcess(args, proc.returncode or 0, out.decode(), err.decode())


async def ok(cwd: Path, *args: str, token: str | None = None) -> str:
    proc = await git(cwd, *args, token=token)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture
async def client(aiohttp_client: Any, sim: GitHubSim) -> Any:
    """One server for git and REST; `client.headers` carry an installation token for FORK."""
    client = await aiohttp_client(sim.app)
    client.token = sim.installation_token(sim.install(FORK))
    client.headers = {"Authorization": f"token {client.token}"}
    return client


def url(client: Any, full_name: str) -> str:
    return str(client.make_url(f"/{full_name}.git"))


def git_requests(sim: GitHubSim, path_end: str) -> list[int]:
    return [status for _, path, status in sim.requests if path.endswith(path_end)]


@pytest.fixture
async def receiver(aiohttp_server: Any) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """A webhook receiver that refuses a bad signature; returns its URL and what it accepted, in order."""
    received: list[tuple[str, dict[str, Any]]] = []

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        if not hmac.compare_digest(request.headers.get("X-Hub-Signature-256", ""), signature(body, SECRET)):
            return web.Response(status=401)
        received.append((request.headers["X-GitHub-Event"], json.loads(body)))
        return web.Response(status=202)

    app = web.Application()
    app.router.add_post("/webhook", hook)
    server = await aiohttp_server(app)
    return str(server.make_url("/webhook")), received


# ------------------------------------------------------------------ fetching


async def test_a_public_repo_clones_without_credentials(client: Any, sim: GitHubSim, tmp_path: Path) -> None:
    await ok(tmp_path, "clone", "--quiet", url(client, FORK), "work")
    assert (tmp_path / "work" / "README.md").read_text() == "hello\n"
    assert await ok(tmp_path / "work", "rev-parse", "HEAD") == sim.git(FORK, "rev-parse", "main")
    assert git_requests(sim, ".git/info/refs") == [200]


async def test_a_private_repo_needs_a_token_of_its_installation(
    client: Any, sim: GitHubSim, tmp_path: Path
) -> None:
    sim.create_repo("acme/secret", private=True)
    sim.commit("acme/secret", "main", {"s.txt": "s\n"})
    anonymous = await git(tmp_path, "clone", url(client, "acme/secret"), "anonymous")
    assert anonymous.returncode != 0 and "terminal prompts disabled" in anonymous.stderr
    other_installation = await git(tmp_path, "clone", url(client, "acme/secret"), "other", token=client.token)
    assert other_installation.returncode != 0 and "not found" in other_installation.stderr
    assert git_requests(sim, "secret.git/info/refs") == [401, 404]

    token = sim.installation_token(sim.install("acme/secret"))
    await ok(tmp_path, "clone", "--quiet", url(client, "acme/secret"), "work", token=token)
    assert (tmp_path / "work" / "s.txt").read_text() == "s\n"
    sim.expire_tokens()
    expired = await git(tmp_path, "clone", url(client, "acme/secret"), "expired", token=token)
    assert expired.returncode != 0 and git_requests(sim, "secret.git/info/refs")[-1] == 401


async def test_a_gzipped_fetch_request_is_served(client: Any, sim: GitHubSim, tmp_path: Path) -> None:
    main = sim.git(FORK, "rev-parse", "main")
    for i in range(40):  # 40 wants make the request body big enough for git to gzip it
        sim.commit(FORK, f"b{i}", {"f.txt": f"{i}\n"}, parent=main)
    traced = await git(
        tmp_path,
        "clone",
        url(client, FORK),
        "work",
        env={"GIT_TRACE_CURL": "1", "GIT_TRACE_CURL_NO_DATA": "1"},
    )
    assert traced.returncode == 0, traced.stderr
    assert "Send header: Content-Encoding: gzip" in traced.stderr
    assert await ok(tmp_path / "work", "rev-parse", "origin/b39") == sim.git(FORK, "rev-parse", "b39")


# ------------------------------------------------------------------ pushing


async def test_a_token_push_is_seen_by_the_api_and_recorded(
    client: Any, sim: GitHubSim, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    await ok(tmp_path, "clone", "--quiet", url(client, FORK), "work", token=client.token)
    await ok(work, "commit", "--quiet", "--allow-empty", "-m", "pushed over http")
    await ok(work, "push", "--quiet", "origin", "HEAD:refs/heads/feature/x", token=client.token)
    pushed = await ok(work, "rev-parse", "HEAD")

    resp = await client.get(f"/repos/{FORK}/git/ref/heads/feature/x", headers=client.headers)
    assert resp.status == 200 and (await resp.json())["object"]["sha"] == pushed
    assert sim.pushes == [
        {
            "repo": FORK,
            "ref": "refs/heads/feature/x",
            "before": ZERO_SHA,
            "after": pushed,
            "pusher": "sluice[bot]",
        }
    ]
    await sim.drain_hooks()
    assert sim.deliveries == []  # no hook() target: nothing is sent
    log = (sim.root / "git-http-backend.log").read_text()
    assert client.token not in log + repr(sim.requests)


async def test_a_push_needs_a_token_whose_installation_has_the_repo(
    client: Any, sim: GitHubSim, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    await ok(tmp_path, "clone", "--quiet", url(client, FORK), "work")
    await ok(work, "commit", "--quiet", "--allow-empty", "-m", "not allowed")

    anonymous = await git(work, "push", "origin", "HEAD:main")
    assert anonymous.returncode != 0 and "terminal prompts disabled" in anonymous.stderr
    sim.create_repo("someone/else")
    elsewhere = sim.installation_token(sim.install("someone/else"))
    wrong = await git(work, "push", "origin", "HEAD:main", token=elsewhere)
    assert wrong.returncode != 0 and "403" in wrong.stderr
    bad = await git(work, "push", "origin", "HEAD:main", token="ghs_not_a_token")
    assert bad.returncode != 0

    assert git_requests(sim, ".git/info/refs") == [200, 401, 403, 401]
    assert git_requests(sim, "/git-receive-pack") == []
    assert sim.git(FORK, "rev-parse", "main") != await ok(work, "rev-parse", "HEAD")
    assert sim.pushes == []


async def test_a_stale_lease_is_refused_by_the_server(client: Any, sim: GitHubSim, tmp_path: Path) -> None:
    """The ref moves between git's ref advertisement and its push: receive-pack's compare-and-swap refuses."""
    work = tmp_path / "work"
    leased = sim.commit(FORK, "topic", {"t.txt": "leased\n"}, parent=sim.git(FORK, "rev-parse", "main"))
    await ok(tmp_path, "clone", "--quiet", url(client, FORK), "work", token=client.token)
    await ok(work, "commit", "--quiet", "--allow-empty", "-m", "rewrite topic")
    sim.slow(r"/git-receive-pack$", 1.0, times=1)
    advertised = len(git_requests(sim, ".git/info/refs"))
    push = asyncio.create_task(
        git(work, "push", f"--force-with-lease=topic:{leased}", "origin", "HEAD:topic", token=client.token)
    )
    while len(git_requests(sim, ".git/info/refs")) == advertised:
        await asyncio.sleep(0.01)
    moved = sim.commit(FORK, "topic", {"t.txt": "someone else\n"}, parent=leased)

    refused = await push
    assert refused.returncode != 0 and "[remote rejected]" in refused.stderr
    assert sim.git(FORK, "rev-parse", "topic") == moved and sim.pushes == []

    await ok(
        work,
        "push",
        "--quiet",
        f"--force-with-lease=topic:{moved}",
        "origin",
        "HEAD:topic",
        token=client.token,
    )
    assert [(p["before"], p["after"]) for p in sim.pushes] == [(moved, await ok(work, "rev-parse", "HEAD"))]


# ------------------------------------------------------------------ refs/pull/N/head


async def test_pull_head_ref_follows_the_head_branch(client: Any, sim: GitHubSim, tmp_path: Path) -> None:
    work = tmp_path / "work"
    first = sim.commit(FORK, "topic", {"t.txt": "1\n"}, parent=sim.git(FORK, "rev-parse", "main"))
    number = sim.open_pull(FORK, head="topic", base="main", title="T")["number"]
    await ok(tmp_path, "clone", "--quiet", "--branch=topic", url(client, FORK), "work", token=client.token)

    async def fetched_pull_head() -> str:
        await ok(work, "fetch", "--quiet", "origin", f"refs/pull/{number}/head")
        return await ok(work, "rev-parse", "FETCH_HEAD")

    assert await fetched_pull_head() == first
    await ok(work, "commit", "--quiet", "--allow-empty", "-m", "second")
    await ok(work, "push", "--quiet", "origin", "HEAD:topic", token=client.token)
    assert await fetched_pull_head() == await ok(work, "rev-parse", "HEAD")
    third = sim.commit(FORK, "topic", {"t.txt": "3\n"})
    assert await fetched_pull_head() == third

    hidden = await git(work, "push", "origin", f"HEAD:refs/pull/{number}/head", token=client.token)
    assert "[remote rejected]" in hidden.stderr and "hidden ref" in hidden.stderr
    resp = await client.patch(
        f"/repos/{FORK}/pulls/{number}", headers=client.headers, json={"state": "closed"}
    )
    assert resp.status == 200
    sim.commit(FORK, "topic", {"t.txt": "4\n"})
    assert await fetched_pull_head() == third  # a closed PR keeps its last head, as on GitHub


async def test_a_pull_from_another_repository_keeps_its_head_in_the_base_repository(
    client: Any, sim: GitHubSim, tmp_path: Path
) -> None:
    outsider = "outsider/triton"  # a GitHub fork of FORK: `outsider:topic` names its branch
    sim.create_repo(outsider)
    sim.git(outsider, "fetch", "--quiet", str(sim.repo_path(FORK)), "main:main")
    first = sim.commit(outsider, "topic", {"t.txt": "1\n"}, parent=sim.git(outsider, "rev-parse", "main"))
    pull = sim.open_pull(FORK, head="outsider:topic", base="main", title="T", user="outsider")
    assert (pull["head"]["sha"], pull["head"]["ref"]) == (first, "topic")
    assert pull["head"]["repo"]["full_name"] == outsider and pull["head"]["label"] == "outsider:topic"
    assert pull["base"]["repo"]["full_name"] == FORK
    assert sim.git(FORK, "rev-parse", f"refs/pull/{pull['number']}/head").strip() == first
    assert sim.git(FORK, "branch", "--list", "topic") == ""  # no branch of the base repository
    second = sim.commit(outsider, "topic", {"t.txt": "2\n"})
    assert sim.git(FORK, "rev-parse", f"refs/pull/{pull['number']}/head").strip() == second
    resp = await client.get(f"/repos/{FORK}/pulls/{pull['number']}", headers=client.headers)
    assert (await resp.json())["head"]["sha"] == second
    sim.commit(FORK, "topic", {"t.txt": "base\n"}, parent=sim.git(FORK, "rev-parse", "main"))  # same name
    resp = await client.get(f"/repos/{FORK}/pulls/{pull['number']}", headers=client.headers)
    assert (await resp.json())["head"]["sha"] == second
    with pytest.raises(SimError) as refused:
        sim.open_pull(FORK, head="nobody:topic", base="main", title="T")  # no such fork
    assert refused.value.status == 422


# ------------------------------------------------------------------ webhooks


async def test_a_git_push_sends_a_signed_push_then_synchronize(
    client: Any, sim: GitHubSim, tmp_path: Path, receiver: tuple[str, list[tuple[str, dict[str, Any]]]]
) -> None:
    hook_url, received = receiver
    work = tmp_path / "work"
    before = sim.commit(FORK, "topic", {"t.txt": "1\n"}, parent=sim.git(FORK, "rev-parse", "main"))
    sim.open_pull(FORK, head="topic", base="main", title="T")
    await ok(tmp_path, "clone", "--quiet", "--branch=topic", url(client, FORK), "work", token=client.token)
    await ok(work, "commit", "--quiet", "--allow-empty", "-m", "moves the PR")
    sim.hook(hook_url, SECRET)

    await ok(work, "push", "--quiet", "origin", "HEAD:topic", token=client.token)
    await sim.drain_hooks()

    after = await ok(work, "rev-parse", "HEAD")
    assert [event for event, _ in received] == ["push", "pull_request"]
    push, sync = received[0][1], received[1][1]
    assert (push["ref"], push["before"], push["after"]) == ("refs/heads/topic", before, after)
    assert push["pusher"]["name"] == push["sender"]["login"] == "sluice[bot]"
    assert [c["message"] for c in push["commits"]] == ["moves the PR"]
    assert (sync["action"], sync["number"], sync["before"], sync["after"]) == (
        "synchronize",
        1,
        before,
        after,
    )
    assert sync["pull_request"]["head"]["sha"] == after and sync["sender"]["login"] == "sluice[bot]"
    assert [d["status"] for d in sim.deliveries] == [202, 202]


async def test_a_persons_push_of_a_commit_the_repo_holds_moves_the_branch_and_sends_push(
    sim: GitHubSim, receiver: tuple[str, list[tuple[str, dict[str, Any]]]]
) -> None:
    hook_url, received = receiver
    before = sim.git(FORK, "rev-parse", "main")
    later = sim.commit(FORK, "scratch", {"n.txt": "1\n"}, message="one", parent=before)
    later = sim.commit(FORK, "scratch", {"n.txt": "2\n"}, message="two")
    sim.hook(hook_url, SECRET)
    sim.push(FORK, "main", later, pusher="dev")
    await sim.drain_hooks()
    assert sim.git(FORK, "rev-parse", "main") == later
    ((event, push),) = received
    assert (event, push["ref"], push["before"], push["after"]) == ("push", "refs/heads/main", before, later)
    assert push["pusher"]["name"] == push["sender"]["login"] == "dev"
    assert [c["message"] for c in push["commits"]] == ["one", "two"]
    with pytest.raises(ValueError, match="has no commit"):
        sim.push(FORK, "main", "f" * 40)
    assert sim.git(FORK, "rev-parse", "main") == later


async def test_rest_changes_send_the_hooks_github_sends(
    client: Any, sim: GitHubSim, receiver: tuple[str, list[tuple[str, dict[str, Any]]]]
) -> None:
    hook_url, received = receiver
    main = sim.git(FORK, "rev-parse", "main")
    sim.hook(hook_url, SECRET)
    resp = await client.post(
        f"/repos/{FORK}/git/refs", headers=client.headers, json={"ref": "refs/heads/topic", "sha": main}
    )
    assert resp.status == 201
    first = sim.commit(FORK, "topic", {"t.txt": "1\n"}, pusher="alice")
    resp = await client.post(
        f"/repos/{FORK}/pulls", headers=client.headers, json={"head": "topic", "base": "main", "title": "T"}
    )
    assert resp.status == 201
    second = sim.commit(FORK, "scratch", {"t.txt": "2\n"}, parent=first)
    resp = await client.patch(
        f"/repos/{FORK}/git/refs/heads/topic", headers=client.headers, json={"sha": second}
    )
    assert resp.status == 200
    resp = await client.put(f"/repos/{FORK}/pulls/1/merge", headers=client.headers, json={"sha": second})
    assert resp.status == 200
    merge = (await resp.json())["sha"]
    await sim.drain_hooks()

    def summary(event: str, payload: dict[str, Any]) -> tuple[str, ...]:
        if event == "push":
            return (event, payload["ref"], payload["after"], payload["pusher"]["name"])
        return (event, payload["action"], payload["pull_request"]["head"]["sha"], payload["sender"]["login"])

    bot = "sluice[bot]"
    assert [summary(*r) for r in received] == [
        ("push", "refs/heads/topic", main, bot),
        ("push", "refs/heads/topic", first, "alice"),
        ("pull_request", "opened", first, bot),
        ("push", "refs/heads/scratch", second, "octocat"),
        ("push", "refs/heads/topic", second, bot),
        ("pull_request", "synchronize", second, bot),
        ("push", "refs/heads/main", merge, bot),
        ("pull_request", "closed", second, bot),
    ]
    assert received[-1][1]["pull_request"]["merged"] is True


async def test_an_unreachable_hook_target_is_a_failed_delivery(sim: GitHubSim) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sim.hook(f"http://127.0.0.1:{port}/webhook", SECRET)
    sim.commit(FORK, "main", {"x.txt": "x\n"})
    await sim.drain_hooks()
    assert [(d["event"], d["status"]) for d in sim.deliveries] == [("push", 0)]
