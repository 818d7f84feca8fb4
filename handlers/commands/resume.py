"""`/resume`: lift the fork's pause (a maintainer's or the safety throttle's) and ingest at once."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Usage
from bot.core.markdown import plain
from bot.core.permissions import Permission
from handlers import gatekeeping
from handlers.commands.call import QUEUED, Call, Outcome

NAME = "resume"
WHO = Permission.MAINTAIN
USAGE = Usage(NAME)
HELP = f"`{USAGE.line}` — restart automatic ingestion of the fork; an ingestion run starts now"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    repo = call.fork.repo
    paused = await ctx.db(ctx.gates.paused, repo)
    if paused is None:
        raise CommandRefused(f"ingestion of {repo} is not paused", "`/ingest` to ingest now")
    await gatekeeping.resume(ctx, repo, by=call.actor)
    was = f"paused by @{paused.by}: {plain(paused.reason)}"
    done = f"@{call.actor} resumed automatic ingestion of {repo} ({was})"
    return Outcome(done, reply=f"{done}; an ingestion run is queued.\n", reaction=QUEUED)
