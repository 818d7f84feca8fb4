"""`check_run` completed: a tier finished on an ingestion PR's head, so its gate is judged again."""

from __future__ import annotations

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.ingestion import Tier
from bot.core.webhooks import CheckRunEvent
from bot.ports import Job
from handlers import gatekeeping

TIERS = frozenset(t.value for t in Tier if t is not Tier.GATE)  # the gate's own runs change nothing
router = Router()


@router.register("check_run", action="completed")
async def on_completed(event: CheckRunEvent, *, ctx: Context, job: Job) -> None:
    if event.check_run.name not in TIERS:
        return
    repo = event.repository.full_name
    numbers = [p.number for p in event.check_run.pull_requests]
    if not numbers:  # GitHub leaves the list empty for some runs: the registry knows which PR has the head
        records = await ctx.db(ctx.registry.ingestions, repo, state="open")
        numbers = [r.pr_number for r in records if r.pr_number and r.head == event.check_run.head_sha]
    for number in numbers:
        await gatekeeping.reevaluate(ctx, repo, number)
