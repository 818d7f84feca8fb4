"""Slash commands against the simulator: who may run each, hostile arguments, what each does, the audit log.

Comments arrive as GitHub's `issue_comment` payloads and run through the real routes; git, the database
(`database_url`: SQLite and PostgreSQL) and HTTP are real.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from gidgethub import BadRequest, GitHubBroken

from bot.app.context import Context
from bot.app.worker import MAX_ATTEMPTS
from bot.core.audit import AuditState
from bot.core.command_args import Usage
from bot.core.commands import MAX_LINE
from bot.core.dashboard import MARKER as DASHBOARD
from bot.core.emergency import EMERGENCY_PREFIX
from bot.core.errors import BadInput, Unavailable
from bot.core.ingestion import BRANCH_PREFIX, CheckName
from bot.core.models import Disposition
from bot.core.permissions import Permission
from bot.db.audit import LINE_CHARS, CommandAudit
from bot.db.gates import GateStore
from bot.db.lag import LagHistory
from bot.flows.patch_stack import PATCH_STACK_MARKER
from bot.github import client as github_client
from handlers import ROUTES
from handlers.commands import COMMANDS
from handlers.commands.call import Call, Outcome
from tests.support.github_sim import GitHubSim
from tests.support.rig import fork_config
from tests.test_commands import as_job, comment, replies
from tests.test_handlers import FORK, UPSTREAM, ctx, dispatch, fork_record, queued, sim_of

__all__ = ["ctx"]  # the fixture, reused from the handlers' tests
OLD = dt.datetime.now(dt.UTC) - dt.timedelta(days=10)  # the fork's last regular ingestion
CORE = "lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp"


def dated(at: dt.datetime) -> dict[str, str]:
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S+0000")
    return {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}


def upstream_commit(sim: GitHubSim, files: dict[str, str | None], *, message: str, at: dt.datetime) -> str:
    """A commit on upstream's main dated `at` (the simulator dates its own commits now)."""
    made = sim.commit(UPSTREAM, "main", files, message=message)
    parent = sim.git(UPSTREAM, "rev-parse", f"{made}^")
    sha = sim.git(UPSTREAM, "commit-tree", f"{made}^{{tree}}", "-p", parent, "-m", message, env=dated(at))
    sim.git(UPSTREAM, "update-ref", "refs/heads/main", sha)
    return sha


def digits_commit(
    sim: GitHubSim, files: dict[str, str | None], *, at: dt.datetime, digits: bool = True
) -> str:
    """An upstream commit dated `at` whose SHA's first 9 characters are all digits (or, with
    `digits=False`, are not): its message is numbered until the SHA comes out so."""
    made = sim.commit(UPSTREAM, "main", files, message="[Fix] direct push")
    parent, tree = sim.git(UPSTREAM, "rev-parse", f"{made}^", f"{made}^{{tree}}").split()
    for attempt in range(5000):  # about 1 in 76 SHAs starts with 9 digits, the first not 0
        message = f"[Fix] direct push, take {attempt}"
        sha = sim.git(UPSTREAM, "commit-tree", tree, "-p", parent, "-m", message, env=dated(at))
        if (sha[:9].isdigit() and sha[0] != "0") == digits:
            sim.git(UPSTREAM, "update-ref", "refs/heads/main", sha)
            return sha
    raise AssertionError("no SHA came out as wanted in 5,000 tries")


def emergencies(sim: GitHubSim) -> list[dict[str, Any]]:
    """The fork's emergency-pick PRs (their head branches start with EMERGENCY_PREFIX)."""
    return [p for p in sim.pulls[FORK] if p["head"]["ref"].startswith(EMERGENCY_PREFIX)]


def a_fork(ctx: Context, *, fork_files: dict[str, str] | None = None) -> tuple[GitHubSim, int]:
    """Upstream and fork sharing one commit ten days old, the fork registered, an issue to comment on.
    alice has write access, mallory read, carol maintain; `fork_files` are committed on fork trunk."""
    sim = sim_of(ctx)
    tree = sim.git(UPSTREAM, "rev-parse", "main^{tree}")
    base = sim.git(UPSTREAM, "commit-tree", tree, "-m", "initial", env=dated(OLD))
    sim.git(UPSTREAM, "update-ref", "refs/heads/main", base)
    sim.git(FORK, "fetch", "--quiet", str(sim.repo_path(UPSTREAM)), "+main:main")
    if fork_files:
        sim.commit(FORK, "main", fork_files, message="fork: its own files")
    fork_record(ctx, installation_id=sim.install(FORK))
    for user, role in (("alice", "write"), ("mallory", "read"), ("carol", "maintain"), ("dan", "write")):
        sim.set_permission(FORK, user, role)
    return sim, sim.open_issue(FORK, title="ingestion questions", user="alice")


async def merged_upstream_pull(
    ctx: Context, files: dict[str, str | None], *, number: int = 1872, merge: bool = True
) -> dict[str, Any]:
    """Upstream PR `number`, squash-merged through GitHub's own endpoint (or left open)."""
    sim = sim_of(ctx)
    trunk = sim.git(UPSTREAM, "rev-parse", "main")
    sim.commit(UPSTREAM, f"fix-{number}", files, message=f"[Fix] the crash (#{number})", parent=trunk)
    sim.open_pull(UPSTREAM, head=f"fix-{number}", base="main", title="[Fix] the crash", number=number)
    if merge:
        token = sim.installation_token(sim.install(UPSTREAM))
        url = f"{ctx.web_url}/repos/{UPSTREAM}/pulls/{number}/merge"
        headers = {"Authorization": f"token {token}"}
        async with (
            aiohttp.ClientSession() as http,
            http.put(url, json={"merge_method": "squash"}, headers=headers) as resp,
        ):
            assert resp.status == 200, await resp.text()
    return next(p for p in sim.pulls[UPSTREAM] if p["number"] == number)


async def say(ctx: Context, number: int, body: str, *, user: str = "alice") -> str:
    """Post `body` as `user` and deliver it; Sluice's reply to it (empty when none)."""
    sim = sim_of(ctx)
    before = len(replies(sim, number))
    await comment(ctx, number, body, user=user)
    after = replies(sim, number)
    return after[-1] if len(after) > before else ""


def reactions(sim: GitHubSim, number: int) -> list[str]:
    ids = [c["id"] for c in sim.comment_objects(FORK, number) if c["user"]["login"] != sim.bot_login]
    return [r["content"] for i in ids for r in sim.reactions[i]]


