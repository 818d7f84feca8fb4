"""`check_run` completed: a tier finished on an ingestion PR's head, so its gate is judged again; and GitHub's
own Re-run on `sluice/gate`, which asks for the same."""

from __future__ import annotations

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.emergency import is_emergency_pull
from bot.core.ingestion import CheckName
from bot.core.webhooks import CheckRunEvent
from bot.ports import Job
from handlers import gatekeeping

TIERS = frozenset(t.value for t in CheckName if t is not CheckName.GATE)  # the gate's own runs change nothing
router = Router()


@router.register("check_run", action="completed")
async def on_completed(event: CheckRunEvent, *, ctx: Context, job: Job) -> None:
    if event.check_run.name in TIERS:
        await _judge_again(ctx, event)


@router.register("check_run", action="rerequested")
async def on_gate_rerequested(event: CheckRunEvent, *, ctx: Context, job: Job) -> None:
    """GitHub's own Re-run on `sluice/gate`: the gate is judged again (a tier's Re-run: handlers.tiers)."""
    if event.check_run.name == CheckName.GATE.value:
        await _judge_again(ctx, event)


async def _judge_again(ctx: Context, event: CheckRunEvent) -> None:
    """The gate of each PR whose head the check run is on, judged again."""
    repo = event.repository.full_name
    numbers = [p.number for p in event.check_run.pull_requests]
    if not numbers:  # GitHub leaves the list empty for some runs: the registry knows which PR has the head
        records = await ctx.db(ctx.registry.ingestions, repo, state="open")
        numbers = [r.pr_number for r in records if r.pr_number and r.head == event.check_run.head_sha]
    if not numbers:  # nor does it keep emergency picks: the fork's open PRs from their branches do
        numbers = await _emergency_pulls(ctx, repo, event.check_run.head_sha)
    for number in numbers:
        await gatekeeping.reevaluate(ctx, repo, number)


async def _emergency_pulls(ctx: Context, repo: str, head_sha: str) -> list[int]:
    fork = await ctx.db(ctx.registry.fork, repo)
    if fork is None:
        return []
    pulls = await ctx.forge(fork.installation_id, repo).open_pulls()
    return [p.number for p in pulls if p.head.sha == head_sha and is_emergency_pull(p, fork=repo)]
