"""The GitHub simulator behaves like GitHub where the bot depends on it."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import io
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jwt
import pytest
from aiohttp import web
from yarl import URL

from tests.support.github_sim import ANONYMOUS_RATE_LIMIT, RATE_LIMIT, ZERO_SHA, GitHubSim
from tests.support.webhooks import signature

FORK = "triton-fork/triton"


def git(cwd: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", **env}
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture
def sim(tmp_path: Path) -> GitHubSim:
    sim = GitHubSim(root=tmp_path / "sim")
    sim.create_repo(FORK)
    sim.commit(FORK, "main", {"README.md": "hello\n"}, message="initial")
    return sim


@pytest.fixture
async def api(aiohttp_client: Any, sim: GitHubSim) -> Any:
    """A client that authenticates like the App: JWT → installation token → repo calls."""
    client = await aiohttp_client(sim.app)
    installation_id = sim.install(FORK)
    resp = await client.post(
        f"/app/installations/{installation_id}/access_tokens",
        headers={"Authorization": f"Bearer {sim.app_jwt()}"},
    )
    assert resp.status == 201
    client.headers = {"Authorization": f"token {(await resp.json())['token']}"}
    return client


async def call(api: Any, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    resp = await api.request(method, path, headers=api.headers, **kwargs)
    body = await resp.json() if resp.content_type == "application/json" else None
    return resp.status, body


# ------------------------------------------------------------------ auth


async def test_app_endpoints_need_a_valid_jwt(aiohttp_client: Any, sim: GitHubSim) -> None:
    client = await aiohttp_client(sim.app)
    sim.install(FORK)
    assert (await client.get("/app/installations")).status == 401
    other_key = jwt.encode(
        {"iat": 0, "exp": 1, "iss": "1"}, "an-hmac-secret-not-the-apps-rsa-key", algorithm="HS256"
    )
    resp = await client.get("/app/installations", headers={"Authorization": f"Bearer {other_key}"})
    assert resp.status == 401
    resp = await client.get("/app/installations", headers={"Authorization": f"Bearer {sim.app_jwt()}"})
    assert resp.status == 200
    assert [i["account"]["login"] for i in await resp.json()] == ["triton-fork"]
    resp = await client.get(
        f"/repos/{FORK}/installation", headers={"Authorization": f"Bearer {sim.app_jwt()}"}
    )
    assert resp.status == 200


async def test_a_jwt_too_far_in_the_future_or_expired_is_refused(aiohttp_client: Any, sim: GitHubSim) -> None:
    client = await aiohttp_client(sim.app)
    now = int(sim.now().timestamp())
    assert sim.private_key_pem is not None
    for iat, exp in [(now, now + 3600), (now - 1200, now - 600)]:
        token = jwt.encode(
            {"iat": iat, "exp": exp, "iss": str(sim.app_id)}, sim.private_key_pem, algorithm="RS256"
        )
        resp = await client.get("/app/installations", headers={"Authorization": f"Bearer {token}"})
        assert resp.status == 401


async def test_access_token_expires_in_an_hour(aiohttp_client: Any, sim: GitHubSim) -> None:
    client = await aiohttp_client(sim.app)
    installation_id = sim.install(FORK)
    resp = await client.post(
        f"/app/installations/{installation_id}/access_tokens",
        headers={"Authorization": f"Bearer {sim.app_jwt()}"},
    )
    body = await resp.json()
    expires = dt.datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
    assert dt.timedelta(minutes=59) < expires - sim.now() <= dt.timedelta(hours=1)
    unknown = await client.post(
        "/app/installations/999999/access_tokens", headers={"Authorization": f"Bearer {sim.app_jwt()}"}
    )
    assert unknown.status == 404


async def test_repo_endpoints_need_the_installation_token(api: Any, sim: GitHubSim) -> None:
    # Anyone may read a public repository, as on GitHub; writing, or reading a private one, needs a token.
    assert (await api.get(f"/repos/{FORK}/branches/main")).status == 200
    assert (await api.post(f"/repos/{FORK}/issues", json={"title": "t"})).status == 401
    sim.create_repo("someone/secret", private=True)
    assert (await api.get("/repos/someone/secret")).status == 404
    wrong = await api.get(f"/repos/{FORK}/branches/main", headers={"Authorization": "token ghs_wrong"})
    assert wrong.status == 401
    assert (await wrong.json())["message"] == "Bad credentials"
    assert (await call(api, "GET", f"/repos/{FORK}/branches/main"))[0] == 200
    sim.create_repo("someone/else")
    assert (await call(api, "GET", "/repos/someone/else"))[0] == 404
    sim.expire_tokens()
    assert (await call(api, "GET", f"/repos/{FORK}/branches/main"))[0] == 401


# ------------------------------------------------------------------ refs


async def test_refs_create_update_and_delete_the_real_branch(api: Any, sim: GitHubSim) -> None:
    main = sim.git(FORK, "rev-parse", "main")
    status, body = await call(
        api, "POST", f"/repos/{FORK}/git/refs", json={"ref": "refs/heads/sync", "sha": main}
    )
    assert status == 201 and body["object"] == {"sha": main, "type": "commit", "url": body["object"]["url"]}
    assert (await call(api, "POST", f"/repos/{FORK}/git/refs", json={"ref": "refs/heads/sync", "sha": main}))[
        0
    ] == 422
    status, body = await call(api, "GET", f"/repos/{FORK}/git/ref/heads/sync")
    assert (status, body["ref"], body["object"]["sha"]) == (200, "refs/heads/sync", main)

    ahead = sim.commit(FORK, "scratch", {"a.txt": "a\n"}, parent=main)
    status, _ = await call(api, "PATCH", f"/repos/{FORK}/git/refs/heads/sync", json={"sha": ahead})
    assert status == 200 and sim.git(FORK, "rev-parse", "sync") == ahead

    status, body = await call(api, "PATCH", f"/repos/{FORK}/git/refs/heads/sync", json={"sha": main})
    assert (status, body["message"]) == (422, "Update is not a fast forward")
    assert sim.git(FORK, "rev-parse", "sync") == ahead
    status, _ = await call(
        api, "PATCH", f"/repos/{FORK}/git/refs/heads/sync", json={"sha": main, "force": True}
    )
    assert status == 200 and sim.git(FORK, "rev-parse", "sync") == main

    assert (await call(api, "DELETE", f"/repos/{FORK}/git/refs/heads/sync"))[0] == 204
    assert (await call(api, "GET", f"/repos/{FORK}/git/ref/heads/sync"))[0] == 404
    assert (await call(api, "GET", f"/repos/{FORK}/branches/sync"))[0] == 404


async def test_pushes_over_the_file_path_are_seen_by_the_api(
    api: Any, sim: GitHubSim, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    git(tmp_path, "clone", "--quiet", str(sim.repo_path(FORK)), str(work))
    (work / "x.txt").write_text("x\n")
    git(work, "add", "x.txt")
    git(work, "commit", "--quiet", "-m", "add x")
    git(work, "push", "--quiet", "origin", "HEAD:refs/heads/feature/x")
    status, body = await call(api, "GET", f"/repos/{FORK}/branches/feature/x")
    assert status == 200
    assert body["commit"]["sha"] == git(work, "rev-parse", "HEAD")
    assert body["commit"]["commit"]["message"] == "add x"


# ------------------------------------------------------------------ pulls


async def open_pr(api: Any, sim: GitHubSim, branch: str, **extra: Any) -> dict[str, Any]:
    sim.commit(
        FORK,
        branch,
        {f"{branch}.txt": branch},
        message=f"change on {branch}",
        parent=sim.git(FORK, "rev-parse", "main"),
    )
    status, body = await call(
        api, "POST", f"/repos/{FORK}/pulls", json={"head": branch, "base": "main", "title": branch, **extra}
    )
    assert status == 201, body
    return body


async def test_pull_create_shape_and_duplicate_head(api: Any, sim: GitHubSim) -> None:
    pr = await open_pr(api, sim, "sync-1", body="details")
    assert pr["number"] == 1 and pr["state"] == "open" and pr["body"] == "details"
    assert pr["head"]["ref"] == "sync-1" and pr["head"]["sha"] == sim.git(FORK, "rev-parse", "sync-1")
    assert pr["head"]["repo"]["full_name"] == FORK and pr["base"]["ref"] == "main"
    assert pr["user"]["login"] == sim.bot_login and pr["merged"] is False and pr["mergeable"] is True
    assert pr["html_url"].endswith(f"/{FORK}/pull/1")
    status, body = await call(
        api, "POST", f"/repos/{FORK}/pulls", json={"head": "sync-1", "base": "main", "title": "again"}
    )
    assert status == 422
    assert body["message"] == "Validation Failed"
    assert body["errors"][0]["message"] == "A pull request already exists for triton-fork:sync-1."
    status, body = await call(
        api, "POST", f"/repos/{FORK}/pulls", json={"head": "nope", "base": "main", "title": "x"}
    )
    assert status == 422 and body["errors"][0]["field"] == "head"
    assert [p["number"] for p in sim.pulls[FORK]] == [1]


async def test_pull_list_filters_by_head_and_paginates_with_link(api: Any, sim: GitHubSim) -> None:
    for i in range(5):
        await open_pr(api, sim, f"b{i}")
    status, body = await call(api, "GET", f"/repos/{FORK}/pulls", params={"head": "triton-fork:b3"})
    assert status == 200 and [p["head"]["ref"] for p in body] == ["b3"]

    seen: list[int] = []
    url: str | None = f"/repos/{FORK}/pulls?per_page=2"
    pages = 0
    while url:
        resp = await api.get(url, headers=api.headers)
        seen += [p["number"] for p in await resp.json()]
        link = resp.headers.get("Link", "")
        if pages == 0:
            assert 'rel="next"' in link and "page=3" in link and 'rel="last"' in link
        nxt = re.search(r'<([^>]+)>; rel="next"', link)
        url = URL(nxt.group(1)).path_qs if nxt else None
        pages += 1
    assert pages == 3 and seen == [5, 4, 3, 2, 1]
    assert 'rel="prev"' in resp.headers["Link"] and 'rel="next"' not in resp.headers["Link"]


async def test_pull_patch_commits_and_files(api: Any, sim: GitHubSim) -> None:
    pr = await open_pr(api, sim, "topic")
    status, body = await call(
        api, "PATCH", f"/repos/{FORK}/pulls/1", json={"title": "New title", "body": "b"}
    )
    assert (status, body["title"], body["body"]) == (200, "New title", "b")
    status, commits = await call(api, "GET", f"/repos/{FORK}/pulls/1/commits")
    assert [c["sha"] for c in commits] == [pr["head"]["sha"]]
    assert commits[0]["commit"]["message"] == "change on topic"
    status, files = await call(api, "GET", f"/repos/{FORK}/pulls/1/files")
    assert [(f["filename"], f["status"], f["additions"]) for f in files] == [("topic.txt", "added", 1)]
    assert files[0]["patch"].startswith("@@")
    status, body = await call(api, "PATCH", f"/repos/{FORK}/pulls/1", json={"state": "closed"})
    assert body["state"] == "closed"
    assert (await call(api, "GET", f"/repos/{FORK}/pulls", params={"state": "closed"}))[1][0]["number"] == 1


async def test_merge_moves_the_base_branch_in_the_bare_repo(api: Any, sim: GitHubSim) -> None:
    pr = await open_pr(api, sim, "topic")
    old_main = sim.git(FORK, "rev-parse", "main")
    status, body = await call(api, "PUT", f"/repos/{FORK}/pulls/1/merge", json={"sha": "0" * 40})
    assert status == 409
    status, body = await call(api, "PUT", f"/repos/{FORK}/pulls/1/merge", json={"sha": pr["head"]["sha"]})
    assert status == 200 and body["merged"] is True
    new_main = git(sim.repo_path(FORK), "rev-parse", "main")
    assert new_main == body["sha"] != old_main
    assert git(sim.repo_path(FORK), "rev-list", "--parents", "-n1", "main").split()[1:] == [
        old_main,
        pr["head"]["sha"],
    ]
    assert git(sim.repo_path(FORK), "show", "main:topic.txt") == "topic"
    status, merged = await call(api, "GET", f"/repos/{FORK}/pulls/1")
    assert (merged["merged"], merged["state"], merged["merge_commit_sha"]) == (True, "closed", new_main)
    assert (await call(api, "PUT", f"/repos/{FORK}/pulls/1/merge", json={}))[0] == 405


async def test_a_draft_is_not_merged(api: Any, sim: GitHubSim) -> None:
    pr = await open_pr(api, sim, "topic", draft=True)
    status, body = await call(api, "PUT", f"/repos/{FORK}/pulls/1/merge", json={"sha": pr["head"]["sha"]})
    assert (status, body["message"]) == (405, "Pull Request is still a draft")
    sim.set_draft(FORK, 1, False, user="rm")
    assert (await call(api, "PUT", f"/repos/{FORK}/pulls/1/merge", json={"sha": pr["head"]["sha"]}))[0] == 200


async def test_conflicting_pull_is_not_mergeable(api: Any, sim: GitHubSim) -> None:
    sim.commit(FORK, "topic", {"README.md": "theirs\n"}, parent=sim.git(FORK, "rev-parse", "main"))
    sim.commit(FORK, "main", {"README.md": "ours\n"})
    status, pr = await call(
        api, "POST", f"/repos/{FORK}/pulls", json={"head": "topic", "base": "main", "title": "t"}
    )
    assert status == 201 and pr["mergeable"] is False and pr["mergeable_state"] == "dirty"
    before = sim.git(FORK, "rev-parse", "main")
    assert (await call(api, "PUT", f"/repos/{FORK}/pulls/1/merge", json={}))[0] == 405
    assert sim.git(FORK, "rev-parse", "main") == before


# ------------------------------------------------------------------ issues, comments, labels, permissions


async def test_comments_create_edit_list_delete(api: Any, sim: GitHubSim) -> None:
    await open_pr(api, sim, "topic")
    status, c1 = await call(api, "POST", f"/repos/{FORK}/issues/1/comments", json={"body": "first"})
    assert status == 201 and c1["user"]["login"] == sim.bot_login
    _, c2 = await call(api, "POST", f"/repos/{FORK}/issues/1/comments", json={"body": "second"})
    status, edited = await call(
        api, "PATCH", f"/repos/{FORK}/issues/comments/{c1['id']}", json={"body": "first, edited"}
    )
    assert status == 200 and edited["body"] == "first, edited"
    assert sim.comments[(FORK, 1)] == ["first, edited", "second"]
    resp = await api.get(f"/repos/{FORK}/issues/1/comments?per_page=1", headers=api.headers)
    assert [c["body"] for c in await resp.json()] == ["first, edited"] and 'rel="next"' in resp.headers[
        "Link"
    ]
    assert (await call(api, "DELETE", f"/repos/{FORK}/issues/comments/{c2['id']}"))[0] == 204
    assert sim.comments[(FORK, 1)] == ["first, edited"]
    assert (await call(api, "POST", f"/repos/{FORK}/issues/99/comments", json={"body": "x"}))[0] == 404
    status, reaction = await call(
        api, "POST", f"/repos/{FORK}/issues/comments/{c1['id']}/reactions", json={"content": "eyes"}
    )
    assert status == 201 and reaction["content"] == "eyes"
    assert sim.reactions[c1["id"]] == [reaction]


async def test_labels_and_issues_share_the_pull_number_space(api: Any, sim: GitHubSim) -> None:
    await open_pr(api, sim, "topic")
    status, issue = await call(
        api, "POST", f"/repos/{FORK}/issues", json={"title": "Sync dashboard", "labels": ["dashboard"]}
    )
    assert status == 201 and issue["number"] == 2
    status, labels = await call(
        api, "POST", f"/repos/{FORK}/issues/1/labels", json={"labels": ["sluice:ingest", "risky"]}
    )
    assert [x["name"] for x in labels] == ["sluice:ingest", "risky"]
    assert (await call(api, "DELETE", f"/repos/{FORK}/issues/1/labels/risky"))[0] == 200
    assert (await call(api, "DELETE", f"/repos/{FORK}/issues/1/labels/risky"))[0] == 404
    assert sim.labels[(FORK, 1)] == ["sluice:ingest"]
    assert [x["name"] for x in (await call(api, "GET", f"/repos/{FORK}/pulls/1"))[1]["labels"]] == [
        "sluice:ingest"
    ]
    _, found = await call(api, "GET", f"/repos/{FORK}/issues", params={"labels": "dashboard"})
    assert [i["number"] for i in found] == [2] and "pull_request" not in found[0]
    status, closed = await call(
        api, "PATCH", f"/repos/{FORK}/issues/2", json={"state": "closed", "body": "done"}
    )
    assert (closed["state"], closed["body"]) == ("closed", "done")


async def test_a_body_over_65536_characters_is_refused_created_or_edited(api: Any, sim: GitHubSim) -> None:
    long = "x" * 65_537
    status, issue = await call(api, "POST", f"/repos/{FORK}/issues", json={"title": "t", "body": "short"})
    assert status == 201
    for method, url, body in (
        ("POST", f"/repos/{FORK}/issues", {"title": "t", "body": long}),
        ("PATCH", f"/repos/{FORK}/issues/{issue['number']}", {"body": long}),
        ("POST", f"/repos/{FORK}/issues/{issue['number']}/comments", {"body": long}),
    ):
        status, answer = await call(api, method, url, json=body)
        assert status == 422 and "body is too long (maximum is 65536 characters)" in str(answer), url
    _, comment = await call(
        api, "POST", f"/repos/{FORK}/issues/{issue['number']}/comments", json={"body": "c"}
    )
    status, _ = await call(
        api, "PATCH", f"/repos/{FORK}/issues/comments/{comment['id']}", json={"body": long}
    )
    assert status == 422 and sim.issues[FORK][issue["number"]].body == "short"


async def test_a_get_carries_an_etag_and_an_unchanged_one_is_answered_304_uncounted(
    api: Any, sim: GitHubSim
) -> None:
    url = f"/repos/{FORK}/issues"
    status, issue = await call(api, "POST", url, json={"title": "t", "body": "b"})
    assert status == 201
    first = await api.get(f"{url}/{issue['number']}", headers=api.headers)
    etag, used = first.headers["ETag"], int(first.headers["x-ratelimit-used"])
    again = await api.get(f"{url}/{issue['number']}", headers=api.headers | {"If-None-Match": etag})
    assert (again.status, await again.read(), again.headers["ETag"]) == (304, b"", etag)
    await call(api, "PATCH", f"{url}/{issue['number']}", json={"body": "changed"})
    changed = await api.get(f"{url}/{issue['number']}", headers=api.headers | {"If-None-Match": etag})
    assert changed.status == 200 and changed.headers["ETag"] != etag
    assert int(changed.headers["x-ratelimit-used"]) == used + 2  # the PATCH and this GET; the 304 is free


async def test_a_user_with_no_grant_may_read_a_public_repository_and_not_a_private_one(
    api: Any, sim: GitHubSim
) -> None:
    sim.set_permission(FORK, "alice", "admin")
    _, alice = await call(api, "GET", f"/repos/{FORK}/collaborators/alice/permission")
    _, bob = await call(api, "GET", f"/repos/{FORK}/collaborators/bob/permission")
    assert (alice["permission"], alice["user"]["login"], bob["permission"]) == ("admin", "alice", "read")
    secret = f"{FORK.split('/')[0]}/secret"
    sim.create_repo(secret, private=True)
    sim.install(secret)
    _, carol = await call(api, "GET", f"/repos/{secret}/collaborators/carol/permission")
    assert (carol["permission"], carol["role_name"]) == ("none", "none")


# ------------------------------------------------------------------ check runs and actions


async def test_check_runs_list_shape_keeps_the_latest_per_name(api: Any, sim: GitHubSim) -> None:
    sha = sim.git(FORK, "rev-parse", "main")
    for name in ("sluice/gate", "sluice/gate", "sluice/l1"):
        status, run = await call(
            api,
            "POST",
            f"/repos/{FORK}/check-runs",
            json={"name": name, "head_sha": sha, "status": "in_progress"},
        )
        assert status == 201
    status, done = await call(
        api,
        "PATCH",
        f"/repos/{FORK}/check-runs/{run['id']}",
        json={"conclusion": "success", "output": {"title": "ok", "summary": "s"}},
    )
    assert (done["status"], done["conclusion"], done["output"]["title"]) == ("completed", "success", "ok")
    url = f"/repos/{FORK}/check-runs/{run['id']}"
    _, back = await call(api, "PATCH", url, json={"status": "in_progress"})
    assert (back["status"], back["conclusion"]) == ("completed", "success")  # never taken back, as on GitHub
    status, body = await call(api, "GET", f"/repos/{FORK}/commits/{sha}/check-runs")
    assert status == 200 and body["total_count"] == 2
    assert [r["name"] for r in body["check_runs"]] == ["sluice/l1", "sluice/gate"]
    _, by_branch = await call(api, "GET", f"/repos/{FORK}/commits/main/check-runs", params={"filter": "all"})
    assert by_branch["total_count"] == 3 and len(sim.check_runs[FORK]) == 3
    assert (await call(api, "POST", f"/repos/{FORK}/check-runs", json={"name": "x", "head_sha": "f" * 40}))[
        0
    ] == 422


WORKFLOW = """name: tier
run-name: tier ${{ inputs.tier }} request ${{ inputs.request }}
on:
  workflow_dispatch:
    inputs:
      tier: {type: number, required: true}
      request: {type: number, required: true}
      pr: {type: string}