def audit(ctx: Context) -> list[tuple[str, str, str]]:
    return [(e.actor, e.line, e.outcome) for e in CommandAudit(ctx.store).entries(FORK)]


def mirror_of(ctx: Context) -> Path:
    return Path(ctx.settings.data_dir) / "mirrors" / f"{FORK}.git"


def git_traffic(sim: GitHubSim) -> int:
    return len(sim.git_requests)


# ------------------------------------------------------------------ who may


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        ("/cherry-pick 1872", "mallory"),
        ("/ingest", "mallory"),
        ("/defer 1234567", "mallory"),
        ('/skip 1234567 --reason "x"', "mallory"),  # read access: refused before ownership is looked at
    ],
)
async def test_each_command_refuses_a_commenter_without_the_role(
    ctx: Context, command: str, refused: str
) -> None:
    """The allowed side of each: the /cherry-pick, /ingest, /defer and /skip tests below."""
    sim, number = a_fork(ctx)
    reply = await say(ctx, number, command, user=refused)
    assert f"@{refused} has read access" in reply and "needs" in reply
    name = command.split()[0][1:]
    assert f"Usage: `{COMMANDS[name].USAGE.line}`" in reply
    assert not mirror_of(ctx).exists() and git_traffic(sim) == 0  # git never called
    assert queued(ctx) == []
    assert audit(ctx) == [(refused, command, "refused")]
    # the role is GitHub's answer, never the payload's `author_association` (MEMBER here for everyone)
    assert ("GET", f"/repos/{FORK}/collaborators/{refused}/permission", 200) in sim.requests


async def test_a_user_github_does_not_know_has_no_role(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    sim.fail_next("GET", r"/collaborators/ghost/permission$", 404, body={"message": "Not Found"})
    reply = await say(ctx, number, "/ingest", user="ghost")
    assert "@ghost has no access to" in reply
    assert queued(ctx) == []


async def test_anyone_may_ask_for_status_and_help(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    assert "No ingestion run has finished yet" in await say(ctx, number, "/status", user="stranger")
    help_reply = await say(ctx, number, "/help", user="stranger")
    for command in COMMANDS.values():
        assert f"- {command.HELP} (who: {command.WHO.described})" in help_reply
    assert "(who: write access to the repository)" in help_reply
    assert "(who: a code owner of the files it is about, with write access)" in help_reply
    assert reactions(sim, number) == ["+1", "+1"]
    assert not any(path.endswith("/permission") for _, path, _ in sim.requests)  # no role was needed
    assert [outcome for _, _, outcome in audit(ctx)] == ["accepted", "accepted"]


# ------------------------------------------------------------------ hostile arguments


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("/cherry-pick 1872;rm", "is not a PR number"),
        ("/cherry-pick --upload-pack=x", "is not an option"),
        ("/cherry-pick -1", "is not an option"),
        ("/cherry-pick \u0661\u0668\u0667\u0662", "is not a PR number"),
        ("/cherry-pick 1872 1873", "too many arguments"),
        ('/cherry-pick 1872 --reason "unbalanced', "do not parse"),
        ("/cherry-pick 1872 --force", "is not an option"),
        ("/defer HEAD~1", "is not an upstream SHA"),
        ("/defer --exec=id", "is not an option"),
        ("/ingest main..evil", "is not a ref"),
        ("/ingest --upload-pack=touch", "is not an option"),
        ("/skip 1234567", "--reason is required"),
    ],
)
async def test_hostile_arguments_are_refused_with_the_usage_and_git_is_never_called(
    ctx: Context, body: str, why: str
) -> None:
    sim, number = a_fork(ctx)
    sim.set_permission(FORK, "alice", "admin")  # allowed: only the arguments are wrong
    reply = await say(ctx, number, body, user="alice")
    name = body.split()[0][1:]
    assert why in reply and f"Usage: `{COMMANDS[name].USAGE.line}`" in reply
    assert not mirror_of(ctx).exists() and git_traffic(sim) == 0
    assert not any(UPSTREAM in path for _, path, _ in sim.requests)  # upstream was not even asked
    assert queued(ctx) == [] and reactions(sim, number) == []
    ((actor, line, outcome),) = audit(ctx)
    assert (actor, outcome) == ("alice", "refused") and line == body


