"""`/skip <SHA> --reason "…"`: a code owner marks an upstream commit won't-port; the fork is re-planned."""

from __future__ import annotations

import asyncio

from bot.app.context import Context
from bot.core.command_args import Flag, Kind, Positional, ShaPrefix, Usage
from bot.core.models import Disposition
from bot.core.permissions import Permission
from handlers.commands import holding
from handlers.commands.call import Call, Outcome
from handlers.commands.upstream_commit import synced

NAME = "skip"
WHO = Permission.CODE_OWNER
USAGE = Usage(NAME, (Positional("SHA", Kind.SHA),), (Flag("reason", required=True),))
HELP = f"`{USAGE.line}` — mark an upstream commit won't-port"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    prefix = call.args.get("SHA")
    assert isinstance(prefix, ShaPrefix)
    fork = await synced(ctx, call.fork)
    holding.may_hold(fork)
    sha = await asyncio.to_thread(fork.stream_commit, prefix.text)
    area = await asyncio.to_thread(fork.ownership_of, sha)
    forge = ctx.forge(call.fork.installation_id, call.fork.repo)
    teams = [team for team in sorted(area.teams) if await forge.in_team(team, call.actor)]
    call.require_owner(area, what=f"upstream commit `{sha[:10]}`", member_of=teams)
    return await holding.hold(call, fork, sha, Disposition.SKIPPED, ctx=ctx)
