"""`/ingest [upstream SHA or tag]`: plan the fork and bring its ingestion PRs up to date now, up to it."""

from __future__ import annotations

import asyncio

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Kind, Positional, ShaPrefix, Usage
from bot.core.markdown import plain
from bot.core.permissions import Permission
from handlers import requests
from handlers.commands.call import QUEUED, Call, Outcome
from handlers.commands.upstream_commit import synced

NAME = "ingest"
WHO = Permission.WRITE
USAGE = Usage(NAME, (Positional("upstream SHA or tag", Kind.SHA_OR_REF, optional=True),))
HELP = f"`{USAGE.line}` — plan and ingest now, up to that upstream commit"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    paused = await ctx.db(ctx.gates.paused, call.fork.repo)
    if paused is not None:
        raise CommandRefused(
            f"ingestion of {call.fork.repo} is paused by @{paused.by}: {plain(paused.reason)}",
            "`/resume` it first (maintain access)",
        )
    target = call.args.get("upstream SHA or tag")
    upto = None
    if target is not None:
        fork = await synced(ctx, call.fork)
        if isinstance(target, ShaPrefix):
            upto = await asyncio.to_thread(fork.stream_commit, target.text)
        else:
            upto = await asyncio.to_thread(fork.upstream_ref, str(target))
    where = f" up to upstream `{upto[:10]}`" if upto else ""
    queued = await requests.ingest(ctx, call.fork.repo, reason=f"/ingest by @{call.actor}", upto=upto)
    if not queued:  # one that has the same cap, or none as this has none
        done = f"an ingestion run of {call.fork.repo}{where} is already queued; it answers this /ingest"
        return Outcome(done, reply=f"{done.capitalize()}.\n", reaction=QUEUED)
    done = f"an ingestion run of {call.fork.repo}{where} is queued"
    reply = f"{done.capitalize()} by @{call.actor}; the ingestion PRs follow.\n"
    return Outcome(done, reply=reply, reaction=QUEUED)