async def test_an_unmerged_upstream_pull_is_refused_before_any_git_call(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    pull = await merged_upstream_pull(ctx, {"fix.txt": "fixed\n"}, number=1900, merge=False)
    # As on GitHub, an open PR has a test merge commit as its `merge_commit_sha`: only `merged` counts.
    assert pull["merged"] is False and pull["merge_commit_sha"] is not None
    before = git_traffic(sim)
    reply = await say(ctx, number, "/cherry-pick 1900")
    assert "upstream PR #1900 is not merged (open)" in reply
    assert ("GET", f"/repos/{UPSTREAM}/pulls/1900", 200) in sim.requests  # asked anonymously: it is public
    assert not mirror_of(ctx).exists() and git_traffic(sim) == before
    missing = await say(ctx, number, "/cherry-pick 4242")
    assert f"{UPSTREAM} has no PR #4242 that Sluice can see" in missing
    assert [outcome for _, _, outcome in audit(ctx)] == ["refused", "refused"]


async def test_a_sha_not_on_upstreams_first_parent_stream_is_refused(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    side = sim.commit(UPSTREAM, "side", {"side.txt": "x\n"}, message="a branch that never merged")
    reply = await say(ctx, number, f"/cherry-pick {side[:12]}")
    assert "is not a commit on upstream's first-parent stream" in reply
    assert not emergencies(sim)


# ------------------------------------------------------------------ a first line that is almost a command


async def test_an_over_long_command_line_is_refused_with_its_length_and_audited(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    body = '/hold "' + "x" * MAX_LINE + '"'
    reply = await say(ctx, number, body)
    assert f'Sluice did not run `/hold "{"x" * 39}…`' in reply
    assert f"the command line is {len(body)} characters; at most {MAX_LINE}" in reply
    assert f"Usage: `{COMMANDS['hold'].USAGE.line}`" in reply and "x" * 100 not in reply
    assert reactions(sim, number) == [] and queued(ctx) == []
    assert [(actor, outcome) for actor, _, outcome in audit(ctx)] == [("alice", "refused")]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("/hold\u00a0release freeze", "U+00A0 (no-break space) at column 6"),
        ("/ingest \x1b[2J", "U+001B (a control character) at column 9"),
        ("/frobnicate\u200bnow", "U+200B (zero width space) at column 12"),  # no such command, answered too
    ],
)
async def test_an_odd_character_in_a_command_line_is_named_in_the_refusal(
    ctx: Context, body: str, named: str
) -> None:
    sim, number = a_fork(ctx)
    reply = await say(ctx, number, body, user="mallory")  # read access: what is wrong comes before who
    assert "@mallory: Sluice did not run `/" in reply and f"the line holds {named}" in reply
    assert "write it again with plain spaces" in reply
    assert reply.isascii()  # the odd character is escaped, never echoed
    assert not any(path.endswith("/permission") for _, path, _ in sim.requests)
    assert reactions(sim, number) == [] and queued(ctx) == []
    ((actor, line, outcome),) = audit(ctx)
    assert (actor, outcome) == ("mallory", "refused") and line.isascii()


@pytest.mark.parametrize("body", ["/usr/bin/env is broken", "/help.", "/tmp/build.log attached"])
async def test_prose_that_starts_with_a_slash_gets_no_answer(ctx: Context, body: str) -> None:
    sim, number = a_fork(ctx)
    assert await say(ctx, number, body) == ""
    assert audit(ctx) == [] and reactions(sim, number) == []


async def test_a_waiver_with_a_long_reason_and_plan_is_granted(ctx: Context) -> None:
    l2 = "tiers:\n  l2:\n    suites: [{name: numerics, builtin: numerics}]\n    owner: '@meta/gpu'\n"
    gate = l2 + "gate:\n  required_tiers: [l1, l2]\n  auto_merge: false\n"
    sim, _ = a_fork(ctx, fork_files={".github/sluice.yml": fork_config(ctx.web_url, UPSTREAM) + gate})
    trunk = sim.git(FORK, "rev-parse", "main")
    head = sim.commit(FORK, "sluice/ingest/u1", {"docs/new.md": "new\n"}, message="docs", parent=trunk)
    pull = sim.open_pull(FORK, head="sluice/ingest/u1", base="main", title="Ingest", user=sim.bot_login)
    sim.finish_check(FORK, head, CheckName.L1.value, "success")
    sim.finish_check(FORK, head, CheckName.L2.value, "failure")
    sim.add_team_member("meta/gpu", "dan")
    reason, plan = ("the GPU pool is being replaced. " * 10)[:300], ("rerun on the new pool. " * 11)[:250]
    until = (ctx.clock() + dt.timedelta(days=14)).date().isoformat()
    body = f'/waive l2 --until {until} --reason "{reason}" --plan "{plan}"'
    assert len(body) > 500 + len("/waive ")  # longer than the whole line could be before
    reply = await say(ctx, int(pull["number"]), body, user="dan")
    assert "L2 is waived on" in reply, reply
    (waiver,) = ctx.gates.waivers(FORK, int(pull["number"]))
    assert (waiver.reason, waiver.recovery_plan) == (reason.strip(), plan.strip())
    assert audit(ctx) == [("dan", body, "accepted")]  # the whole line, as the comment had it


def test_the_audit_log_holds_the_longest_line_read_as_a_command() -> None:
    assert LINE_CHARS >= MAX_LINE


# ------------------------------------------------------------------ /cherry-pick


async def test_cherry_pick_opens_an_emergency_pr_and_days_behind_upstream_stays(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    upstream_commit(sim, {"docs/guide.md": "guide\n"}, message="docs: a guide", at=OLD + dt.timedelta(days=1))
    pull = await merged_upstream_pull(ctx, {"fix.txt": "fixed\n"})
    fix = pull["merge_commit_sha"]
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "test"})
    (before,) = LagHistory(ctx.store).history(FORK)
    assert before.days_behind is not None and before.days_behind > 9  # the tip is the ten-day-old commit

    reply = await say(ctx, number, '/cherry-pick 1872 --reason "the crash blocks the release"')
    assert reply.startswith("<!-- sluice:reply:") and "Opened #" in reply and "code owner" in reply
    (emergency,) = emergencies(sim)
    assert emergency["base"]["ref"] == "main" and emergency["state"] == "open"
    assert [label["name"] for label in emergency["labels"]] == ["sluice:emergency"]
    body = emergency["body"]
    assert "the crash blocks the release" in body and "upstream PR #&#8203;1872" in body
    assert "#1872" not in body  # upstream's PR number never links the fork's own #1872
    head = emergency["head"]["sha"]
    message = sim.git(FORK, "log", "-1", "--format=%B", head)
    assert f"Upstream-Commit: {fix}" in message and "Sluice-Kind: emergency" in message
    assert sim.git(FORK, "rev-parse", f"{head}^") == sim.git(FORK, "rev-parse", "main")  # its own unit
    (l1,) = [r for r in sim.check_runs[FORK] if r["head_sha"] == head]
    assert (l1["name"], l1["status"]) == ("sluice/L1", "queued")
    assert reactions(sim, number) == ["+1"]
    assert ctx.store.dispositions(FORK)[fix].disposition == Disposition.EMERGENCY

    # The emergency PR merges; the next ingestion run recognises the pick and leaves the tip where it was.
    token = sim.installation_token(sim.install(FORK))
    async with (
        aiohttp.ClientSession() as http,
        http.put(
            f"{ctx.web_url}/repos/{FORK}/pulls/{emergency['number']}/merge",
            json={"sha": head},
            headers={"Authorization": f"token {token}"},
        ) as resp,
    ):
        assert resp.status == 200
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "test"})
    after = LagHistory(ctx.store).history(FORK)[-1]
    assert after.ingestion_tip == before.ingestion_tip and after.upstream_head == before.upstream_head == fix
    assert after.days_behind == before.days_behind
    assert after.pending_commits == before.pending_commits - 1  # the fix is in; the guide still waits
    status = await say(ctx, number, "/status", user="stranger")
    assert f"Days Behind Upstream: **{after.days_behind:.1f}**" in status
    assert [outcome for _, _, outcome in audit(ctx)] == ["accepted", "accepted"]


