"""`issues` events: a person ticked backlog boxes in the fork's dashboard issue: retry those commits."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.dashboard import is_dashboard, newly_ticked
from bot.core.models import Disposition
from bot.core.webhooks import IssuesEvent
from bot.ports import Job
from handlers import requests

router = Router()
log = logging.getLogger("sluice.issues")
MAY_RETRY = frozenset(
    {"admin", "write"}
)  # the collaborator permission API's answer (maintain reads as write)


@router.register("issues", action="edited")
async def on_edited(event: IssuesEvent, *, ctx: Context, job: Job) -> None:
    sender, issue = event.sender, event.issue
    if sender.login == ctx.bot_login or sender.type == "Bot":
        return  # Sluice's own edits (each dashboard update) and other bots' never retry anything
    labels = [label.name for label in issue.labels]
    if not is_dashboard(issue.body, labels) or issue.user.login != ctx.bot_login or event.body_before is None:
        return
    ticked = newly_ticked(event.body_before, issue.body or "")
    repo = event.repository.full_name
    fork = await ctx.db(ctx.registry.fork, repo) if ticked else None
    if fork is None:
        return
    permission = await ctx.forge(fork.installation_id, repo).permission_level(sender.login)
    if permission not in MAY_RETRY:
        log.info(
            "%s#%d: @%s (%s) ticked backlog boxes; retrying needs write access",
            repo,
            issue.number,
            sender.login,
            permission,
        )
        return
    await ctx.db(undefer, ctx, repo, ticked, by=sender.login)
    await requests.ingest(ctx, repo, reason=f"@{sender.login} ticked {len(ticked)} backlog commit(s)")


def undefer(ctx: Context, repo: str, shas: Sequence[str], *, by: str) -> list[str]:
    """Make the deferred ones among `shas` pending again (as `sluice defer --undo` does); which they were."""
    held = ctx.store.dispositions(repo)
    deferred = [sha for sha in shas if sha in held and held[sha].disposition == Disposition.DEFERRED]
    now = ctx.clock()
    for sha in deferred:
        reason = "retried from the dashboard"
        ctx.store.set_disposition(repo, sha, Disposition.PENDING, reason=reason, approver=by, at=now)
    return deferred
