"""`workflow_run` completed: a tier workflow's result, read from its artifact and shown on the check run."""

from __future__ import annotations

import logging

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.tiers import TRUNK_PULL, RunState
from bot.core.webhooks import WorkflowRunEvent
from bot.flows.tiers import complete, request_of, rerun_not_counted, result_of
from bot.ports import Job
from handlers.tiers import tiering

router = Router()
log = logging.getLogger("sluice.workflow_run")
ENDED = frozenset({RunState.COMPLETED, RunState.TIMED_OUT})  # a result that came, or that is too late


@router.register("workflow_run", action="completed")
async def on_completed(event: WorkflowRunEvent, *, ctx: Context, job: Job) -> None:
    fork = await ctx.db(ctx.registry.fork, event.repository.full_name)
    if fork is None or event.workflow_run.event != "workflow_dispatch":
        return
    workflow_run, runs = event.workflow_run, ctx.tier_runs
    found = await ctx.db(runs.by_workflow_run, fork.repo, workflow_run.id)
    key = found.id if found is not None else request_of(workflow_run.display_title)
    run = await ctx.db(runs.get, key) if key is not None else None
    if run is None or run.fork != fork.repo or (run.run_id not in (None, workflow_run.id)):
        return  # not a tier run of Sluice's
    if run.pull == TRUNK_PULL:
        return  # a trunk run: handlers.trunk_watch's
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
    await complete(t, run.id, finished)