async def test_cherry_pick_by_sha_and_a_second_request_changes_nothing(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    fix = digits_commit(sim, {"fix.txt": "fixed\n"}, at=OLD, digits=False)
    assert "Opened #" in await say(ctx, number, f"/cherry-pick {fix[:9].upper()}")
    again = await say(ctx, number, f"/cherry-pick {fix}", user="carol")
    assert "already open as #" in again
    (emergency,) = emergencies(sim)
    # GitHub's `pull_request` event for it: an emergency pick is no fork PR growing the patch stack.
    await dispatch(ctx, "pull_request", sim.pull_request_payload(FORK, emergency["number"], "opened"))
    assert sim.comment_objects(FORK, emergency["number"]) == []


async def test_an_emergency_pick_closed_unmerged_gives_its_commit_back_to_regular_ingestion(
    ctx: Context,
) -> None:
    """The pick was not needed after all: its commit goes back to pending and the next plan carries it;
    once a bundle brings it in, it is `ingested`, not an emergency pick forever."""
    sim, number = a_fork(ctx)
    fix = digits_commit(sim, {"fix.txt": "fixed\n"}, at=OLD, digits=False)
    assert "Opened #" in await say(ctx, number, f"/cherry-pick {fix}")
    (emergency,) = emergencies(sim)
    assert ctx.store.dispositions(FORK)[fix].disposition is Disposition.EMERGENCY
    token = sim.installation_token(sim.install(FORK))
    async with aiohttp.ClientSession() as http:
        closing = {
            "url": f"{ctx.web_url}/repos/{FORK}/pulls/{emergency['number']}",
            "json": {"state": "closed"},
        }
        async with http.patch(**closing, headers={"Authorization": f"token {token}"}) as answer:
            assert answer.status == 200
    await dispatch(ctx, "pull_request", sim.pull_request_payload(FORK, emergency["number"], "closed"))

    pending = ctx.store.dispositions(FORK)[fix]
    assert (pending.disposition, pending.reason) == (
        Disposition.PENDING,
        f"emergency pick #{emergency['number']} closed unmerged",
    )
    assert ("ingest", FORK) in queued(ctx)
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "test"})
    carried = ctx.store.dispositions(FORK)[fix]
    assert carried.disposition in (Disposition.BUNDLED, Disposition.CHAINED) and carried.group_id is not None


async def test_an_emergency_picked_commit_that_regular_ingestion_brings_in_is_ingested(ctx: Context) -> None:
    """The emergency pick's disposition held the commit while it was urgent; once a bundle brings it in
    regularly, the commit is `ingested` like any other, not an emergency pick forever."""
    sim, number = a_fork(ctx)
    fix = digits_commit(sim, {"fix.txt": "fixed\n"}, at=OLD, digits=False)
    assert "Opened #" in await say(ctx, number, f"/cherry-pick {fix}")
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "test"})
    (bundle,) = [
        p for p in sim.pulls[FORK] if p["state"] == "open" and p["head"]["ref"].startswith(BRANCH_PREFIX)
    ]
    token = sim.installation_token(sim.install(FORK))
    async with aiohttp.ClientSession() as http:
        merging = {"url": f"{ctx.web_url}/repos/{FORK}/pulls/{bundle['number']}/merge", "json": {}}
        async with http.put(**merging, headers={"Authorization": f"token {token}"}) as answer:
            assert answer.status == 200
    assert ctx.store.dispositions(FORK)[fix].disposition is Disposition.EMERGENCY

    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "test"})

    assert ctx.store.dispositions(FORK)[fix].disposition is Disposition.INGESTED


async def test_a_cherry_pick_whose_job_failed_after_its_pr_opened_is_finished_by_the_retry(
    ctx: Context,
) -> None:
    """GitHub took the PR but failed L1's check run (a POST's 5xx is not repeated): the job's retry finds the
    PR open and does what is left, once: one L1 check run, the disposition, the ingestion run."""
    sim, number = a_fork(ctx)
    fix = digits_commit(sim, {"fix.txt": "fixed\n"}, at=OLD, digits=False)
    payload = sim.issue_comment_payload(
        FORK, sim.add_comment(FORK, number, f"/cherry-pick {fix}", user="alice")
    )
    sim.fail_next("POST", rf"/repos/{FORK}/check-runs$", 503)
    with pytest.raises(GitHubBroken):
        await ROUTES.dispatch(attempt_of(payload, 1), ctx=ctx)
    (emergency,) = emergencies(sim)
    assert not sim.check_runs[FORK] and fix not in ctx.store.dispositions(FORK)
    await ROUTES.dispatch(attempt_of(payload, 2), ctx=ctx)
    await say(ctx, number, f"/cherry-pick {fix}", user="carol")  # and once more, by someone else
    (emergency,) = emergencies(sim)
    assert [label["name"] for label in emergency["labels"]] == ["sluice:emergency"]
    runs = [r["name"] for r in sim.check_runs[FORK] if r["head_sha"] == emergency["head"]["sha"]]
    assert runs == ["sluice/L1"]
    assert ctx.store.dispositions(FORK)[fix].disposition == Disposition.EMERGENCY
    record = ctx.gates.audit(FORK, emergency["number"])
    assert record is not None and record.commits[0].upstream == fix


