"""The gate's slash commands against the simulator: /hold, /unhold, /pause, /resume, /waive, /approve, /retry
and /l3 — who may run each, bad arguments refused with the usage line, refused off an ingestion PR (the tier
commands: off a PR Sluice validates), and what each changes. The end-to-end ones run the served bot with its
workers (tests/test_gate_e2e.py's rig)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from bot.app.context import Context
from bot.core.ingestion import CheckName
from bot.core.tiers import Level, RunState, TierRun, Verdict
from bot.db.jobs import jobs
from bot.flows.merge import Outcome
from handlers import gatekeeping
from handlers.commands import COMMANDS
from tests.support.github_sim import GitHubSim
from tests.support.rig import fork_config
from tests.test_gate_e2e import AUTO_L1, CORE_PASS, OURS, SECRET, Rig, start, teardown
from tests.test_handlers import FORK, NOW, UPSTREAM, ctx, dispatch, queued, sim_of
from tests.test_slash_commands import a_fork, audit, reactions, say

__all__ = ["ctx", "teardown"]  # the fixtures, reused
BRANCH = "sluice/ingest/u1"
TWO_TIERS = "gate:\n  required_tiers: [l1, l2]\n  auto_merge: false\n"
WAIVE = '/waive l2 --until {} --reason "the GPU pool is being replaced" --plan "rerun on the new pool"'
ON_A_PULL = ["/hold", "/unhold", "/approve", WAIVE.format("2027-01-01")]
ON_A_VALIDATED_PULL = ["/retry l1", "/l3"]
L3_WORKFLOW = Path(__file__).parent.parent / "deploy" / "workflows" / "sluice-l3.yml"
L1, L2, L3 = Level.L1, Level.L2, Level.L3
PASSED = Verdict.PASSED
PASSES, FAILS = (RunState.COMPLETED, PASSED), (RunState.COMPLETED, Verdict.FAILED)
WAITS, UNDISPATCHED = (RunState.DISPATCHED, None), (RunState.UNDISPATCHED, None)


def an_ingestion_pull(ctx: Context, *, gate: str = "") -> tuple[GitHubSim, int, int]:
    """The fork (see `a_fork`), its config on trunk, an open ingestion PR; (sim, issue, PR)."""
    sim, issue = a_fork(ctx, fork_files={".github/sluice.yml": fork_config(ctx.web_url, UPSTREAM) + gate})
    trunk = sim.git(FORK, "rev-parse", "main")
    sim.commit(FORK, BRANCH, {"docs/new.md": "new\n"}, message="docs: new", parent=trunk)
    pull = sim.open_pull(FORK, head=BRANCH, base="main", title="Ingest upstream", user="sluice[bot]")
    return sim, issue, int(pull["number"])


def head_of(sim: GitHubSim) -> str:
    return sim.git(FORK, "rev-parse", f"refs/heads/{BRANCH}")


def ran(
    ctx: Context,
    number: int,
    level: Level,
    state: RunState = RunState.COMPLETED,
    *,
    verdict: Verdict | None = Verdict.PASSED,
) -> None:
    """A tier run recorded on the ingestion PR's head, as the tiers job records one (passed by default)."""
    head = head_of(sim_of(ctx))
    run = TierRun(FORK, number, "u1", level, head, 1, state, ctx.clock(), verdict=verdict)
    assert ctx.tier_runs.add(run) is not None


def gate_run(sim: GitHubSim, sha: str) -> dict[str, Any]:
    return [r for r in sim.check_runs[FORK] if r["head_sha"] == sha and r["name"] == CheckName.GATE.value][-1]


def nothing_recorded(ctx: Context, number: int) -> bool:
    gates = ctx.gates
    facts = (gates.hold(FORK, number), gates.waivers(FORK, number), gates.approvals(FORK, number))
    return facts == (None, [], []) and gates.paused(FORK) is None


# ------------------------------------------------------------------ who may


