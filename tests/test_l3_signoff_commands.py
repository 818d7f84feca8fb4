"""`/signoff l3` against the simulator: an area owner accepts L3's regressed metrics on the ingestion PR's
head; a commenter who owns no affected area, hostile arguments and a head with nothing to sign off are
refused with the usage line and change nothing; a new push closes the gate again."""

from __future__ import annotations

import dataclasses

import pytest

from bot.app.context import Context
from bot.core.ingestion import CheckName
from bot.core.l3_metrics import Regression
from bot.core.tiers import Level, RunState, TierRun, Verdict
from bot.flows.merge import Outcome
from handlers import gatekeeping
from handlers.commands import COMMANDS
from tests.support.github_sim import GitHubSim
from tests.test_gate_commands import BRANCH, an_ingestion_pull, gate_run, head_of
from tests.test_handlers import FORK, NOW, ctx
from tests.test_slash_commands import audit, reactions, say

__all__ = ["ctx"]  # the fixture, reused
L3_GATE = """tiers:
  l3:
    suites: [{name: bench, builtin: bench}]
    areas:
      - {name: gemm, kernels: [matmul], owners: ['@gina']}
      - {name: norms, kernels: [softmax], owners: ['@meta/norms']}
gate:
  required_tiers: [l1, l2, l3]
  auto_merge: false
"""
MATMUL = Regression("matmul[4096x4096x4096:float16]", "matmul", "median", False, 1.06, 0.02)
SOFTMAX = Regression("softmax[4096x4096:float16]", "softmax", "p90", True, 1.12, 0.03)


def l3_ran(ctx: Context, sim: GitHubSim, number: int, *regressions: Regression) -> str:
    """L1, L2 and L3 passed on the PR's head, and L3's comparison found `regressions`; the head."""
    head = head_of(sim)
    for tier in (CheckName.L1, CheckName.L2, CheckName.L3):
        sim.finish_check(FORK, head, tier.value, "success")
    runs = ctx.tier_runs
    added = runs.add(TierRun(FORK, number, "u1", Level.L3, head, 1, RunState.DISPATCHED, NOW))
    assert added is not None and added.id is not None
    runs.record_regressions(added.id, regressions)
    runs.save(dataclasses.replace(added, state=RunState.COMPLETED, verdict=Verdict.PASSED, completed_at=NOW))
    return head


def setup(ctx: Context) -> tuple[GitHubSim, int]:
    sim, _, number = an_ingestion_pull(ctx, gate=L3_GATE)
    for user in ("gina", "nora"):
        sim.set_permission(FORK, user, "write")
    sim.add_team_member("meta/norms", "nora")
    return sim, number


async def test_an_area_owner_signs_off_on_the_head_and_the_gate_opens(ctx: Context) -> None:
    sim, number = setup(ctx)
    head = l3_ran(ctx, sim, number, MATMUL)
    assert await gatekeeping.reevaluate(ctx, FORK, number) is Outcome.WAITING
    waiting = gate_run(sim, head)["output"]["summary"]
    assert "signoff of L3's regressed metrics in area `gemm`" in waiting and "| @gina |" in waiting
    reply = await say(ctx, number, "/signoff l3", user="gina")
    assert f"@gina signed off L3's regressed metrics on #{number}'s head `{head[:10]}`" in reply
    assert "area `gemm`: `matmul[4096x4096x4096:float16]` median +6.0 %" in reply
    assert "a later push needs a new signoff" in reply and "the gate is open" in reply
    assert [(s.login, s.head_sha) for s in ctx.signoffs.signoffs(FORK, number)] == [("gina", head)]
    gate = gate_run(sim, head)
    assert gate["conclusion"] == "success" and "signed off by @gina" in gate["output"]["summary"]
    assert reactions(sim, number) == ["+1"] and audit(ctx) == [("gina", "/signoff l3", "accepted")]
    again = await say(ctx, number, "/signoff L3", user="gina")
    assert "had signed off L3's metrics" in again and "nothing changed" in again


async def test_owning_one_area_signs_off_that_one_and_names_who_owns_the_rest(ctx: Context) -> None:
    sim, number = setup(ctx)
    head = l3_ran(ctx, sim, number, MATMUL, SOFTMAX)
    reply = await say(ctx, number, "/signoff l3", user="nora")  # in @meta/norms, as GitHub's API says
    assert "area `norms`: `softmax[4096x4096:float16]` p90 +12.0 %" in reply
    assert (
        "Still to be signed off by their owners: area `gemm` (@gina)" in reply and "gate is closed" in reply
    )
    summary = gate_run(sim, head)["output"]["summary"]
    assert "in area `norms`" in summary and "signed off by @nora" in summary and "| @gina |" in summary
    assert "the gate is open" in await say(ctx, number, "/signoff l3", user="gina")