jobs: {}
"""


def with_workflow(sim: GitHubSim) -> None:
    sim.commit(FORK, "main", {".github/workflows/tier-l1.yml": WORKFLOW}, message="ci: tier workflow")


async def test_workflow_dispatch_is_recorded(api: Any, sim: GitHubSim) -> None:
    with_workflow(sim)
    inputs = {"tier": "1", "request": "5", "pr": "1"}
    url = f"/repos/{FORK}/actions/workflows/tier-l1.yml/dispatches"
    resp = await api.post(url, headers=api.headers, json={"ref": "main", "inputs": inputs})
    assert resp.status == 204
    assert sim.dispatches[FORK] == [{"workflow": "tier-l1.yml", "ref": "main", "inputs": inputs}]
    _, runs = await call(api, "GET", f"/repos/{FORK}/actions/runs")
    assert runs["total_count"] == 1 and runs["workflow_runs"][0]["status"] == "queued"
    assert runs["workflow_runs"][0]["display_title"] == "tier 1 request 5"  # its run-name, filled in
    assert (await api.post(url, headers=api.headers, json={"ref": "nope"})).status == 422
    # the 2025 API: the run's id in a 200 answer
    status, details = await call(
        api, "POST", url, json={"ref": "main", "inputs": inputs, "return_run_details": True}
    )
    assert status == 200 and details["workflow_run_id"] == sim.workflow_runs[FORK][-1]["id"]


async def test_workflow_runs_filter_by_when_they_were_created(api: Any, sim: GitHubSim) -> None:
    """The `created` filter, in GitHub's search syntax for dates: Sluice finds the run it dispatched by it."""
    with_workflow(sim)
    url = f"/repos/{FORK}/actions/workflows/tier-l1.yml/dispatches"
    for day, request in ((1, "5"), (2, "6"), (3, "7")):
        sim.now = lambda day=day: dt.datetime(2026, 3, day, 12, 0, tzinfo=dt.UTC)
        body = {"ref": "main", "inputs": {"tier": "1", "request": request}}
        assert (await api.post(url, headers=api.headers, json=body)).status == 204

    async def requests(created: str) -> list[str]:
        _, runs = await call(api, "GET", f"/repos/{FORK}/actions/runs?created={quote(created)}")
        return sorted(r["display_title"].rsplit(" ", 1)[1] for r in runs["workflow_runs"])

    assert await requests(">=2026-03-02T12:00:00Z") == ["6", "7"]
    assert await requests(">2026-03-02T12:00:00Z") == ["7"]
    assert await requests("<2026-03-02") == ["5"]  # a bare date: the day starts at 00:00 UTC
    assert await requests("<=2026-03-02") == ["5", "6"]  # … and ends at 24:00
    assert await requests(">2026-03-01") == ["6", "7"]
    assert await requests("2026-03-02") == ["6"]
    assert await requests("2026-03-02..*") == ["6", "7"]
    assert await requests("*..2026-03-01T12:00:00+00:00") == ["5"]
    status, _ = await call(api, "GET", f"/repos/{FORK}/actions/runs?created=last-week")
    assert status == 422


