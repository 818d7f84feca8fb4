"""The simulator behaves like GitHub for what the gate and the merge use: reviews (and their webhook), team
membership, the pinned merge with its three methods on the real repository, tags, and `check_run` hooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.support.github_sim import GitHubSim

FORK = "triton-fork/triton"
SECRET = "s"


@pytest.fixture
def sim(tmp_path: Path) -> GitHubSim:
    sim = GitHubSim(root=tmp_path / "sim")
    sim.create_repo(FORK)
    sim.commit(FORK, "main", {"README.md": "hello\n"}, message="initial")
    return sim


@pytest.fixture
async def api(aiohttp_client: Any, sim: GitHubSim) -> Any:
    client = await aiohttp_client(sim.app)
    client.headers = {"Authorization": f"token {sim.installation_token(sim.install(FORK))}"}
    return client


@pytest.fixture
async def hooks(aiohttp_server: Any, sim: GitHubSim) -> list[tuple[str, dict[str, Any]]]:
    received: list[tuple[str, dict[str, Any]]] = []

    async def hook(request: web.Request) -> web.Response:
        received.append((request.headers["X-GitHub-Event"], json.loads(await request.read())))
        return web.Response(status=202)

    app = web.Application()
    app.router.add_post("/webhook", hook)
    server = await aiohttp_server(app)
    sim.hook(str(server.make_url("/webhook")), SECRET)
    return received


async def call(api: Any, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    resp = await api.request(method, path, headers=api.headers, **kwargs)
    return resp.status, await resp.json() if resp.content_type == "application/json" else None


def topic(sim: GitHubSim, *files: str) -> list[str]:
    """A branch `topic` off main with one commit per file, each by its own author."""
    parent = sim.git(FORK, "rev-parse", "main")
    shas = []
    for name in files:
        parent = sim.commit(FORK, "topic", {name: f"{name}\n"}, message=f"add {name}", parent=parent)
        shas.append(parent)
    sim.open_pull(FORK, head="topic", base="main", title="T")
    return shas


async def test_reviews_are_listed_with_their_commit_and_state_across_pages(api: Any, sim: GitHubSim) -> None:
    (head,) = topic(sim, "a.txt")
    sim.review(FORK, 1, user="alice", state="APPROVED")
    sim.review(FORK, 1, user="bob", state="CHANGES_REQUESTED", commit_id=head)
    sim.review(FORK, 1, user="carol", state="COMMENTED")
    status, page = await call(api, "GET", f"/repos/{FORK}/pulls/1/reviews", params={"per_page": "2"})
    assert status == 200 and [(r["user"]["login"], r["state"], r["commit_id"]) for r in page] == [
        ("alice", "APPROVED", head),
        ("bob", "CHANGES_REQUESTED", head),
    ]
    status, rest = await call(
        api, "GET", f"/repos/{FORK}/pulls/1/reviews", params={"per_page": "2", "page": "2"}
    )
    assert [r["user"]["login"] for r in rest] == ["carol"]


async def test_a_review_posted_by_the_author_cannot_approve(api: Any, sim: GitHubSim) -> None:
    topic(sim, "a.txt")  # opened by the bot
    status, body = await call(api, "POST", f"/repos/{FORK}/pulls/1/reviews", json={"event": "APPROVE"})
    assert status == 422 and "your own pull request" in json.dumps(body)
    status, body = await call(
        api, "POST", f"/repos/{FORK}/pulls/1/reviews", json={"event": "COMMENT", "body": "hm"}
    )
    assert status == 200 and body["state"] == "COMMENTED"
    assert (await call(api, "POST", f"/repos/{FORK}/pulls/1/reviews", json={"event": "SHIP"}))[0] == 422


async def test_a_submitted_review_sends_pull_request_review(
    sim: GitHubSim, hooks: list[tuple[str, dict[str, Any]]]
) -> None:
    sim.install(FORK)
    (head,) = topic(sim, "a.txt")
    sim.review(FORK, 1, user="alice", state="APPROVED")
    await sim.drain_hooks()
    event, payload = hooks[-1]
    assert event == "pull_request_review" and payload["action"] == "submitted"
    assert (payload["review"]["state"], payload["review"]["commit_id"]) == ("approved", head)
    assert payload["pull_request"]["number"] == 1 and payload["sender"]["login"] == "alice"
    assert payload["installation"]["id"] and payload["repository"]["full_name"] == FORK


async def test_team_membership_answers_for_members_only(api: Any, sim: GitHubSim) -> None:
    sim.add_team_member("@triton-fork/compiler", "alice")
    status, body = await call(api, "GET", "/orgs/triton-fork/teams/compiler/memberships/alice")
    assert status == 200 and body["state"] == "active"
    assert (await call(api, "GET", "/orgs/triton-fork/teams/compiler/memberships/bob"))[0] == 404
    assert (await call(api, "GET", "/orgs/elsewhere/teams/compiler/memberships/alice"))[0] == 404


async def test_a_rebase_merge_replays_each_commit_onto_the_base(api: Any, sim: GitHubSim) -> None:
    shas = topic(sim, "a.txt", "b.txt")
    moved = sim.commit(FORK, "main", {"c.txt": "c\n"}, message="trunk moves on")
    status, body = await call(
        api, "PUT", f"/repos/{FORK}/pulls/1/merge", json={"sha": shas[-1], "merge_method": "rebase"}
    )
    assert status == 200
    log = sim.git(FORK, "log", "--format=%s %P", "main", "-3").splitlines()
    assert [line.split()[:2] for line in log] == [["add", "b.txt"], ["add", "a.txt"], ["trunk", "moves"]]
    assert sim.git(FORK, "rev-parse", "main~2") == moved and sim.git(FORK, "rev-parse", "main") == body["sha"]
    assert body["sha"] not in shas  # new commits: GitHub is their committer
    assert sim.git(FORK, "show", "main:a.txt").strip() == "a.txt"


async def test_a_squash_merge_makes_one_commit_and_a_merge_two_parents(api: Any, sim: GitHubSim) -> None:
    shas = topic(sim, "a.txt", "b.txt")
    status, body = await call(api, "PUT", f"/repos/{FORK}/pulls/1/merge", json={"merge_method": "squash"})
    assert status == 200 and len(sim.git(FORK, "rev-list", "--parents", "-n1", "main").split()) == 2
    assert sim.git(FORK, "show", "main:b.txt").strip() == "b.txt" and body["sha"] not in shas


async def test_a_moved_head_is_409_and_nothing_moves(api: Any, sim: GitHubSim) -> None:
    (old,) = topic(sim, "a.txt")
    sim.commit(FORK, "topic", {"late.txt": "x\n"}, message="late push")
    before = sim.git(FORK, "rev-parse", "main")
    status, body = await call(
        api, "PUT", f"/repos/{FORK}/pulls/1/merge", json={"sha": old, "merge_method": "rebase"}
    )
    assert status == 409 and "Head branch was modified" in body["message"]
    assert sim.git(FORK, "rev-parse", "main") == before and sim.issues[FORK][1].state == "open"


async def test_a_rebase_that_does_not_apply_is_405(api: Any, sim: GitHubSim) -> None:
    parent = sim.git(FORK, "rev-parse", "main")
    head = sim.commit(FORK, "topic", {"README.md": "theirs\n"}, message="edit", parent=parent)
    sim.open_pull(FORK, head="topic", base="main", title="T")
    sim.commit(FORK, "main", {"README.md": "ours\n"}, message="trunk edits too")
    status, _ = await call(
        api, "PUT", f"/repos/{FORK}/pulls/1/merge", json={"sha": head, "merge_method": "rebase"}
    )
    assert status == 405 and sim.issues[FORK][1].state == "open"


async def test_a_tag_is_created_once(api: Any, sim: GitHubSim) -> None:
    main = sim.git(FORK, "rev-parse", "main")
    ref = {"ref": "refs/tags/sluice/rollback/bundle-1", "sha": main}
    assert (await call(api, "POST", f"/repos/{FORK}/git/refs", json=ref))[0] == 201
    assert sim.git(FORK, "rev-parse", "refs/tags/sluice/rollback/bundle-1") == main
    status, body = await call(api, "POST", f"/repos/{FORK}/git/refs", json=ref)
    assert status == 422 and body["message"] == "Reference already exists"


async def test_a_completed_check_run_sends_check_run_naming_its_pulls(
    api: Any, sim: GitHubSim, hooks: list[tuple[str, dict[str, Any]]]
) -> None:
    (head,) = topic(sim, "a.txt")
    status, run = await call(
        api, "POST", f"/repos/{FORK}/check-runs", json={"name": "sluice/L1", "head_sha": head}
    )
    assert status == 201
    await call(api, "PATCH", f"/repos/{FORK}/check-runs/{run['id']}", json={"status": "in_progress"})
    await call(api, "PATCH", f"/repos/{FORK}/check-runs/{run['id']}", json={"conclusion": "success"})
    await sim.drain_hooks()
    checks = [p for e, p in hooks if e == "check_run"]
    assert [(p["action"], p["check_run"]["name"], p["check_run"]["conclusion"]) for p in checks] == [
        ("completed", "sluice/L1", "success")
    ]
    assert [p["number"] for p in checks[0]["check_run"]["pull_requests"]] == [1]
