"""`/hold [reason]`: the gate of an ingestion PR or emergency pick stays closed (nothing merges it) until
`/unhold`."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import Kind, Positional, Usage
from bot.core.markdown import plain
from bot.core.permissions import Permission
from handlers import gatekeeping
from handlers.commands.call import Call, Outcome
from handlers.commands.on_pull import gated_pull

NAME = "hold"
WHO = Permission.WRITE
USAGE = Usage(NAME, (Positional("reason", Kind.SENTENCE, optional=True),))
HELP = f"`{USAGE.line}` — keep this ingestion PR or emergency pick from merging until `/unhold` (quote why)"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    pull = await gated_pull(call, ctx=ctx)
    number = pull.number
    given = call.args.get("reason")
    reason = given if isinstance(given, str) else "no reason given"
    await gatekeeping.hold(ctx, call.fork.repo, number, by=call.actor, reason=reason)
    done = f"#{number} is held by @{call.actor}: {plain(reason)}"
    return Outcome(done, reply=f"{done}.\n\nThe gate stays closed until someone comments `/unhold`.\n")