@pytest.mark.parametrize(
    ("workflow", "inputs", "status", "message"),
    [
        ("missing.yml", {"tier": "1", "request": "1"}, 404, "Not Found"),
        (
            "tier-l1.yml",
            {"tier": "1", "request": "1", "extra": "x"},
            422,
            'Unexpected inputs provided: ["extra"]',
        ),
        ("tier-l1.yml", {"tier": "1"}, 422, "Required input 'request' not provided"),
        ("tier-l1.yml", {"tier": "one", "request": "1"}, 422, "not a number"),
    ],
)
async def test_workflow_dispatch_refusals(
    api: Any, sim: GitHubSim, workflow: str, inputs: dict[str, str], status: int, message: str
) -> None:
    with_workflow(sim)
    url = f"/repos/{FORK}/actions/workflows/{workflow}/dispatches"
    got, body = await call(api, "POST", url, json={"ref": "main", "inputs": inputs})
    assert got == status and message in body["message"]
    assert sim.dispatches[FORK] == [] and sim.workflow_runs[FORK] == []


async def test_run_artifacts_list_and_download_through_a_signed_redirect(api: Any, sim: GitHubSim) -> None:
    with_workflow(sim)
    await api.post(
        f"/repos/{FORK}/actions/workflows/tier-l1.yml/dispatches",
        headers=api.headers,
        json={"ref": "main", "inputs": {"tier": "1", "request": "1"}},
    )
    run_id = sim.workflow_runs[FORK][0]["id"]
    report = '{"schema": "sluice.tier-report/1"}'
    artifact_id = sim.add_artifact(FORK, run_id, "tier-report", {"report.json": report})
    old = sim.add_artifact(FORK, run_id, "old-logs", {"log.txt": "x"}, expired=True)
    status, listing = await call(
        api, "GET", f"/repos/{FORK}/actions/runs/{run_id}/artifacts?name=tier-report"
    )
    assert status == 200 and listing["total_count"] == 1
    assert listing["artifacts"][0]["archive_download_url"].endswith(f"/actions/artifacts/{artifact_id}/zip")
    resp = await api.get(
        f"/repos/{FORK}/actions/artifacts/{artifact_id}/zip", headers=api.headers, allow_redirects=False
    )
    assert resp.status == 302
    location = URL(resp.headers["Location"])
    assert location.path == f"/_blobs/artifacts/{artifact_id}" and location.query["sig"]
    blob = await api.get(location.path_qs)  # no Authorization: the signature is the credential
    with zipfile.ZipFile(io.BytesIO(await blob.read())) as archive:
        assert archive.read("report.json").decode() == report
    assert (await api.get(location.path)).status == 403  # unsigned
    expired = await api.get(f"/repos/{FORK}/actions/artifacts/{old}/zip", headers=api.headers)
    assert expired.status == 410
    anonymous = await api.get(f"/repos/{FORK}/actions/runs/{run_id}/artifacts")
    assert anonymous.status == 401


