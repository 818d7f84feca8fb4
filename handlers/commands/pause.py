"""`/pause [reason]`: automatic ingestion of the fork stops (nothing new is ingested or merged) until
`/resume`. It is about the whole fork, so it works on any of the fork's issues and PRs."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Kind, Positional, Usage
from bot.core.markdown import plain
from bot.core.permissions import Permission
from handlers import gatekeeping
from handlers.commands.call import Call, Outcome

NAME = "pause"
WHO = Permission.MAINTAIN
USAGE = Usage(NAME, (Positional("reason", Kind.SENTENCE, optional=True),))
HELP = f"`{USAGE.line}` — stop automatic ingestion of the fork (and its merges) until `/resume`"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    repo = call.fork.repo
    paused = await ctx.db(ctx.gates.paused, repo)
    if paused is not None:
        raise CommandRefused(
            f"ingestion of {repo} is already paused by @{paused.by}: {plain(paused.reason)}",
            "`/resume` lifts it",
        )
    given = call.args.get("reason")
    reason = given if isinstance(given, str) else f"paused by @{call.actor}"
    await gatekeeping.pause(ctx, repo, by=call.actor, reason=reason)
    done = f"automatic ingestion of {repo} is paused by @{call.actor}: {plain(reason)}"
    reply = f"{done[0].upper()}{done[1:]}.\n\nNothing new is ingested or merged until `/resume`.\n"
    return Outcome(done, reply=reply)