@pytest.mark.parametrize(
    ("command", "refused", "role"),
    [
        ('/hold "release freeze"', "mallory", "read"),
        ("/unhold", "mallory", "read"),
        ("/pause", "alice", "write"),  # maintain needed
        ("/resume", "alice", "write"),
        (WAIVE.format("2027-01-01"), "mallory", "read"),
        ("/approve", "mallory", "read"),
        ("/retry", "mallory", "read"),
        ("/l3", "mallory", "read"),
    ],
)
async def test_each_gate_command_refuses_a_commenter_without_the_role(
    ctx: Context, command: str, refused: str, role: str
) -> None:
    sim, _, number = an_ingestion_pull(ctx)
    reply = await say(ctx, number, command, user=refused)
    name = command.split()[0][1:]
    assert f"@{refused} has {role} access" in reply and COMMANDS[name].WHO.described in reply
    assert f"Usage: `{COMMANDS[name].USAGE.line}`" in reply
    assert queued(ctx) == [] and nothing_recorded(ctx, number) and reactions(sim, number) == []
    assert audit(ctx) == [(refused, command, "refused")]


# ------------------------------------------------------------------ bad arguments


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("/hold release freeze", "too many arguments"),
        ("/unhold now", "too many arguments"),
        ("/pause --force", "is not an option"),
        ("/resume all", "too many arguments"),
        ('/waive l2 --reason "r" --plan "p"', "--until is required"),
        ('/waive l2 --until 2027-02-30 --reason "r" --plan "p"', "is not a date"),
        ('/waive l2 --until tomorrow --reason "r" --plan "p"', "is not a date"),
        ('/waive l2 --until 2027-01-01 --reason "r"', "--plan is required"),
        ('/waive l1 --until 2027-01-01 --reason "r" --plan "p"', "L1 is never waived"),
        ('/waive l4 --until 2027-01-01 --reason "r" --plan "p"', "is not a tier"),
        ('/waive l2 --until 2026-11-28 --reason "r" --plan "p"', "is in the past"),  # NOW is 2026-11-29
        ('/waive l2 --until 9999-12-31 --reason "r" --plan "p"', "is more than 90 days away"),
        ("/approve --yes", "is not an option"),
        ("/retry l4", "is not a tier"),
        ("/retry --upload-pack=x", "is not an option"),
        ("/l3 bench extra", "too many arguments"),
        ("/l3 nosuch", "is not an L3 suite"),
    ],
)
async def test_bad_arguments_are_refused_with_the_usage_line_and_change_nothing(
    ctx: Context, body: str, why: str
) -> None:
    sim, _, number = an_ingestion_pull(ctx)
    sim.set_permission(FORK, "alice", "admin")
    reply = await say(ctx, number, body, user="alice")
    name = body.split()[0][1:]
    assert why in reply and f"Usage: `{COMMANDS[name].USAGE.line}`" in reply
    assert queued(ctx) == [] and nothing_recorded(ctx, number) and reactions(sim, number) == []
    assert audit(ctx) == [("alice", body, "refused")]


@pytest.mark.parametrize("body", ON_A_PULL)
async def test_a_pull_command_is_refused_on_an_issue_and_on_a_pull_that_is_no_ingestion(
    ctx: Context, body: str
) -> None:
    sim, issue, _ = an_ingestion_pull(ctx)
    sim.set_permission(FORK, "alice", "admin")
    trunk = sim.git(FORK, "rev-parse", "main")
    sim.commit(FORK, "feature", {"a.txt": "a\n"}, message="a", parent=trunk)
    feature = int(sim.open_pull(FORK, head="feature", base="main", title="A", user="dev")["number"])
    on_issue = await say(ctx, issue, body)
    where = "acts on an open ingestion PR (branch `sluice/ingest/…`) or emergency pick (`sluice/emergency/…`)"
    assert f"{where}; #{issue} is an issue" in on_issue
    on_feature = await say(ctx, feature, body)
    assert f"#{feature} is neither" in on_feature and "comment it on that PR" in on_feature
    assert queued(ctx) == [] and [outcome for _, _, outcome in audit(ctx)] == ["refused", "refused"]


def passed(ctx: Context, number: int, level: Level, head: str) -> None:
    """A tier run that passed on a fork PR's head, as the tiers job records one."""
    run = TierRun(FORK, number, f"pull-{number}", level, head, 1, RunState.COMPLETED, NOW, verdict=PASSED)
    assert ctx.tier_runs.add(run) is not None