# ------------------------------------------------------------------ GitHub's published description


PATH_PARAM = re.compile(r"\{[^}]*\}")
GIT_ROUTE = re.compile(r"^(GET|POST) /\{\}/\{\}.*$")
NOT_REST = {
    "GET /{}/{}",
    "POST /{}/{}",
    "GET /_blobs/artifacts/{}",  # git smart HTTP; signed download URLs
    "GET /repos/{}/{}/git/refs/{}",  # the legacy spelling of GET .../git/ref/{ref}, which GitHub still serves
    "GET /repos/{}/{}/actions/artifacts/{}/zip",  # documented as .../{archive_format}
}


def test_every_simulated_rest_route_is_a_documented_github_operation(sim: GitHubSim) -> None:
    routes = {
        f"{route.method} {PATH_PARAM.sub('{}', route.resource.canonical)}"
        for route in sim.app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }
    routes = {GIT_ROUTE.sub(r"\1 /{}/{}", r) for r in routes}  # git's three routes
    assert sorted(routes - set(sim.operations) - NOT_REST) == []


async def test_a_request_body_github_would_refuse_is_refused(api: Any, sim: GitHubSim) -> None:
    main = sim.git(FORK, "rev-parse", "main")
    status, body = await call(
        api, "POST", f"/repos/{FORK}/check-runs", json={"name": "L1", "head_sha": main, "status": 5}
    )
    assert status == 422 and "status" in body["message"]
    status, _ = await call(api, "POST", f"/repos/{FORK}/issues/1/labels", json={"labels": "not-a-list"})
    assert status == 422
    assert len(sim.schema_violations) == 2 and sim.schema_violations[0].startswith("checks/create: status")