async def test_a_same_named_branch_in_another_repository_is_not_the_pick(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    fix = digits_commit(sim, {"fix.txt": "fixed\n"}, at=OLD, digits=False)
    sim.create_repo("outsider/triton")
    sim.git("outsider/triton", "fetch", "--quiet", str(sim.repo_path(FORK)), "main:main")
    branch = f"{EMERGENCY_PREFIX}{fix[:10]}"
    sim.commit(
        "outsider/triton", branch, {"x.txt": "x\n"}, message="mine", parent=sim.git(FORK, "rev-parse", "main")
    )
    theirs = sim.open_pull(FORK, head=f"outsider:{branch}", base="main", title="mine", user="outsider")
    reply = await say(ctx, number, f"/cherry-pick {fix}")
    assert "Opened #" in reply and f"#{theirs['number']}" not in reply
    status = await say(ctx, number, "/status", user="stranger")
    assert "Open emergency picks: 1" in status and f"#{theirs['number']} " not in status


async def test_a_sha_prefix_of_digits_alone_is_the_commit_when_upstream_has_no_such_pr(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    fix = digits_commit(sim, {"fix.txt": "fixed\n"}, at=OLD)
    reply = await say(ctx, number, f"/cherry-pick {fix[:9]}")
    assert "Opened #" in reply, reply
    assert ("GET", f"/repos/{UPSTREAM}/pulls/{int(fix[:9])}", 404) in sim.requests
    (emergency,) = emergencies(sim)
    assert f"Upstream-Commit: {fix}" in sim.git(FORK, "log", "-1", "--format=%B", emergency["head"]["sha"])


async def refused_as_ambiguous(ctx: Context, *, merge: bool) -> tuple[GitHubSim, int, str, dict[str, Any]]:
    """A fork, an upstream commit whose SHA starts with 8 digits, an upstream PR (merged or open) numbered
    by them, and `/cherry-pick <digits>` refused as ambiguous: (sim, issue, digits, the PR)."""
    sim, number = a_fork(ctx)
    side = digits_commit(sim, {"side.txt": "side\n"}, at=OLD)
    prefix = side[:8]
    pull = await merged_upstream_pull(ctx, {"fix.txt": "fixed\n"}, number=int(prefix), merge=merge)
    reply = await say(ctx, number, f"/cherry-pick {prefix}")
    both = f"`{prefix}` is both upstream PR #{int(prefix)} and the start of upstream commit `{side[:10]}`"
    assert both in reply, reply
    assert f"write `#{int(prefix)}` for the PR" in reply and "not merged" not in reply
    assert not emergencies(sim)
    return sim, number, prefix, pull


async def test_digits_that_name_both_an_upstream_pr_and_a_commit_are_refused_until_written_hash_n(
    ctx: Context,
) -> None:
    sim, number, prefix, pull = await refused_as_ambiguous(ctx, merge=True)
    assert "Opened #" in await say(ctx, number, f"/cherry-pick #{int(prefix)}")
    (emergency,) = emergencies(sim)
    picked = sim.git(FORK, "log", "-1", "--format=%B", emergency["head"]["sha"])
    assert f"Upstream-Commit: {pull['merge_commit_sha']}" in picked
    assert [outcome for _, _, outcome in audit(ctx)] == ["refused", "accepted"]


async def test_digits_of_an_unmerged_upstream_pr_are_ambiguous_only_when_a_commit_also_starts_so(
    ctx: Context,
) -> None:
    sim, number, prefix, _ = await refused_as_ambiguous(ctx, merge=False)
    # The same open PR written as `#N` is that PR alone: refused because it is not merged.
    hashed = await say(ctx, number, f"/cherry-pick #{prefix}")
    assert f"upstream PR #{int(prefix)} is not merged (open)" in hashed
    # Digits no upstream commit starts with are the open PR, refused as such.
    other = str(int(prefix) + 1)
    await merged_upstream_pull(ctx, {"other.txt": "other\n"}, number=int(other), merge=False)
    assert f"upstream PR #{other} is not merged (open)" in await say(ctx, number, f"/cherry-pick {other}")
    assert not emergencies(sim)
    assert [outcome for _, _, outcome in audit(ctx)] == ["refused", "refused", "refused"]


async def test_cherry_pick_of_a_commit_the_fork_has_is_refused(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    base = sim.git(UPSTREAM, "rev-parse", "main")
    assert "already in the fork" in await say(ctx, number, f"/cherry-pick {base[:10]}")


# ------------------------------------------------------------------ /ingest, /defer, /skip


async def test_ingest_queues_a_run_up_to_an_upstream_commit(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    first = upstream_commit(sim, {"a.txt": "a\n"}, message="a", at=OLD + dt.timedelta(days=1))
    risky = {CORE: "void pipeline();\n"}  # a core pass: a risky chain of its own, after the bundle
    upstream_commit(sim, risky, message="[Pipeliner] b", at=OLD + dt.timedelta(days=2))
    reply = await say(ctx, number, "/ingest")
    assert "is queued" in reply and reactions(sim, number) == ["eyes"]
    assert queued(ctx) == [("ingest", FORK)]
    sim.git(UPSTREAM, "tag", "--annotate", "v3.2.0", "--message", "release 3.2.0", first)
    for named in (first[:10], "v3.2.0"):
        await say(ctx, number, f"/ingest {named}")
        claimed = ctx.queue.claim("t", lease=dt.timedelta(minutes=1), now=dt.datetime.now(dt.UTC))
        assert claimed is not None and claimed.payload["upto"] == first
        ctx.queue.complete(claimed.id, "t", now=dt.datetime.now(dt.UTC))
    assert "upstream has no tag or branch `v9`" in await say(ctx, number, "/ingest v9")
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "/ingest v3.2.0", "upto": first})
    (pull,) = [p for p in sim.pulls[FORK] if p["state"] == "open"]  # only the units up to `first`
    assert pull["title"] == f"[sluice] bundle: 1 upstream commit ({first[:7]}..{first[:7]})"
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "the next regular run"})
    assert len([p for p in sim.pulls[FORK] if p["state"] == "open"]) == 2  # the bundle stays, the chain opens