def a_fork_pull(sim: GitHubSim, *, base: str = "main") -> int:
    """A developer's PR from a branch of the fork (`feature`) into `base`."""
    trunk = sim.git(FORK, "rev-parse", "main")
    sim.commit(FORK, "feature", {"a.txt": "a\n"}, message="a", parent=trunk)
    if base != "main":
        sim.commit(FORK, base, {"b.txt": "b\n"}, message="b", parent=trunk)
    return int(sim.open_pull(FORK, head="feature", base=base, title="A", user="dev")["number"])


@pytest.mark.parametrize("body", ON_A_VALIDATED_PULL)
async def test_a_tier_command_is_refused_on_an_issue_a_pr_into_another_branch_and_a_closed_pr(
    ctx: Context, body: str
) -> None:
    sim, issue, _ = an_ingestion_pull(ctx)
    other = a_fork_pull(sim, base="release")
    where = f"`{body.split()[0]}` acts on an open ingestion PR or PR into `main`, whose tiers Sluice runs"
    assert f"{where}; #{issue} is an issue" in await say(ctx, issue, body)
    on_other = await say(ctx, other, body)
    assert f"{where}; #{other} is into `release`" in on_other and "comment it on a PR into `main`" in on_other
    sim.commit(FORK, "fix", {"c.txt": "c\n"}, message="c", parent=sim.git(FORK, "rev-parse", "main"))
    closed = int(sim.open_pull(FORK, head="fix", base="main", title="C", user="dev")["number"])
    sim.close_issue(FORK, closed, user="dev")  # GitHub keeps a closed PR's head and base SHAs
    assert f"{where}; #{closed} is closed" in await say(ctx, closed, body)
    assert queued(ctx) == [] and [outcome for _, _, outcome in audit(ctx)] == ["refused"] * 3


async def test_the_tier_commands_work_on_a_fork_pr_as_its_check_runs_buttons_do(ctx: Context) -> None:
    sim, _, _ = an_ingestion_pull(ctx)
    sim.commit(FORK, "main", {".github/workflows/sluice-l3.yml": L3_WORKFLOW.read_text()}, message="L3")
    number = a_fork_pull(sim)
    head = sim.git(FORK, "rev-parse", "refs/heads/feature")
    for level in (L1, L2):
        passed(ctx, number, level, head)
    reply = await say(ctx, number, "/l3 bench")
    assert f"L3 requested on #{number}'s head `{head[:10]}`" in reply and "its suite bench only" in reply
    assert f"L1 re-run on #{number}'s head" in await say(ctx, number, "/retry l1")
    asked = [(p["pull"], p["rerun"], p["l3"], p["suite"]) for p in tier_requests(ctx)]
    assert asked == [(number, None, True, "bench"), (number, "l1", False, None)]
    assert reactions(sim, number) == ["eyes", "eyes"]
    assert audit(ctx) == [("alice", "/l3 bench", "accepted"), ("alice", "/retry l1", "accepted")]
    await dispatch(ctx, "tiers", tier_requests(ctx)[0])  # the job `/l3 bench` enqueued, as a worker runs it
    assert tier_attempts(ctx, number)[2:] == [("l3", 1, "dispatched", 0)]
    (l3,) = sim.workflow_runs[FORK]
    assert (l3["inputs"]["tier"], l3["inputs"]["selection"], l3["inputs"]["head_sha"]) == ("3", "2", head)


def an_outside_pull(sim: GitHubSim) -> int:
    """A contributor's PR into fork trunk from their own fork of it (outsider/triton)."""
    outsider = "outsider/triton"
    sim.create_repo(outsider)
    sim.git(outsider, "fetch", "--quiet", str(sim.repo_path(FORK)), "main:main")
    trunk = sim.git(FORK, "rev-parse", "main")
    sim.commit(outsider, "fix", {"src/a.py": "a = 1\n"}, message="a fix", parent=trunk)
    pull = sim.open_pull(FORK, head="outsider:fix", base="main", title="A fix", user="outsider")
    return int(pull["number"])


