"""`installation` and `installation_repositories` events: record and forget installations and their repos."""

from __future__ import annotations

import logging

from bot.context import Context
from bot.jobs import Job
from bot.webhooks import InstallationEvent, InstallationRepositoriesEvent
from handlers import register

log = logging.getLogger("sluice.installation")


async def installation(ctx: Context, job: Job) -> None:
    event = InstallationEvent.model_validate(job.payload)
    inst = event.installation
    if event.action == "deleted":
        ctx.registry.forget_installation(inst.id)
        log.info("installation %d deleted: forgotten with its forks", inst.id)
        return
    if event.action in ("created", "unsuspend", "new_permissions_accepted"):
        repos = [r.full_name for r in event.repositories]
        account = inst.account.login if inst.account else "?"
        ctx.registry.record_installation(inst.id, account, repos, at=ctx.clock())
        for repo in repos or ctx.registry.installed_repos(inst.id):
            register.request(ctx, repo, installation_id=inst.id)


async def installation_repositories(ctx: Context, job: Job) -> None:
    event = InstallationRepositoriesEvent.model_validate(job.payload)
    inst = event.installation
    removed = [r.full_name for r in event.repositories_removed]
    added = [r.full_name for r in event.repositories_added]
    if removed:
        ctx.registry.remove_repos(inst.id, removed)
        log.info("installation %d: forgot %s", inst.id, ", ".join(removed))
    if added:
        ctx.registry.add_repos(inst.id, added)
        for repo in added:
            register.request(ctx, repo, installation_id=inst.id)
