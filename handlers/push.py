"""`push` events: an upstream branch or a fork trunk moved, so the forks concerned are planned again."""

from __future__ import annotations

import logging

from bot.context import Context
from bot.ingestion import BRANCH_PREFIX
from bot.jobs import Job
from bot.webhooks import PushEvent
from handlers import ingest, register

KIND = "push"
log = logging.getLogger("sluice.push")


async def handle(ctx: Context, job: Job) -> None:
    event = PushEvent.model_validate(job.payload)
    repo, branch = event.repository.full_name, event.ref.removeprefix("refs/heads/")
    if branch == event.ref or event.deleted:
        return  # tags and deleted branches change nothing Sluice plans
    if (event.sender and event.sender.login == ctx.bot_login) or branch.startswith(BRANCH_PREFIX):
        log.info("push to %s %s is Sluice's own; ignored", repo, branch)
        return
    fork = ctx.registry.fork(repo)
    if fork is not None and branch == fork.branch:
        ingest.request(ctx, repo, reason=f"fork trunk {branch} moved to {event.after[:10]}")
    elif fork is None and event.installation is not None and branch == event.repository.default_branch:
        ctx.registry.add_repos(event.installation.id, [repo])  # GitHub signed it: the App is installed there
        register.request(ctx, repo, installation_id=event.installation.id)
    for tracking in ctx.registry.forks_tracking(repo, branch):
        ingest.request(ctx, tracking.repo, reason=f"upstream {repo} {branch} moved to {event.after[:10]}")