async def test_a_field_named_like_a_schema_annotation_keeps_its_limits(api: Any, sim: GitHubSim) -> None:
    """A check run action's `description` (at most 40 characters) is a field, not documentation."""
    main = sim.git(FORK, "rev-parse", "main")
    action = {"label": "Re-run", "identifier": "rerun", "description": "d" * 41}
    status, body = await call(
        api, "POST", f"/repos/{FORK}/check-runs", json={"name": "L1", "head_sha": main, "actions": [action]}
    )
    assert status == 422 and "description" in body["message"]
    action["description"] = "d" * 40
    ok = {"name": "L1", "head_sha": main, "actions": [action], "output": {"title": "t", "summary": "s"}}
    assert (await call(api, "POST", f"/repos/{FORK}/check-runs", json=ok))[0] == 201


def test_a_check_runs_pull_requests_leave_out_a_pr_from_another_repository(sim: GitHubSim) -> None:
    """As GitHub's check_run payloads do: the bot must find a PR from a fork of the fork another way."""
    main = sim.git(FORK, "rev-parse", "main")
    sim.create_repo("outsider/triton")
    sim.git("outsider/triton", "fetch", "--quiet", str(sim.repo_path(FORK)), "main:main")
    theirs = sim.commit("outsider/triton", "fix", {"a.py": "a\n"}, message="fix", parent=main)
    sim.open_pull(FORK, head="outsider:fix", base="main", title="theirs", user="outsider")
    ours = sim.commit(FORK, "topic", {"b.py": "b\n"}, message="topic", parent=main)
    sim.open_pull(FORK, head="topic", base="main", title="ours", user="dev")
    for head, expected in ((theirs, []), (ours, [2])):
        run = sim.finish_check(FORK, head, "sluice/L1", "success")
        payload = sim.check_run_completed_payload(FORK, run)
        assert [p["number"] for p in payload["check_run"]["pull_requests"]] == expected