async def test_a_commenter_who_owns_no_affected_area_is_refused(ctx: Context) -> None:
    sim, number = setup(ctx)
    l3_ran(ctx, sim, number, MATMUL)
    refused = await say(ctx, number, "/signoff l3", user="dan")  # write access, but owns no area
    assert "`/signoff` needs a code owner of an area whose L3 metrics regressed" in refused
    assert "@dan does not own `area gemm` (`@gina`)" in refused
    assert f"Usage: `{COMMANDS['signoff'].USAGE.line}`" in refused
    read_only = await say(ctx, number, "/signoff l3", user="mallory")
    assert "@mallory has read access" in read_only
    assert ctx.signoffs.signoffs(FORK, number) == [] and reactions(sim, number) == []
    assert [outcome for _, _, outcome in audit(ctx)] == ["refused", "refused"]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("/signoff l2", "`l2` cannot be signed off: only L3's metrics are"),
        ("/signoff sluice/l3", "cannot be signed off"),
        ("/signoff l3 --x", "`--x` is not an option of /signoff"),
        ("/signoff", "missing <tier>"),
        ("/signoff l3 l3", "too many arguments"),
        ("/signoff 'l3;rm'", "cannot be signed off"),
    ],
)
async def test_hostile_arguments_are_refused_with_the_usage_line_and_change_nothing(
    ctx: Context, body: str, why: str
) -> None:
    sim, number = setup(ctx)
    l3_ran(ctx, sim, number, MATMUL)
    reply = await say(ctx, number, body, user="gina")
    assert why in reply and "Usage: `/signoff <tier>`" in reply
    assert ctx.signoffs.signoffs(FORK, number) == [] and reactions(sim, number) == []
    assert audit(ctx) == [("gina", body, "refused")]


async def test_refused_when_there_is_no_l3_regression_on_this_head(ctx: Context) -> None:
    sim, number = setup(ctx)
    head = head_of(sim)
    no_result = await say(ctx, number, "/signoff l3", user="gina")
    assert f"nothing to sign off on #{number}'s head `{head[:10]}`: L3 has no result on it" in no_result
    l3_ran(ctx, sim, number)  # L3 passed, nothing regressed
    clean = await say(ctx, number, "/signoff l3", user="gina")
    assert "no L3 metric regressed on it" in clean and "Usage: `/signoff <tier>`" in clean
    assert ctx.signoffs.signoffs(FORK, number) == []


async def test_a_signoff_then_a_new_push_closes_the_gate_again(ctx: Context) -> None:
    sim, number = setup(ctx)
    old = l3_ran(ctx, sim, number, MATMUL)
    assert "the gate is open" in await say(ctx, number, "/signoff l3", user="gina")
    sim.commit(FORK, BRANCH, {"docs/new.md": "newer\n"}, message="docs: newer", pusher="carol")
    new = l3_ran(ctx, sim, number, MATMUL)  # L3 again on the new head: the same regression
    assert new != old
    assert await gatekeeping.reevaluate(ctx, FORK, number) is Outcome.WAITING
    summary = gate_run(sim, new)["output"]["summary"]
    assert "the signoffs by @gina were given on an older head and no longer count" in summary
    reply = await say(ctx, number, "/signoff l3", user="gina")
    assert f"head `{new[:10]}`" in reply and "the gate is open" in reply


async def test_an_emergency_pick_whose_gate_requires_l3_is_signed_off_the_same_way(ctx: Context) -> None:
    gate = L3_GATE.replace("  auto_merge: false", "  emergency_required_tiers: [l1, l3]\n  auto_merge: false")
    sim, _, _ = an_ingestion_pull(ctx, gate=gate)
    sim.set_permission(FORK, "gina", "write")
    branch = "sluice/emergency/abcdef1234"
    trunk = sim.git(FORK, "rev-parse", "main")
    head = sim.commit(FORK, branch, {"lib/fix.cpp": "fix\n"}, message="emergency: fix", parent=trunk)
    number = int(
        sim.open_pull(FORK, head=branch, base="main", title="Emergency", user="sluice[bot]")["number"]
    )
    added = ctx.tier_runs.add(
        TierRun(FORK, number, "emergency-abcdef1234", Level.L3, head, 1, RunState.DISPATCHED, NOW)
    )
    assert added is not None and added.id is not None
    ctx.tier_runs.record_regressions(added.id, (MATMUL,))
    ctx.tier_runs.save(dataclasses.replace(added, state=RunState.COMPLETED, verdict=Verdict.PASSED))
    for tier in (CheckName.L1, CheckName.L3):
        sim.finish_check(FORK, head, tier.value, "success")
    reply = await say(ctx, number, "/signoff l3", user="gina")
    assert f"@gina signed off L3's regressed metrics on #{number}'s head `{head[:10]}`" in reply
    summary = gate_run(sim, head)["output"]["summary"]
    assert "signed off by @gina" in summary and "approval of the emergency pick" in summary