async def test_retry_l2_on_a_pr_from_outside_the_fork_is_a_maintainers_run_l2(ctx: Context) -> None:
    sim, _, _ = an_ingestion_pull(ctx)
    number = an_outside_pull(sim)
    head = sim.git(FORK, "rev-parse", f"refs/pull/{number}/head")
    passed(ctx, number, L1, head)
    assert "@mallory has read access" in await say(ctx, number, "/retry l2", user="mallory")
    assert f"L2 re-run on #{number}'s head `{head[:10]}`" in await say(ctx, number, "/retry l2")
    assert [(p["pull"], p["rerun"]) for p in tier_requests(ctx)] == [(number, "l2")]


async def test_the_local_backend_refuses_a_tier_command_on_a_pr_from_outside_the_fork(ctx: Context) -> None:
    sim, _, _ = an_ingestion_pull(ctx)
    number = an_outside_pull(sim)
    ctx.settings = ctx.settings.model_copy(update={"tier_backend": "local"})  # this test's own context
    reply = await say(ctx, number, "/retry l1")
    assert "local backend runs tiers on its own machine, so only for the fork's own branches" in reply
    assert f"#{number}'s head is in outsider/triton" in reply and "push it to a branch of the fork" in reply
    assert queued(ctx) == [] and audit(ctx) == [("alice", "/retry l1", "refused")]


# ------------------------------------------------------------------ what each does


async def test_hold_and_unhold_record_and_release_the_hold(ctx: Context) -> None:
    sim, _, number = an_ingestion_pull(ctx)
    reply = await say(ctx, number, '/hold "release freeze"')
    assert (
        f"#{number} is held by @alice: release freeze" in reply
        and "until someone comments `/unhold`" in reply
    )
    held = ctx.gates.hold(FORK, number)
    assert held is not None and (held.by, held.reason) == ("alice", "release freeze")
    gate = gate_run(sim, head_of(sim))
    assert gate["conclusion"] is None and "held by @alice: release freeze" in gate["output"]["summary"]
    released = await say(ctx, number, "/unhold", user="dan")
    assert "@dan released the hold" in released and "the gate is closed" in released  # L1 has not run
    assert ctx.gates.hold(FORK, number) is None
    assert "is not held" in await say(ctx, number, "/unhold")
    assert reactions(sim, number) == ["+1", "+1"]


async def test_pause_stops_ingestion_until_resume_which_ingests(ctx: Context) -> None:
    _, issue = a_fork(ctx)  # a fork-wide command: any of the fork's issues will do
    reply = await say(ctx, issue, '/pause "upstream is mid-refactor"', user="carol")
    assert "paused by @carol: upstream is mid-refactor" in reply
    paused = ctx.gates.paused(FORK)
    assert paused is not None and paused.by == "carol"
    assert "is already paused by @carol" in await say(ctx, issue, "/pause", user="carol")
    assert "is paused by @carol" in await say(ctx, issue, "/ingest")  # write access is not enough now
    assert queued(ctx) == []
    resumed = await say(ctx, issue, "/resume", user="carol")
    assert "@carol resumed automatic ingestion" in resumed and "an ingestion run is queued" in resumed
    assert ctx.gates.paused(FORK) is None and queued(ctx) == [("ingest", FORK)]
    assert "is not paused" in await say(ctx, issue, "/resume", user="carol")


def tier_requests(ctx: Context) -> list[dict[str, Any]]:
    with ctx.store._engine.connect() as conn:
        rows = conn.execute(jobs.select().where(jobs.c.kind == "tiers").order_by(jobs.c.id)).all()
    return [r.payload if isinstance(r.payload, dict) else json.loads(r.payload) for r in rows]


async def test_retry_reruns_the_named_tier_or_the_failed_ones(ctx: Context) -> None:
    sim, _, number = an_ingestion_pull(ctx)
    nothing = await say(ctx, number, "/retry")
    assert f"no tier failed on #{number}'s head" in nothing and tier_requests(ctx) == []
    sim.finish_check(FORK, head_of(sim), CheckName.L2.value, "failure")
    sim.finish_check(FORK, head_of(sim), CheckName.L1.value, "success")
    assert "L2 re-run" in await say(ctx, number, "/retry")
    assert "L1 re-run" in await say(ctx, number, "/retry L1")
    asked = [(p["pull"], p["rerun"], p["l3"]) for p in tier_requests(ctx)]
    assert asked == [(number, "l2", False), (number, "l1", False)]
    assert reactions(sim, number) == ["eyes", "eyes"]


