"""`workflow_run` completed: a tier workflow's result, read from its artifact and shown on the check run."""

from __future__ import annotations

import logging

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.tiers import TRUNK_PULL, RunState
from bot.core.webhooks import WorkflowRunEvent
from bot.flows.tiers import complete, dispatched_run, rerun_not_counted, result_of
from bot.ports import Job
from handlers.tiers import tiering

router = Router()
log = logging.getLogger("sluice.workflow_run")
ENDED = frozenset({RunState.COMPLETED, RunState.TIMED_OUT})  # a result that came, or that is too late


@router.register("workflow_run", action="completed")
async def on_completed(event: WorkflowRunEvent, *, ctx: Context, job: Job) -> None:
    fork = await ctx.db(ctx.registry.fork, event.repository.full_name)
    if fork is None:
        return
    workflow_run, runs = event.workflow_run, ctx.tier_runs
    run = await dispatched_run(ctx.db, runs, fork.repo, workflow_run)
    if run is None or run.pull == TRUNK_PULL:
        return  # not a tier run of Sluice's, or a trunk run (handlers.trunk_watch's)
    t = await tiering(ctx, fork)
    conclusion = workflow_run.conclusion or "failure"
    if workflow_run.run_attempt > 1 and run.run_id == workflow_run.id and run.state in ENDED:
        await rerun_not_counted(
            t, run, attempt=workflow_run.run_attempt, conclusion=conclusion, url=workflow_run.html_url
        )
        return
    finished = await result_of(t, workflow_run.id, conclusion)
    assert run.id is not None
    await ctx.db(runs.set_run_id, run.id, workflow_run.id)
    await complete(t, run.id, finished, workflow_run=workflow_run.id)
