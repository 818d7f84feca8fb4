"""Trunk watch's jobs: the periodic look at every fork's trunk (`trunk-watch`), and the trunk runs' results
(run here by the `local` backend, or a tier workflow's `workflow_run`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.errors import BadInput, TooLarge
from bot.core.tiers import SHA40, TRUNK_PULL, RunState, tier_config
from bot.core.trunk_watch import Suspect
from bot.core.webhooks import WorkflowRunEvent
from bot.db.leases import Leases, periodically
from bot.flows import trunk_watch
from bot.flows.local_tier import run_local
from bot.flows.tiers import ARTIFACT, MAX_ARTIFACT_BYTES, Finished, dispatched_run, unpack
from bot.ports import Fork, HistoryReader, Job
from handlers import requests
from handlers.requests import LocalTierRequest, TrunkWatchRequest
from handlers.tiers import tiering

router = Router()
LEASE = "trunk-watch"  # of several replicas, one asks about every fork per interval
log = logging.getLogger("sluice.trunk_watch")


async def watch_all(ctx: Context) -> list[str]:
    """Ask for a trunk-watch look at every registered fork (its config says whether it is on and due)."""
    forks = [fork.repo for fork in await ctx.db(ctx.registry.all_forks)]
    for repo in forks:
        await requests.trunk_watch(ctx, repo)
    return forks


def loops(ctx: Context, *, holder: str, stop: asyncio.Event) -> dict[str, Coroutine[Any, Any, None]]:
    """The trunk-watch loop by name, when its interval is set (0 turns it off)."""
    interval = ctx.settings.trunk_watch_interval
    if interval <= 0:
        return {}
    task = periodically(
        LEASE,
        lambda: watch_all(ctx),
        interval=interval,
        leases=Leases(ctx.store),
        holder=holder,
        clock=ctx.clock,
        stop=stop,
    )
    return {LEASE: task}


async def watching(ctx: Context, fork: Fork) -> trunk_watch.Watch:
    t = await tiering(ctx, fork)

    async def history(good: str, bad: str) -> list[Suspect]:
        await fetch_trunk(ctx, fork)
        repo = await asyncio.to_thread(ctx.repository, ctx.mirror(fork.repo))
        return await asyncio.to_thread(commits_between, repo, good, bad)

    issues = ctx.forge(fork.installation_id, fork.repo)
    return trunk_watch.Watch(t, ctx.trunk_watch, issues, history)


async def fetch_trunk(ctx: Context, fork: Fork) -> str:
    """Fork trunk fetched into the fork's mirror; its head."""
    auth = await ctx.git_auth(fork.installation_id)
    mirror = ctx.mirror(fork.repo)
    return await asyncio.to_thread(mirror.fetch_branch, ctx.clone_url(fork.repo), fork.branch, auth=auth)


def commits_between(repo: HistoryReader, good: str, bad: str) -> list[Suspect]:
    """Trunk's first-parent commits after `good` up to `bad`, oldest first, with the files each touches."""
    if not (SHA40.fullmatch(good) and SHA40.fullmatch(bad)):
        raise BadInput(f"trunk commits {good!r}..{bad!r} are not 40-hex SHAs", "this is a bug: report it")
    commits = repo.commits(bad, "--not", good, first_parent=True)
    files = repo.changed_files([c.sha for c in commits])
    return [
        Suspect(
            sha=c.sha,
            subject=c.subject,
            author=c.author_name,
            files=tuple(f.path for f in files.get(c.sha, ())),
        )
        for c in commits
    ]


@router.register(requests.TRUNK_WATCH)
async def on_trunk_watch(request: TrunkWatchRequest, *, ctx: Context, job: Job) -> None:
    fork = await ctx.db(ctx.registry.fork, request.fork)
    if fork is None:
        return
    w = await watching(ctx, fork)
    if not w.tiering.config.trunk_watch.enabled and not await ctx.db(ctx.trunk_watch.waiting, fork.repo):
        return
    await trunk_watch.watch(w, head=await fetch_trunk(ctx, fork))


@router.register(requests.TIER_LOCAL)
async def on_local_trunk_run(request: LocalTierRequest, *, ctx: Context, job: Job) -> None:
    """A trunk run on this machine (the `local` backend): trunk's commit exported and its tier run (a PR's
    tier runs are handlers.tiers')."""
    fork = await ctx.db(ctx.registry.fork, request.fork)
    run = await ctx.db(ctx.tier_runs.get, request.run)
    if fork is None or run is None or run.pull != TRUNK_PULL or run.state is not RunState.DISPATCHED:
        return
    w = await watching(ctx, fork)
    await fetch_trunk(ctx, fork)
    mirror = ctx.mirror(fork.repo)
    timeout_s = tier_config(w.tiering.config, run.level).timeout_minutes * 60
    finished = await asyncio.to_thread(
        run_local,
        Path(mirror.path),
        run,
        config=w.tiering.config,
        baseline_sha=run.head_sha,
        timeout_s=timeout_s,
    )
    if finished is None:
        await trunk_watch.time_out(w, run)
        return
    assert run.id is not None
    await trunk_watch.complete(w, run.id, finished)


@router.register("workflow_run", action="completed")
async def on_trunk_workflow_run(event: WorkflowRunEvent, *, ctx: Context, job: Job) -> None:
    """A trunk run's tier workflow finished (the GitHub backend; a PR's are handlers.workflow_run's)."""
    fork = await ctx.db(ctx.registry.fork, event.repository.full_name)
    if fork is None:
        return
    workflow_run, runs = event.workflow_run, ctx.tier_runs
    run = await dispatched_run(ctx.db, runs, fork.repo, workflow_run)
    if run is None or run.pull != TRUNK_PULL:
        return  # not a tier run of Sluice's, or a PR's (handlers.workflow_run's)
    w = await watching(ctx, fork)
    conclusion = workflow_run.conclusion or "failure"
    try:
        archive = await w.tiering.forge.run_artifact(workflow_run.id, ARTIFACT, max_bytes=MAX_ARTIFACT_BYTES)
        finished = unpack(archive, conclusion)
    except TooLarge as exc:  # no report: the trunk run failed to leave one (never read whole)
        log.warning("%s: trunk workflow run %d: %s", fork.repo, workflow_run.id, exc.message)
        finished = Finished(conclusion, None, problem=exc.message)
    assert run.id is not None
    await ctx.db(runs.set_run_id, run.id, workflow_run.id)
    await trunk_watch.complete(w, run.id, finished)
