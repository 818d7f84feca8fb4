"""`/defer <SHA> [--reason "…"]`: move an upstream commit to the backlog; the fork is re-planned."""

from __future__ import annotations

import asyncio

from bot.app.context import Context
from bot.core.command_args import Flag, Kind, Positional, ShaPrefix, Usage
from bot.core.models import Disposition
from bot.core.permissions import Permission
from handlers.commands import holding
from handlers.commands.call import Call, Outcome
from handlers.commands.upstream_commit import synced

NAME = "defer"
WHO = Permission.WRITE
USAGE = Usage(NAME, (Positional("SHA", Kind.SHA),), (Flag("reason"),))
HELP = f"`{USAGE.line}` — move an upstream commit to the backlog until it is taken again"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    prefix = call.args.get("SHA")
    assert isinstance(prefix, ShaPrefix)
    fork = await synced(ctx, call.fork)
    holding.may_hold(fork)
    sha = await asyncio.to_thread(fork.stream_commit, prefix.text)
    return await holding.hold(call, fork, sha, Disposition.DEFERRED, ctx=ctx)