async def test_the_tier_commands_work_on_a_stacked_ingestion_pr_not_on_another_pr_into_its_branch(
    ctx: Context,
) -> None:
    sim, _, _ = an_ingestion_pull(ctx)
    # The plan's second unit: Sluice opens its PR into the first unit's branch, and runs its tiers there too.
    stacked = "sluice/ingest/chain-u2"
    sim.commit(FORK, stacked, {"docs/two.md": "two\n"}, message="docs: two", parent=head_of(sim))
    number = int(sim.open_pull(FORK, head=stacked, base=BRANCH, title="Ingest", user="sluice[bot]")["number"])
    head = sim.git(FORK, "rev-parse", f"refs/heads/{stacked}")
    sim.finish_check(FORK, head, CheckName.L1.value, "failure")
    assert f"L1 re-run on #{number}'s head" in await say(ctx, number, "/retry")
    refused = await say(ctx, number, "/l3")
    assert "L1 has not finished on this head" in refused and "is into" not in refused  # not for its base
    assert [(p["pull"], p["rerun"]) for p in tier_requests(ctx)] == [(number, "l1")]
    sim.commit(FORK, "feature", {"a.txt": "a\n"}, message="a", parent=head_of(sim))
    other = int(sim.open_pull(FORK, head="feature", base=BRANCH, title="A", user="dev")["number"])
    assert f"#{other} is into `{BRANCH}`" in await say(ctx, other, "/retry l1")
    assert len(tier_requests(ctx)) == 1


async def test_a_stacked_ingestion_pr_moved_onto_trunk_has_its_gate_judged_again(ctx: Context) -> None:
    """GitHub moves a stacked PR onto trunk once the PR below merged (`edited`, `changes.base`): its gate,
    which waited for that one, is judged again."""
    sim, _, _ = an_ingestion_pull(ctx)
    stacked = "sluice/ingest/chain-u2"
    head = sim.commit(FORK, stacked, {"docs/two.md": "two\n"}, message="docs: two", parent=head_of(sim))
    number = int(sim.open_pull(FORK, head=stacked, base=BRANCH, title="Ingest", user="sluice[bot]")["number"])
    edited = sim.pull_request_payload(FORK, number, "edited", sender="sluice[bot]")
    await dispatch(ctx, "pull_request", edited | {"changes": {"title": {"from": "Ingest?"}}})
    assert not any(r["head_sha"] == head for r in sim.check_runs[FORK])  # a title edit: nothing judged
    sim.issues[FORK][number].base_ref = "main"
    moved = {"base": {"ref": {"from": BRANCH}, "sha": {"from": head_of(sim)}}}
    await dispatch(ctx, "pull_request", sim.pull_request_payload(FORK, number, "edited") | {"changes": moved})
    assert "builds on" not in gate_run(sim, head)["output"]["summary"]


async def test_the_gate_names_the_codeowners_lines_it_skipped(ctx: Context) -> None:
    sim, _, number = an_ingestion_pull(ctx)
    lines = ["*  @meta/everyone", "!docs/  @writer", "lib/  not-an-owner"] + [
        f"x{i}/  bad{i}" for i in range(6)
    ]
    sim.commit(FORK, "main", {".github/CODEOWNERS": "\n".join(lines) + "\n"}, message="owners")
    await gatekeeping.reevaluate(ctx, FORK, number)
    summary = gate_run(sim, head_of(sim))["output"]["summary"]
    assert "CODEOWNERS lines skipped, as GitHub skips them, so they own nothing: line 2: '!docs/'" in summary
    assert "line 3: 'lib/': not an owner: not-an-owner" in summary and "(and 3 more)" in summary


