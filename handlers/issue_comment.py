"""`issue_comment` events: a new comment on a fork's issue or PR whose first line is a slash command."""

from __future__ import annotations

import logging

from gidgethub.routing import Router

from bot.app.context import Context
from bot.app.worker import MAX_ATTEMPTS
from bot.core.commands import Conversation, parse
from bot.core.webhooks import IssueCommentEvent
from bot.ports import Job
from handlers import commands

router = Router()
log = logging.getLogger("sluice.issue_comment")


@router.register("issue_comment", action="created")  # an edit or a deletion never runs a command
async def on_comment(event: IssueCommentEvent, *, ctx: Context, job: Job) -> None:
    author = event.comment.user
    if author.login == ctx.bot_login or author.type == "Bot":
        return  # Sluice's own replies and other bots' comments are never commands
    repo = event.repository.full_name
    fork = await ctx.db(ctx.registry.fork, repo)
    if fork is None:
        return  # commands act on forks Sluice keeps in sync; elsewhere a comment is just recorded
    on = Conversation(
        repo=repo,
        number=event.issue.number,
        is_pull=event.issue.pull_request is not None,
        installation_id=fork.installation_id,
    )
    cmd = parse(event.comment.body, actor=author.login, on=on, comment_id=event.comment.id)
    if cmd is not None:  # one with a `problem` (too long, an odd character) is only refused, and audited
        await commands.run(cmd, fork=fork, ctx=ctx, last_attempt=job.attempts >= MAX_ATTEMPTS)
