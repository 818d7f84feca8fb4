"""`/bisect [tier]`: bisect this ingestion PR on a tier now (default: the tier that failed on its head):
candidate branches for its prefixes, the tier dispatched on them, the culprit taken out of the PR."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Kind, Positional, Usage
from bot.core.errors import BadInput
from bot.core.permissions import Permission
from bot.flows import bisection
from handlers.bisect import bisecting
from handlers.commands.call import QUEUED, Call, Outcome
from handlers.commands.on_pull import ingestion_pull, level_of

NAME = "bisect"
WHO = Permission.WRITE
USAGE = Usage(NAME, (Positional("tier", Kind.TEXT, optional=True),))
HELP = f"`{USAGE.line}` — bisect this ingestion PR on that tier (l1, l2, l3; default: the failed one) now"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    named = call.args.get("tier")
    level = level_of(named) if named is not None else None
    pull = await ingestion_pull(call, ctx=ctx)
    number = pull.number
    b = await bisecting(ctx, call.fork)
    try:
        started = await bisection.start(b, number, level=level, by=call.actor)
    except BadInput as exc:
        raise CommandRefused(exc.message, exc.remedy) from exc
    state = started.state
    done = (
        f"bisection of #{number} on {started.level.name} started by @{call.actor}: "
        f"{len(state.commits)} commits, at most {state.budget.max_runs} tier runs"
    )
    reply = f"{done}; the bisection comment on this PR shows each probe.\n"
    return Outcome(done, reply=reply, reaction=QUEUED)