async def test_l3_runs_on_demand_with_a_suite_of_the_config(ctx: Context) -> None:
    _, _, number = an_ingestion_pull(ctx)
    ran(ctx, number, L1)
    ran(ctx, number, L2)
    reply = await say(ctx, number, "/l3 bench")
    assert f"L3 requested on #{number}'s head" in reply and "its suite bench only" in reply
    asked = [(p["pull"], p["rerun"], p["l3"], p["suite"]) for p in tier_requests(ctx)]
    assert asked == [(number, None, True, "bench")]
    assert "its suites (bench)" in await say(ctx, number, "/l3")
    assert [p["suite"] for p in tier_requests(ctx)] == ["bench", None]
    assert "name one of bench" in await say(ctx, number, "/l3 numerics")  # an L2 suite, not L3's


@pytest.mark.parametrize(
    ("body", "runs", "reason", "remedy"),
    [
        ("/l3", {L1: WAITS}, "L1 has not finished on this head yet", "comment `/l3` again once L2 passes"),
        (
            "/l3",
            {L1: PASSES, L2: WAITS},
            "L2 has not finished on this head yet",
            "comment `/l3` again once L2 passes",
        ),
        (
            "/l3 bench",
            {L1: PASSES, L2: FAILS},
            "L2 failed on this head",
            "`/retry l2` or push a fix, then comment `/l3 bench` again once L2 passes",
        ),
        (
            "/l3",
            {L1: PASSES, L2: PASSES, L3: WAITS},
            "L3 is still running on this head",
            "comment `/l3` again once it ends",
        ),
        (
            "/retry l2",
            {L1: PASSES, L2: UNDISPATCHED},
            "L2 is still running on this head",
            "comment `/retry l2` again once it ends",
        ),
        (
            "/retry L3",
            {L1: FAILS},
            "L1 failed on this head",
            "`/retry l1` or push a fix, then comment `/retry l3` again once L2 passes",
        ),
    ],
)
async def test_a_tier_asked_for_that_cannot_start_now_is_refused_with_why_and_enqueues_nothing(
    ctx: Context, body: str, runs: dict[Level, tuple[RunState, Verdict | None]], reason: str, remedy: str
) -> None:
    sim, _, number = an_ingestion_pull(ctx)
    for level, (state, verdict) in runs.items():
        ran(ctx, number, level, state, verdict=verdict)
    reply = await say(ctx, number, body)
    name = body.split()[0][1:]
    assert f"Sluice did not run `{body}`: {reason}." in reply
    assert f"Usage: `{COMMANDS[name].USAGE.line}` ({remedy})." in reply
    assert tier_requests(ctx) == [] and reactions(sim, number) == []
    assert audit(ctx) == [("alice", body, "refused")]


def tier_attempts(ctx: Context, number: int) -> list[tuple[str, int, str, int | None]]:
    return [(r.level.value, r.attempt, r.state.value, r.suite) for r in ctx.tier_runs.for_pull(FORK, number)]


async def test_l3_asked_again_after_l3_ran_dispatches_its_next_attempt(ctx: Context) -> None:
    sim, _, number = an_ingestion_pull(ctx)
    sim.commit(FORK, "main", {".github/workflows/sluice-l3.yml": L3_WORKFLOW.read_text()}, message="L3")
    for level in (L1, L2, L3):
        ran(ctx, number, level)
    reply = await say(ctx, number, "/l3 bench")
    assert f"L3 requested on #{number}'s head" in reply and reactions(sim, number) == ["eyes"]
    (asked,) = tier_requests(ctx)
    await dispatch(ctx, "tiers", asked)  # the job the command enqueued, as a worker runs it
    assert tier_attempts(ctx, number)[2:] == [("l3", 1, "completed", None), ("l3", 2, "dispatched", 0)]
    (l3,) = sim.workflow_runs[FORK]
    assert l3["inputs"] | {"tier": "3", "selection": "2", "head_sha": head_of(sim)} == l3["inputs"]  # bench


