"""`bisect` jobs: a finished tier run that may call for a bisection (a PR's own real failure) or is one's
probe; and the wiring a bisection works with (the fork's mirror, its pick machinery, the plan's edges)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from gidgethub.routing import Router

from bot.app.context import Context
from bot.flows.bisection import Bisecting, GitCandidates, probe_finished, tier_failed
from bot.flows.pick import Picker
from bot.git.mirror import BranchUpdate
from bot.ports import Fork, Job
from handlers import requests, upstream
from handlers.ingest import links_of
from handlers.requests import BisectRequest
from handlers.tiers import tiering

router = Router()
log = logging.getLogger("sluice.bisect")


async def bisecting(ctx: Context, fork: Fork) -> Bisecting:
    """What bisecting `fork`'s ingestion PRs works with."""
    t = await tiering(ctx, fork)
    auth, upstream_auth = await upstream.fork_auth(ctx, fork)
    # both sides synced: the mirror is a cache an operator may wipe, and a bisection picks upstream's commits
    mirror, _ = await asyncio.to_thread(ctx.sync_fork, fork, auth=auth, upstream_auth=upstream_auth)
    repo = await asyncio.to_thread(ctx.repository, mirror)
    picker = Picker(
        repo, t.config, recall=lambda keys: ctx.store.resolutions(fork.repo, keys), use_resolver=False
    )

    async def fetch_pull(number: int) -> str:
        auth = await ctx.git_auth(fork.installation_id)
        pull_ref = f"refs/pull/{number}/head"
        return await asyncio.to_thread(mirror.fetch_ref, ctx.clone_url(fork.repo), pull_ref, auth=auth)

    async def push(updates: Sequence[BranchUpdate]) -> None:
        auth = await ctx.git_auth(fork.installation_id)
        await asyncio.to_thread(mirror.push, updates, auth=auth)

    async def depends_on(ingestion: str) -> Mapping[str, Sequence[str]]:
        plan = await ctx.db(ctx.store.latest_plan, fork.repo)
        if plan is None:
            return {}
        units = [(u.id, u.commits) for u in plan.bundles] + [(c.id, c.commits) for c in plan.chains]
        commits = next((found for key, found in units if key == ingestion), ())
        return {c.sha: [d.sha for d in c.depends_on] for c in commits}

    async def rebuild(why: str) -> None:
        await requests.ingest(ctx, fork.repo, reason=why)

    candidates = GitCandidates(repo, picker, strategy=t.config.strategy, fetch_pull=fetch_pull, push=push)
    forge = ctx.forge(fork.installation_id, fork.repo)
    return Bisecting(
        t,
        ctx.bisections,
        forge,
        candidates,
        depends_on,
        rebuild,
        ctx.bot_login,
        audits=ctx.gates,
        links=links_of(ctx, fork),
    )


@router.register(requests.BISECT)
async def on_bisect(request: BisectRequest, *, ctx: Context, job: Job) -> None:
    fork = await ctx.db(ctx.registry.fork, request.fork)
    run = await ctx.db(ctx.tier_runs.get, request.run)
    if fork is None or run is None or run.fork != fork.repo:
        return
    b = await bisecting(ctx, fork)
    if run.bisection is not None:
        await probe_finished(b, run)
    else:
        await tier_failed(b, run)