# ------------------------------------------------------------------ faults and rate limits


async def test_every_response_has_rate_limit_headers(api: Any, sim: GitHubSim) -> None:
    for path in (f"/repos/{FORK}/branches/main", f"/repos/{FORK}/branches/missing"):
        resp = await api.get(path, headers=api.headers)
        for header in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-ratelimit-used"):
            assert resp.headers[header].isdigit()
        assert resp.headers["x-ratelimit-resource"] == "core"
    assert int(resp.headers["x-ratelimit-remaining"]) == 5000 - int(resp.headers["x-ratelimit-used"])
    assert sim.requests[-1] == ("GET", f"/repos/{FORK}/branches/missing", 404)


@pytest.mark.parametrize(
    ("status", "headers", "message"),
    [
        (500, None, "Server Error"),
        (502, None, "Server Error"),
        (403, {"retry-after": "7"}, "You have exceeded a secondary rate limit"),
        (403, None, "You have exceeded a secondary rate limit"),
        (429, None, "You have exceeded a secondary rate limit"),
    ],
)
async def test_faults_fire_once_then_recover(
    api: Any, sim: GitHubSim, status: int, headers: dict[str, str] | None, message: str
) -> None:
    sim.fail_next("GET", r"/branches/main$", status, headers=headers)
    resp = await api.get(f"/repos/{FORK}/branches/main", headers=api.headers)
    assert resp.status == status and (await resp.json())["message"].startswith(message)
    if headers:
        assert resp.headers["retry-after"] == "7"
    assert (await call(api, "GET", f"/repos/{FORK}/branches/main"))[0] == 200