async def test_retry_l3_where_l3_never_ran_dispatches_it(ctx: Context) -> None:
    sim, _, number = an_ingestion_pull(ctx)
    sim.commit(FORK, "main", {".github/workflows/sluice-l3.yml": L3_WORKFLOW.read_text()}, message="L3")
    ran(ctx, number, L1)
    ran(ctx, number, L2)
    assert "L3 re-run" in await say(ctx, number, "/retry l3")
    (asked,) = tier_requests(ctx)
    await dispatch(ctx, "tiers", asked)
    assert tier_attempts(ctx, number)[2:] == [("l3", 1, "dispatched", None)]
    (l3,) = sim.workflow_runs[FORK]
    assert (l3["inputs"]["tier"], l3["inputs"]["selection"]) == ("3", "0")


async def test_a_waiver_from_the_command_counts_until_the_day_ends_then_stops(ctx: Context) -> None:
    gate = TWO_TIERS.replace(
        "gate:",
        "tiers:\n  l2:\n    suites: [{name: numerics, builtin: numerics}]\n    owner: '@meta/gpu'\ngate:",
    )
    sim, _, number = an_ingestion_pull(ctx, gate=gate)
    head = head_of(sim)
    sim.finish_check(FORK, head, CheckName.L1.value, "success")
    sim.finish_check(FORK, head, CheckName.L2.value, "failure")
    assert await gatekeeping.reevaluate(ctx, FORK, number) is Outcome.WAITING
    refused = await say(ctx, number, WAIVE.format("2026-11-30"), user="dan")  # not in @meta/gpu
    assert "needs a code owner of tier L2: @dan does not own `tiers.l2` (`@meta/gpu`)" in refused
    sim.add_team_member("meta/gpu", "dan")
    reply = await say(ctx, number, WAIVE.format("2026-11-30"), user="dan")
    assert "L2 is waived on" in reply and "until 2026-11-30" in reply and "the gate is open" in reply
    (waiver,) = ctx.gates.waivers(FORK, number)
    assert (waiver.owner, waiver.granted_by) == ("@meta/gpu", "dan")
    assert waiver.expires_at == dt.datetime(2026, 12, 1, tzinfo=dt.UTC) and waiver.head_sha == head
    assert f"at head `{head[:10]}`" in reply and "A later push needs a new waiver" in reply
    assert gate_run(sim, head)["conclusion"] == "success"
    ctx.clock = lambda: NOW + dt.timedelta(days=2)  # past the end of 2026-11-30
    assert await gatekeeping.reevaluate(ctx, FORK, number) is Outcome.WAITING
    closed = gate_run(sim, head)
    assert closed["conclusion"] == "failure" and "expired" in closed["output"]["summary"]


async def test_a_waiver_waives_the_head_it_was_given_on_not_the_next_push(ctx: Context) -> None:
    l2 = "tiers:\n  l2:\n    suites: [{name: numerics, builtin: numerics}]\n    owner: '@meta/gpu'\ngate:"
    gate = TWO_TIERS.replace("gate:", l2)
    sim, _, number = an_ingestion_pull(ctx, gate=gate)
    head = head_of(sim)
    sim.finish_check(FORK, head, CheckName.L1.value, "success")
    sim.finish_check(FORK, head, CheckName.L2.value, "failure")
    sim.add_team_member("meta/gpu", "dan")
    assert "the gate is open" in await say(ctx, number, WAIVE.format("2026-11-30"), user="dan")
    pushed = sim.commit(FORK, BRANCH, {"docs/new.md": "new, changed\n"}, message="more", pusher="carol")
    sim.finish_check(FORK, pushed, CheckName.L1.value, "success")
    sim.finish_check(
        FORK, pushed, CheckName.L2.value, "failure"
    )  # the new code fails L2 too: nobody waived it
    assert await gatekeeping.reevaluate(ctx, FORK, number) is Outcome.WAITING
    closed = gate_run(sim, pushed)
    assert closed["conclusion"] == "failure"
    assert (
        f"the waiver by @dan was given on `{head[:10]}`; a new head needs a new one"
        in (closed["output"]["summary"])
    )


# ------------------------------------------------------------------ end to end: the served bot merges


