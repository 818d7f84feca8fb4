"""The GitHub client against the simulator, where ETags, rate limits and streamed downloads meet: a list that
grows past a full page, 304 answers GitHub does not count, and an artifact download GitHub rate-limits."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app.worker import is_permanent
from bot.github.client import GitHubClient, GitHubNotFound, GitHubRateLimited
from bot.github.forge import ForkGitHub
from tests.support.github_sim import GitHubSim

FORK = "triton-fork/triton"
STICKY = "<!-- sluice:sticky -->"


@dataclass
class Rig:
    sim: GitHubSim
    forge: ForkGitHub
    installation: int
    waits: list[tuple[str, float]] = field(default_factory=list)


@pytest.fixture
async def rig(aiohttp_server: Any, tmp_path: Path) -> AsyncIterator[Rig]:
    sim = GitHubSim(root=tmp_path / "sim")
    sim.create_repo(FORK)
    sim.commit(FORK, "main", {"README.md": "hello\n"}, message="initial")
    installation = sim.install(FORK)
    server = await aiohttp_server(sim.app)
    waits: list[tuple[str, float]] = []

    async def no_sleep(_: float) -> None:
        return None

    async with aiohttp.ClientSession() as session:
        github = GitHubClient(
            session,
            app_id=sim.app_id,
            private_key=sim.private_key_pem,
            base_url=str(server.make_url("")),
            clock=lambda: dt.datetime.now(dt.UTC),
            sleep=no_sleep,
            on_wait=lambda reason, seconds: waits.append((reason, seconds)),
        )
        forge = ForkGitHub(
            github.for_installation(installation), FORK, bot_login=sim.bot_login, app_id=sim.app_id
        )
        yield Rig(sim, forge, installation, waits)


async def test_an_item_past_a_full_cached_page_is_found_and_not_posted_twice(rig: Rig) -> None:
    """Page 1 was full (100 comments) and had no next page; comment 101 goes to page 2, page 1's body (and
    its ETag) is unchanged, and a 304 would hand back its old Link: the sticky comment would be missed."""
    number = await rig.forge.create_issue(title="t", body="b", labels=[])
    for i in range(100):
        rig.sim.add_comment(FORK, number, f"comment {i}", user="alice")
    assert await rig.forge.find_comment(number, marker=STICKY) is None  # caches the full page 1
    rig.sim.add_comment(FORK, number, f"{STICKY}\nfirst", user=rig.sim.bot_login)

    found = await rig.forge.find_comment(number, marker=STICKY)
    await rig.forge.upsert_comment(number, marker=STICKY, body=f"{STICKY}\nsecond")

    assert found is not None and found.body == f"{STICKY}\nfirst"
    stickies = [c["body"] for c in rig.sim.comment_objects(FORK, number) if c["body"].startswith(STICKY)]
    assert stickies == [f"{STICKY}\nsecond"]  # edited in place, not posted again


async def test_a_page_that_is_not_full_is_still_asked_for_conditionally(rig: Rig) -> None:
    number = await rig.forge.create_issue(title="t", body="b", labels=[])
    rig.sim.add_comment(FORK, number, "one", user="alice")
    await rig.forge.find_comment(number, marker=STICKY)
    await rig.forge.find_comment(number, marker=STICKY)

    listed = [
        status for method, path, status in rig.sim.requests if path.endswith(f"/issues/{number}/comments")
    ]
    assert listed == [200, 304]


async def test_304_answers_do_not_use_up_the_clients_rate_limit(rig: Rig) -> None:
    """GitHub does not count a 304; gidgethub takes one off before each request and reads GitHub's count
    back only from other answers, so a run of 304s would have the client wait for the hour's reset."""
    await rig.forge.default_branch()
    rig.sim.rate_used[f"installation:{rig.installation}"] = 4997
    await rig.forge.branch_head("main")  # a 200: GitHub says 2 are left
    for _ in range(4):
        await rig.forge.default_branch()  # 304s

    statuses = [status for _, _, status in rig.sim.requests][-4:]
    assert statuses == [304] * 4
    assert rig.waits == []


def a_run_with_its_report(sim: GitHubSim) -> dict[str, Any]:
    """A tier workflow run on trunk that uploaded its report artifact."""
    trunk = sim.git(FORK, "rev-parse", "main").strip()
    run = sim._new_run(sim.repos[FORK], "sluice-l1.yml", "main", trunk, title="t")
    sim.workflow_runs[FORK].append(run)
    sim.add_artifact(FORK, run["id"], "sluice-tier-report", {"report.json": "{}"})
    return run


@pytest.mark.parametrize("limit", ["secondary", "primary"])
async def test_a_rate_limited_artifact_download_is_retried_later_not_taken_for_an_expired_artifact(
    rig: Rig, limit: str
) -> None:
    run = a_run_with_its_report(rig.sim)
    if limit == "secondary":
        rig.sim.secondary_rate_limit("GET", r"/zip$", retry_after=30)
    else:
        rig.sim.exhaust_rate_limit("GET", r"/zip$")

    with pytest.raises(GitHubRateLimited) as limited:
        await rig.forge.run_artifact(run["id"], "sluice-tier-report", max_bytes=10**6)
    assert not is_permanent(limited.value) and "rate limit" in limited.value.message

    zipped = await rig.forge.run_artifact(run["id"], "sluice-tier-report", max_bytes=10**6)
    assert zipped is not None and zipped[:2] == b"PK"


async def test_an_artifact_gone_from_storage_is_not_found_with_what_to_do(rig: Rig) -> None:
    run = a_run_with_its_report(rig.sim)
    rig.sim.fail_next("GET", r"/zip$", 410, body={"message": "Artifact has expired"})

    with pytest.raises(GitHubNotFound) as gone:
        await rig.forge.run_artifact(run["id"], "sluice-tier-report", max_bytes=10**6)
    assert is_permanent(gone.value) and "Artifact has expired" in gone.value.message
    assert gone.value.remedy == "the artifact expired or was deleted: run the tier again"