async def test_defer_records_the_disposition_and_replans(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    sha = upstream_commit(sim, {"a.txt": "a\n"}, message="feat: later", at=OLD + dt.timedelta(days=1))
    reply = await say(ctx, number, f"/defer {sha[:8]}", user="dan")
    assert f"`{sha[:10]}` feat: later is deferred to the backlog by @dan" in reply
    record = ctx.store.dispositions(FORK)[sha]
    assert record.disposition == Disposition.DEFERRED and record.approver == "dan"
    assert queued(ctx) == [("ingest", FORK)]
    assert audit(ctx) == [("dan", f"/defer {sha[:8]}", "accepted")]


async def test_skip_needs_a_code_owner_of_the_files_the_commit_touches(ctx: Context) -> None:
    codeowners = "* @carol\n/lib/ @dan\n"
    sim, number = a_fork(ctx, fork_files={".github/CODEOWNERS": codeowners})
    sha = upstream_commit(sim, {CORE: "void f();\n"}, message="[Pipeliner] rewrite", at=OLD)
    refused = await say(ctx, number, f'/skip {sha[:10]} --reason "we keep ours"', user="alice")
    assert "needs a code owner of upstream commit" in refused and f"`{CORE}` (`@dan`)" in refused  # no ping
    assert sha not in ctx.store.dispositions(FORK)
    reply = await say(ctx, number, f'/skip {sha[:10]} --reason "we keep ours"', user="dan")
    assert "is skipped (won't port) by @dan" in reply and "Reason: we keep ours" in reply
    record = ctx.store.dispositions(FORK)[sha]
    assert (record.disposition, record.reason, record.approver) == (
        Disposition.SKIPPED,
        "we keep ours",
        "dan",
    )
    assert [(a, o) for a, _, o in audit(ctx)] == [("alice", "refused"), ("dan", "accepted")]


async def test_a_redelivered_command_keeps_one_audit_row_and_one_reply(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    payload = sim.issue_comment_payload(FORK, sim.add_comment(FORK, number, "/cherry-pick -1", user="alice"))
    await ROUTES.dispatch(as_job(payload), ctx=ctx)
    await ROUTES.dispatch(as_job(payload), ctx=ctx)
    assert len(replies(sim, number)) == 1 and len(audit(ctx)) == 1


async def test_a_command_failing_underneath_for_good_says_so_and_is_audited_as_failed(
    ctx: Context,
) -> None:
    sim, number = a_fork(ctx)
    await merged_upstream_pull(ctx, {"fix.txt": "fixed\n"})
    sim.fail_next("GET", rf"/repos/{UPSTREAM}/pulls/1872$", 403, body={"message": "Forbidden"})
    with pytest.raises(BadRequest):  # a 403: the worker records it and fails the job: no retry can help
        await say(ctx, number, "/cherry-pick 1872")
    assert audit(ctx) == [("alice", "/cherry-pick 1872", "failed")]
    (entry,) = CommandAudit(ctx.store).entries(FORK)
    assert entry.reason.startswith("GitHub answered 403")
    (answer,) = replies(sim, number)
    assert "@alice: `/cherry-pick 1872` failed: GitHub answered 403" in answer
    assert "To fix: grant the App the permission GitHub names" in answer
    assert "Traceback" not in answer and "token" not in answer.lower()
    assert not mirror_of(ctx).exists()


def attempt_of(payload: dict[str, Any], attempts: int) -> Any:
    return dataclasses.replace(as_job(payload), attempts=attempts)


async def test_a_command_whose_answer_fails_for_now_is_answered_once_by_the_retry(ctx: Context) -> None:
    sim, number = a_fork(ctx)
    payload = sim.issue_comment_payload(FORK, sim.add_comment(FORK, number, "/help", user="alice"))
    sim.fail_next("POST", rf"/repos/{FORK}/issues/{number}/comments$", 503)  # the reply, after the reaction
    with pytest.raises(GitHubBroken):
        await ROUTES.dispatch(attempt_of(payload, 1), ctx=ctx)
    assert replies(sim, number) == []  # no failure reply: the retry answers
    assert audit(ctx) == [("alice", "/help", "accepted")]  # it ran: the retry answers, never runs it again
    await ROUTES.dispatch(attempt_of(payload, 2), ctx=ctx)
    (answer,) = replies(sim, number)
    assert "Sluice understands these commands" in answer and "`/help` failed" not in answer
    assert reactions(sim, number) == ["+1"]  # one reaction, though the job ran twice
    assert audit(ctx) == [("alice", "/help", "accepted")]


async def test_a_pause_whose_answer_failed_is_answered_as_done_not_refused_as_already_paused(
    ctx: Context,
) -> None:
    sim, number = a_fork(ctx)
    comment = sim.add_comment(FORK, number, '/pause "for the LLVM bump"', user="carol")  # a maintainer
    payload = sim.issue_comment_payload(FORK, comment)
    sim.fail_next("POST", rf"/repos/{FORK}/issues/{number}/comments$", 503)  # the reply, after the pause
    with pytest.raises(GitHubBroken):
        await ROUTES.dispatch(attempt_of(payload, 1), ctx=ctx)
    assert ctx.gates.paused(FORK) is not None and replies(sim, number) == []
    await ROUTES.dispatch(attempt_of(payload, 2), ctx=ctx)
    (answer,) = replies(sim, number)
    assert "Automatic ingestion of meta/triton is paused by @carol: for the LLVM bump." in answer
    assert "already paused" not in answer
    assert audit(ctx) == [("carol", '/pause "for the LLVM bump"', "accepted")]
    await ROUTES.dispatch(as_job(payload), ctx=ctx)  # delivered once more: the same one answer
    assert replies(sim, number) == [answer]


async def test_a_command_failing_on_the_jobs_last_attempt_says_it_failed(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(github_client, "SERVER_ERROR_BACKOFF_S", 0.001)  # the client's own retries, quickly
    sim, number = a_fork(ctx)
    await merged_upstream_pull(ctx, {"fix.txt": "fixed\n"})
    comment = sim.add_comment(FORK, number, "/cherry-pick 1872", user="alice")
    sim.fail_next("GET", rf"/repos/{UPSTREAM}/pulls/1872$", 503, times=10)  # what the pick reads
    with pytest.raises(GitHubBroken):
        await ROUTES.dispatch(attempt_of(sim.issue_comment_payload(FORK, comment), MAX_ATTEMPTS), ctx=ctx)
    (answer,) = replies(sim, number)
    assert "`/cherry-pick 1872` failed: GitHub answered 503" in answer and "tried again later" in answer
    assert audit(ctx) == [("alice", "/cherry-pick 1872", "failed")]


async def test_a_reaction_refused_on_the_jobs_last_attempt_still_leaves_the_commands_answer(
    ctx: Context,
) -> None:
    """The command ran; only its reaction failed: the answer is what it did, not that it failed."""
    sim, number = a_fork(ctx)
    payload = sim.issue_comment_payload(FORK, sim.add_comment(FORK, number, "/help", user="alice"))
    sim.fail_next("POST", r"/reactions$", 503)
    await ROUTES.dispatch(attempt_of(payload, MAX_ATTEMPTS), ctx=ctx)
    (answer,) = replies(sim, number)
    assert "Sluice understands these commands" in answer and "`/help` failed" not in answer
    assert audit(ctx) == [("alice", "/help", "accepted")]


def audit_reasons(ctx: Context) -> list[tuple[str, str, str, str]]:
    return [(e.actor, e.line, e.outcome, e.reason) for e in CommandAudit(ctx.store).entries(FORK)]


async def test_skip_by_a_member_of_an_owning_team(ctx: Context) -> None:
    sim, number = a_fork(ctx, fork_files={".github/CODEOWNERS": "/lib/ @meta/compiler\n"})
    sha = upstream_commit(sim, {CORE: "void f();\n"}, message="[Pipeliner] rewrite", at=OLD)
    refused = await say(ctx, number, f'/skip {sha[:10]} --reason "ours"', user="alice")
    assert f"`{CORE}` (`@meta/compiler`)" in refused
    sim.add_team_member("@meta/compiler", "alice")
    assert "is skipped (won't port) by @alice" in await say(ctx, number, f'/skip {sha[:10]} --reason "ours"')


async def test_skip_and_defer_are_refused_on_a_merge_fork(ctx: Context) -> None:
    config = fork_config(ctx.web_url, UPSTREAM) + "strategy: merge\n"
    sim, number = a_fork(ctx, fork_files={".github/sluice.yml": config})
    sha = upstream_commit(sim, {"docs/a.md": "a\n"}, message="docs: a", at=OLD)
    for line in (f'/skip {sha[:10]} --reason "ours"', f"/defer {sha[:10]}"):
        reply = await say(ctx, number, line, user="dan")
        assert "no commit can be skipped or deferred while later ones go in" in reply, reply
    assert sha not in ctx.store.dispositions(FORK) and queued(ctx) == []


async def test_what_people_and_upstream_wrote_is_echoed_inert(ctx: Context) -> None:
    """A reason or an upstream subject in a reply pings nobody, links nothing and renders no HTML; a marker
    of Sluice's sticky comments quoted back in a refusal does not make the refusal one of them."""
    sim, number = a_fork(ctx)
    loud = "ping @carol <b>now</b> (#1)"
    held_on_issue = await say(ctx, number, f'/pause "{loud}"', user="carol")
    resumed = await say(ctx, number, "/resume", user="carol")
    sha = upstream_commit(sim, {"a.txt": "a\n"}, message=f"feat: {loud}", at=OLD + dt.timedelta(days=1))
    deferred = await say(ctx, number, f'/defer {sha[:8]} --reason "{loud}"', user="dan")
    for reply in (held_on_issue, resumed, deferred):
        assert "ping @&#8203;carol &lt;b&gt;now&lt;/b&gt; (#&#8203;1)" in reply and "ping @carol" not in reply
    fork = ctx.registry.fork(FORK)
    assert fork is not None
    forge = ctx.forge(fork.installation_id, FORK)
    refused = await say(ctx, number, f"/status {PATCH_STACK_MARKER}", user="mallory")
    assert PATCH_STACK_MARKER in refused  # quoted back, in code
    assert await forge.find_comment(number, marker=PATCH_STACK_MARKER) is None


async def test_words_of_an_unquoted_reason_are_refused_with_how_to_quote_them(ctx: Context) -> None:
    _, number = a_fork(ctx)
    reply = await say(ctx, number, "/pause release freeze today", user="carol")
    assert 'Usage: `/pause ["reason"]` (quote the reason, as in `/pause "release freeze today"`).' in reply


async def test_ingest_while_ingestion_is_paused_is_refused(ctx: Context) -> None:
    _, number = a_fork(ctx)
    ctx.gates.pause(FORK, by="carol", reason="LLVM bump in progress", at=dt.datetime.now(dt.UTC))
    reply = await say(ctx, number, "/ingest")
    assert "is paused by @carol: LLVM bump in progress" in reply and "`/resume` it first" in reply
    assert queued(ctx) == [] and not mirror_of(ctx).exists()


# ------------------------------------------------------------------ an emergency pick through the gate


async def finish_l1(ctx: Context, head: str) -> None:
    """L1 succeeds on `head`, and GitHub's `check_run` event for it is routed, with its `pull_requests` left
    empty as GitHub leaves it for some runs: Sluice finds the emergency pick's PR by its head."""
    sim = sim_of(ctx)
    payload = sim.check_run_completed_payload(FORK, sim.finish_check(FORK, head, "sluice/L1", "success"))
    assert [p["number"] for p in payload["check_run"]["pull_requests"]] != []
    payload["check_run"]["pull_requests"] = []
    await dispatch(ctx, "check_run", payload)


async def approve(ctx: Context, number: int, user: str) -> None:
    sim = sim_of(ctx)
    review = sim.review(FORK, number, user=user, state="APPROVED")
    await dispatch(ctx, "pull_request_review", sim.review_payload(FORK, number, review))


def gate_run(sim: GitHubSim, head: str) -> dict[str, Any]:
    return [r for r in sim.check_runs[FORK] if r["head_sha"] == head and r["name"] == "sluice/gate"][-1]


async def an_emergency_pick(ctx: Context) -> tuple[GitHubSim, dict[str, Any]]:
    """A fork that merges by itself (`gate.auto_merge`), `fix.txt` owned by @dan (the rest by @carol), one
    ingestion run, then `/cherry-pick 1872` (upstream's PR that fixes `fix.txt`); its PR."""
    files = {
        ".github/sluice.yml": "gate:\n  auto_merge: true\n",
        ".github/CODEOWNERS": "* @carol\nfix.txt @dan\n",
    }
    sim, number = a_fork(ctx, fork_files=files)
    upstream_commit(sim, {"docs/guide.md": "guide\n"}, message="docs: a guide", at=OLD + dt.timedelta(days=1))
    await merged_upstream_pull(ctx, {"fix.txt": "fixed\n"})
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "test"})
    assert "Opened #" in await say(ctx, number, "/cherry-pick 1872")
    (pull,) = emergencies(sim)
    return sim, pull


async def test_the_gate_commands_work_on_an_emergency_pick(ctx: Context) -> None:
    """It goes through the same gate: `/hold` keeps it from merging, `/approve` by a code owner of its files
    is the approval it needs (a review's equal), `/unhold` lets it merge."""
    sim, pull = await an_emergency_pick(ctx)
    pick, head = int(pull["number"]), pull["head"]["sha"]
    await finish_l1(ctx, head)
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "the dashboard shows the pick"})
    (board,) = [i for i in sim.issues[FORK].values() if not i.is_pull and DASHBOARD in (i.body or "")]
    row = next(line for line in (board.body or "").splitlines() if line.startswith(f"| #{pick} |"))
    assert f"| `emergency-{pull['head']['ref'][-10:]}` | 1 | success |" in row

    held = await say(ctx, pick, '/hold "wait for the release"')
    assert f"#{pick} is held by @alice: wait for the release" in held
    refused = await say(ctx, pick, "/approve", user="carol")  # owns `*`, not `fix.txt`
    assert f"`/approve` needs a code owner of the emergency pick of #{pick}" in refused and "@dan" in refused
    approved = await say(ctx, pick, "/approve", user="dan")
    assert f"@dan approved #{pick}'s emergency pick on head `{head[:10]}` (`fix.txt`)" in approved
    assert "the gate is closed" in approved and not sim.issues[FORK][pick].merged  # the hold
    assert "Sluice merged the PR" in await say(ctx, pick, "/unhold")
    assert sim.issues[FORK][pick].merged and gate_run(sim, head)["conclusion"] == "success"
    assert [outcome for _, _, outcome in audit(ctx)][-4:] == ["accepted", "refused", "accepted", "accepted"]