async def command(rig: Rig, number: int, body: str, *, user: str) -> str:
    """`body` commented by `user` and delivered to the served bot as GitHub would; Sluice's reply."""
    comment_id = rig.sim.add_comment(FORK, number, body, user=user)
    payload = rig.sim.issue_comment_payload(FORK, comment_id)
    assert await rig.sim.deliver(f"{rig.bot_url}/webhook", "issue_comment", payload, secret=SECRET) == 202
    await rig.settle()
    mine = [
        c["body"] for c in rig.sim.comment_objects(FORK, number) if f"sluice:reply:{comment_id}" in c["body"]
    ]
    return mine[-1] if mine else ""


async def test_hold_keeps_a_passing_gate_from_merging_until_unhold(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=False)
    teardown.append(rig)
    rig.sim.set_permission(FORK, "rm", "write")
    pull = rig.pull()
    head = rig.head(pull)
    assert "is held by @rm" in await command(rig, pull.number, '/hold "release freeze"', user="rm")
    rig.sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    assert not pull.merged and "held by @rm: release freeze" in rig.gate(head)["output"]["summary"]
    reply = await command(rig, pull.number, "/unhold", user="rm")
    assert "merged the PR" in reply and pull.merged


@pytest.mark.parametrize("opener", ["sluice[bot]", "dan"])
async def test_sluice_merges_an_emergency_pick_it_opened_and_leaves_one_a_person_opened_to_a_person(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig], opener: str
) -> None:
    """A branch named `sluice/emergency/…` proves nothing: who opened the PR does. With L1 passed and a code
    owner's approval, Sluice merges its own pick; a person's PR from such a branch gets the same gate, and
    the merge is left to a person."""
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=False)
    teardown.append(rig)
    sim = rig.sim
    for user in ("alice", "dan"):
        sim.set_permission(FORK, user, "write")
    sim.add_team_member("meta/compiler", "alice")
    branch, trunk = "sluice/emergency/abcdef1234", sim.git(FORK, "rev-parse", "main")
    message = f"[Fix] the crash (#1872)\n\nUpstream-Commit: {'ab' * 20}\nSluice-Kind: emergency"
    head = sim.commit(FORK, branch, {CORE_PASS: OURS + "// fixed\n"}, message=message, parent=trunk)
    number = int(sim.open_pull(FORK, head=branch, base="main", title="Emergency pick", user=opener)["number"])
    await rig.settle()  # Sluice takes up the PR (its L1 check run)
    sim.finish_check(FORK, head, CheckName.L1.value, "success")
    await rig.settle()
    reply = await command(rig, number, "/approve", user="alice")
    merged = next(p for p in sim.pulls[FORK] if p["number"] == number).get("merged") is True
    summary = rig.gate(head)["output"]["summary"]
    if opener == sim.bot_login:
        assert merged and "merged the PR" in reply
    else:
        assert not merged and "the merge is left to a person" in reply
        assert "@dan opened this PR, not Sluice: a person merges it." in summary


async def test_approve_counts_for_the_head_it_was_given_on(
    aiohttp_server: Any, tmp_path: Path, database_url: str, teardown: list[Rig]
) -> None:
    rig = await start(aiohttp_server, tmp_path, database_url, gate=AUTO_L1, semantic=True)
    teardown.append(rig)
    for user in ("alice", "mallory"):
        rig.sim.set_permission(FORK, user, "write")
    rig.sim.add_team_member("meta/compiler", "alice")
    pull = rig.pull()
    old = rig.head(pull)
    refused = await command(rig, pull.number, "/approve", user="mallory")
    assert "@mallory does not own `lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp`" in refused
    assert f"head `{old[:10]}`" in await command(rig, pull.number, "/approve", user="alice")
    new = rig.sim.commit(FORK, pull.head_ref, {"docs/a.md": "by a person\n"}, message="touch", pusher="carol")
    await rig.settle()
    rig.sim.finish_check(FORK, new, CheckName.L1.value, "success")
    await rig.settle()
    assert not pull.merged and "@alice were given on an older head" in rig.gate(new)["output"]["summary"]
    # Approved on the new head, the gate opens; but carol's push is no commit Sluice made: a person merges.
    reply = await command(rig, pull.number, "/approve", user="alice")
    assert "the gate is open; the merge is left to a person" in reply and not pull.merged
    assert "not the commit Sluice pushed" in rig.gate(new)["output"]["summary"]