async def test_primary_rate_limit_exhaustion(api: Any, sim: GitHubSim) -> None:
    sim.exhaust_rate_limit("POST", r"/comments$", reset_in=30, times=2)
    await open_pr(api, sim, "topic")
    for _ in range(2):
        resp = await api.post(f"/repos/{FORK}/issues/1/comments", headers=api.headers, json={"body": "x"})
        assert resp.status == 403 and resp.headers["x-ratelimit-remaining"] == "0"
        assert int(resp.headers["x-ratelimit-reset"]) >= int(sim.now().timestamp()) + 29
    assert (await call(api, "POST", f"/repos/{FORK}/issues/1/comments", json={"body": "x"}))[0] == 201
    assert sim.comments[(FORK, 1)] == ["x"]


async def test_the_primary_rate_limit_holds_per_identity_until_the_hour_resets(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    now = [dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)]
    sim = GitHubSim(root=tmp_path / "sim", clock=lambda: now[0])
    sim.create_repo(FORK)
    sim.commit(FORK, "main", {"README.md": "hello\n"}, message="initial")
    client = await aiohttp_client(sim.app)
    path = f"/repos/{FORK}/branches/main"
    answers = [await client.get(path) for _ in range(ANONYMOUS_RATE_LIMIT + 1)]  # anyone: 60 an hour
    assert [a.status for a in answers] == [200] * ANONYMOUS_RATE_LIMIT + [403]
    refused = answers[-1]
    assert (await refused.json())["message"] == "API rate limit exceeded for 127.0.0.1."
    assert (refused.headers["x-ratelimit-limit"], refused.headers["x-ratelimit-remaining"]) == ("60", "0")
    reset = int(refused.headers["x-ratelimit-reset"])
    assert reset == int(now[0].timestamp()) + 3600 and refused.headers["x-ratelimit-used"] == "60"
    token = await client.post(  # the App's JWT and an installation's token have limits of their own
        f"/app/installations/{sim.install(FORK)}/access_tokens",
        headers={"Authorization": f"Bearer {sim.app_jwt()}"},
    )
    authenticated = {"Authorization": f"token {(await token.json())['token']}"}
    assert (await client.get(path, headers=authenticated)).headers["x-ratelimit-limit"] == "5000"
    sim.rate_used[f"installation:{sim.install(FORK)}"] = RATE_LIMIT
    spent = await client.get(path, headers=authenticated)
    assert spent.status == 403 and spent.headers["x-ratelimit-remaining"] == "0"
    assert (await spent.json())[
        "message"
    ] == f"API rate limit exceeded for installation ID {sim.install(FORK)}."
    now[0] += dt.timedelta(hours=1)  # the hour is over: everyone starts again
    again = await client.get(path)
    assert again.status == 200 and again.headers["x-ratelimit-remaining"] == "59"