async def test_an_emergency_pick_merges_after_l1_and_a_code_owners_approval(ctx: Context) -> None:
    sim, pull = await an_emergency_pick(ctx)
    (before,) = LagHistory(ctx.store).history(FORK)  # the pick added none: it ran no ingestion
    trunk = sim.git(FORK, "rev-parse", "main")
    head, pick = pull["head"]["sha"], pull["head"]["ref"].removeprefix(EMERGENCY_PREFIX)
    opened = GateStore(ctx.store).audit(FORK, pull["number"])  # the record opens with the PR
    assert opened is not None and (opened.kind, opened.state, opened.head) == (
        "emergency",
        AuditState.OPEN,
        head,
    )
    (picked,) = opened.commits
    assert picked.upstream == opened.upstream_target and picked.subject == "[Fix] the crash (#1872)"
    assert picked.commit == head and opened.upstream_base == sim.git(
        UPSTREAM, "rev-parse", f"{picked.upstream}^"
    )

    await finish_l1(ctx, head)  # L1 alone is required (L2 is not, for an emergency pick), but no approval
    gate = gate_run(sim, head)
    assert (gate["status"], gate["conclusion"]) == ("in_progress", None)
    summary = gate["output"]["summary"]
    assert "a code owner's approval of the emergency pick (`fix.txt`)" in summary and "@dan" in summary
    assert "sluice/L1 succeeded" in summary and "sluice/L2" not in summary
    await approve(ctx, pull["number"], "carol")  # owns `*`, but `fix.txt`'s last matching line is @dan's
    assert not sim.issues[FORK][pull["number"]].merged and gate_run(sim, head)["conclusion"] is None

    await approve(ctx, pull["number"], "dan")
    assert sim.issues[FORK][pull["number"]].merged and gate_run(sim, head)["conclusion"] == "success"
    assert sim.git(FORK, "rev-parse", "main~1") == trunk  # rebased: the picked commit itself, on trunk
    assert "Sluice-Kind: emergency" in sim.git(FORK, "log", "-1", "--format=%B", "main")
    tag = f"sluice/rollback/emergency-{pick}"
    assert sim.git(FORK, "rev-parse", f"refs/tags/{tag}") == trunk
    record = GateStore(ctx.store).audit(FORK, pull["number"])
    assert record is not None and record.state is AuditState.CLOSED and record.kind == "emergency"
    assert (record.merge_sha, record.rollback_tag) == (sim.git(FORK, "rev-parse", "main"), tag)
    assert [a.login for a in record.approvals] == ["dan"] and record.commits == opened.commits

    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "after the emergency pick"})
    after = LagHistory(ctx.store).history(FORK)[-1]
    assert (after.ingestion_tip, after.days_behind) == (before.ingestion_tip, before.days_behind)
    assert after.pending_commits == before.pending_commits - 1


