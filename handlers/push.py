"""`push` events: an upstream branch or a fork trunk moved, so the forks concerned are planned again.

Pushes to Sluice's own `sluice/ingest/*` branches are ignored, whoever made them. A fork trunk that moved is
always planned again, also when Sluice itself merged into it.
"""

from __future__ import annotations

import logging

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.ingestion import BRANCH_PREFIX
from bot.core.webhooks import PushEvent
from bot.flows.engine import CONFIG_PATH
from bot.github.installations import holds
from bot.ports import Job
from handlers import requests, upstream

router = Router()
log = logging.getLogger("sluice.push")


@router.register("push")
async def on_push(event: PushEvent, *, ctx: Context, job: Job) -> None:
    repo, branch = event.repository.full_name, event.ref.removeprefix("refs/heads/")
    if branch == event.ref:
        return  # tags change nothing Sluice plans
    if event.deleted:  # nothing to plan; but a fork that followed the branch has nothing to follow now
        for tracking in await ctx.db(ctx.registry.forks_tracking, repo, branch):
            who = f"@{event.sender.login}" if event.sender is not None else "a push"
            await upstream.report_gone(ctx, tracking, how=f"{who} deleted it")
        return
    if branch.startswith(BRANCH_PREFIX):
        log.info("push to %s %s: an ingestion branch; ignored", repo, branch)
        return
    fork = await ctx.db(ctx.registry.fork, repo)
    trunk = fork is not None and branch == fork.branch
    if not trunk and event.sender is not None and event.sender.login == ctx.bot_login:
        log.info("push to %s %s is Sluice's own; ignored", repo, branch)
        return
    config_changed = event.may_touch(CONFIG_PATH)
    default = branch == event.repository.default_branch  # where registration looks for the file first
    if (trunk or (fork is not None and default)) and config_changed:  # may track another upstream now
        await requests.register(ctx, repo, installation_id=event.installation.id)
    elif trunk:
        await requests.ingest(ctx, repo, reason=f"fork trunk {branch} moved to {event.after[:10]}")
    followers = await ctx.db(ctx.registry.forks_tracking, repo, branch)
    if fork is None and default:  # an upstream's own pushes need not register it again and again
        await _note_repo(ctx, job, event, again=config_changed or not followers)
    for tracking in followers:
        await requests.ingest(
            ctx, tracking.repo, reason=f"upstream {repo} {branch} moved to {event.after[:10]}"
        )


async def _note_repo(ctx: Context, job: Job, event: PushEvent, *, again: bool) -> None:
    """Record an installed repository Sluice had not seen (is it a fork?), once GitHub confirms it; and, with
    `again`, try one it has seen again at a push to its default branch: what registration refused may be
    fixed by a push that leaves `.github/sluice.yml` as it is (the risk model the file names, committed)."""
    repo, installation_id = event.repository.full_name, event.installation.id
    if await ctx.db(ctx.registry.installation_of, repo) == installation_id:
        if again:
            await requests.register(ctx, repo, installation_id=installation_id)
        return
    if not await holds(ctx.github, installation_id, repo):
        log.warning(
            "delivery %s: GitHub says %s is not in installation %d; not recorded",
            job.delivery_id,
            repo,
            installation_id,
        )
        return
    await ctx.db(ctx.registry.add_repos, installation_id, [repo])
    await requests.register(ctx, repo, installation_id=installation_id)
