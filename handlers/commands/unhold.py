"""`/unhold`: release `/hold` on the ingestion PR or emergency pick and judge its gate again (it may merge at
once)."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Usage
from bot.core.markdown import plain
from bot.core.permissions import Permission
from handlers import gatekeeping
from handlers.commands.call import Call, Outcome
from handlers.commands.on_pull import GATE_SAYS, gated_pull

NAME = "unhold"
WHO = Permission.WRITE
USAGE = Usage(NAME)
HELP = f"`{USAGE.line}` — release the hold on this PR; the gate is judged again"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    pull = await gated_pull(call, ctx=ctx)
    number = pull.number
    held = await ctx.db(ctx.gates.hold, call.fork.repo, number)
    if held is None:
        raise CommandRefused(f"#{number} is not held", "`/hold` it first; there is nothing to release")
    outcome = await gatekeeping.unhold(ctx, call.fork.repo, number)
    done = f"@{call.actor} released the hold on #{number} (held by @{held.by}: {plain(held.reason)})"
    return Outcome(done, reply=f"{done}; {GATE_SAYS[outcome]}.\n")