async def test_the_forge_reads_files_as_github_serves_them(ctx: Context) -> None:
    """What the gate, the tiers and the commands read from fork trunk (the config, CODEOWNERS): a byte that
    is not UTF-8 as U+FFFD, a directory as no file, a file GitHub serves without content (over 1 MB) as a
    clear error, never as an empty file; a branch name with `#` or `+` reaches GitHub whole."""
    sim, _ = a_fork(ctx)
    sim.commit(
        FORK,
        "release#2+xpu",
        {"a.txt": b"caf\xe9\n", "docs/x.md": "x\n", "big.bin": b"x" * (1024 * 1024 + 1)},
    )
    fork = ctx.registry.fork(FORK)
    assert fork is not None
    forge = ctx.forge(fork.installation_id, FORK)
    assert await forge.read_text("a.txt", ref="release#2+xpu") == "caf\ufffd\n"
    assert await forge.read_text("a.txt", ref="main") is None
    assert await forge.read_text("docs", ref="release#2+xpu") is None
    with pytest.raises(BadInput, match=r"big.bin at release#2\+xpu is 1048577 bytes") as refused:
        await forge.file("big.bin", ref="release#2+xpu")
    assert refused.value.remedy == "keep big.bin under 1 MB"
    sim.fail_next(
        "GET", r"/contents/a\.txt$", 200, body={"type": "file", "encoding": "base64", "content": "abc"}
    )
    with pytest.raises(Unavailable, match=r"contents of a\.txt with content that is not base64") as garbled:
        await forge.file("a.txt", ref="release#2+xpu")
    sim.fail_next("GET", r"/contents/a\.txt$", 200, body={"path": "a.txt", "content": "eA=="})
    with pytest.raises(Unavailable, match=r"contents of a\.txt with an unusable type") as shapeless:
        await forge.file("a.txt", ref="release#2+xpu")
    assert garbled.value.retryable and shapeless.value.retryable


async def test_a_code_owner_command_that_never_checked_ownership_is_a_failure_not_an_answer(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every real command that needs a code owner checks; one that forgot (a bug) must not look done: the
    job fails, the audit says so, and no thumbs-up or answer is given."""
    sim, number = a_fork(ctx)
    acted: list[str] = []

    async def handle(call: Call, *, ctx: Context) -> Outcome:
        acted.append(call.actor)
        return Outcome(done="owned", reply="done")

    careless = SimpleNamespace(
        NAME="owned", HELP="", WHO=Permission.CODE_OWNER, USAGE=Usage("owned"), handle=handle
    )
    # a command module of its own: no real command is careless, and the registry is a plain dict
    monkeypatch.setitem(COMMANDS, "owned", careless)
    with pytest.raises(RuntimeError, match="needs a code owner but did not check ownership"):
        await say(ctx, number, "/owned")
    assert acted == ["alice"] and audit(ctx) == [("alice", "/owned", "failed")]
    assert reactions(sim, number) == []
    assert not any(r == "done" for r in replies(sim, number))