async def test_slow_responses_are_slow(api: Any, sim: GitHubSim) -> None:
    sim.slow(r"/branches/main$", 0.2, times=1)
    loop_time = __import__("asyncio").get_running_loop().time
    start = loop_time()
    assert (await call(api, "GET", f"/repos/{FORK}/branches/main"))[0] == 200
    assert loop_time() - start >= 0.2


# ------------------------------------------------------------------ webhooks


async def test_deliver_signs_the_body_and_sends_github_headers(aiohttp_server: Any, sim: GitHubSim) -> None:
    received: list[tuple[dict[str, str], bytes]] = []

    async def hook(request: web.Request) -> web.Response:
        received.append((dict(request.headers), await request.read()))
        return web.Response(status=202)

    receiver = web.Application()
    receiver.router.add_post("/webhook", hook)
    server = await aiohttp_server(receiver)
    sim.install(FORK)
    before = sim.git(FORK, "rev-parse", "main")
    after = sim.commit(FORK, "main", {"src/a.py": "print(1)\n"}, message="add a")
    payload = sim.push_payload(FORK, "refs/heads/main", before, after)
    status = await sim.deliver(
        str(server.make_url("/webhook")), "push", payload, secret="s3cret", delivery_id="d-1"
    )

    assert status == 202
    headers, body = received[0]
    assert headers["X-GitHub-Event"] == "push" and headers["X-GitHub-Delivery"] == "d-1"
    assert (
        headers["User-Agent"].startswith("GitHub-Hookshot/") and headers["Content-Type"] == "application/json"
    )
    assert headers["X-GitHub-Hook-ID"].isdigit()
    assert hmac.compare_digest(headers["X-Hub-Signature-256"], signature(body, "s3cret"))
    assert headers["X-Hub-Signature"] == "sha1=" + hmac.new(b"s3cret", body, hashlib.sha1).hexdigest()
    assert payload["commits"][0]["id"] == after and payload["commits"][0]["added"] == ["src/a.py"]
    assert payload["repository"]["full_name"] == FORK and "id" in payload["installation"]
    assert payload["forced"] is False and payload["created"] is False


def test_payload_helpers_read_the_real_repo(sim: GitHubSim) -> None:
    base = sim.git(FORK, "rev-parse", "main")
    sim.commit(FORK, "topic", {"t.txt": "t"}, parent=base)
    pr = sim.open_pull(FORK, head="topic", base="main", title="T")
    payload = sim.pull_request_payload(FORK, pr["number"], "opened", sender="alice")
    assert payload["pull_request"]["head"]["sha"] == sim.git(FORK, "rev-parse", "topic")
    assert (payload["action"], payload["number"], payload["sender"]["login"]) == ("opened", 1, "alice")
    created = sim.push_payload(FORK, "refs/heads/topic", ZERO_SHA, sim.git(FORK, "rev-parse", "topic"))
    assert created["created"] is True and [c["message"] for c in created["commits"]] == ["commit"]
    cid = sim.add_comment(FORK, 1, "/hold", user="alice")
    comment = sim.issue_comment_payload(FORK, cid)
    assert comment["comment"]["body"] == "/hold" and comment["issue"]["pull_request"]
