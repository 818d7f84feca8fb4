"""`/resume`: lift the fork's pause (a maintainer's or the safety throttle's), ingest at once, and judge the
gates of Sluice's open PRs again."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Usage
from bot.core.markdown import plain
from bot.core.permissions import Permission
from bot.flows.merge import Outcome as Gate
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
    gates = await gatekeeping.resume(ctx, repo, by=call.actor)
    was = f"paused by @{paused.by}: {plain(paused.reason)}"
    done = f"@{call.actor} resumed automatic ingestion of {repo} ({was})"
    merged = [f"#{number}" for number, outcome in gates.items() if outcome is Gate.MERGED]
    if merged:  # their gates passed while paused
        done += f"; Sluice merged {', '.join(merged)}, whose gate had passed"
    return Outcome(done, reply=f"{done}; an ingestion run is queued.\n", reaction=QUEUED)
