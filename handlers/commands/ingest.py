"""`/ingest [upstream ref]`: plan the fork and bring its ingestion PRs up to date now, up to the ref."""

from __future__ import annotations

import asyncio

from bot.app.context import Context
from bot.core.command_args import Kind, Positional, ShaPrefix, Usage
from bot.core.permissions import Permission
from handlers import requests
from handlers.commands.call import QUEUED, Call, Outcome
from handlers.commands.upstream_commit import synced

NAME = "ingest"
WHO = Permission.WRITE
USAGE = Usage(NAME, (Positional("upstream SHA", Kind.SHA, optional=True),))
HELP = f"`{USAGE.line}` — plan and ingest now, up to that upstream commit"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    prefix = call.args.get("upstream SHA")
    upto = None
    if isinstance(prefix, ShaPrefix):
        fork = await synced(ctx, call.fork)
        upto = await asyncio.to_thread(fork.stream_commit, prefix.text)
    where = f" up to upstream `{upto[:10]}`" if upto else ""
    queued = await requests.ingest(ctx, call.fork.repo, reason=f"/ingest by @{call.actor}", upto=upto)
    if not queued:
        done = f"an ingestion run of {call.fork.repo} is already queued; it answers this /ingest"
        return Outcome(
            done, reply=f"{done.capitalize()} (it plans the whole upstream branch).\n", reaction=QUEUED
        )
    done = f"an ingestion run of {call.fork.repo}{where} is queued"
    return Outcome(
        done, reply=f"{done.capitalize()} by @{call.actor}; the ingestion PRs follow.\n", reaction=QUEUED
    )
