"""What `/skip` and `/defer` share: the disposition recorded as `sluice skip` / `sluice defer` record it,
and a re-plan requested so the ingestion PRs follow."""

from __future__ import annotations

import asyncio

from bot.app.context import Context
from bot.core.command_args import CommandRefused
from bot.core.config import MERGE_HOLDS_NOTHING, Strategy
from bot.core.markdown import plain
from bot.core.models import Disposition
from handlers import requests
from handlers.commands.call import QUEUED, Call, Outcome
from handlers.commands.upstream_commit import Synced, pending_commit

VERB = {Disposition.SKIPPED: "skipped (won't port)", Disposition.DEFERRED: "deferred to the backlog"}


def may_hold(fork: Synced) -> None:
    """Refused on a `merge` fork, before anything else is asked: no merge leaves a commit out."""
    if fork.config.strategy is Strategy.MERGE:
        raise CommandRefused(*MERGE_HOLDS_NOTHING)


async def hold(call: Call, fork: Synced, sha: str, held: Disposition, *, ctx: Context) -> Outcome:
    snapshot = await asyncio.to_thread(pending_commit, fork, sha)
    subject = next((c.subject for c in snapshot.candidates if c.sha == sha), "")
    reason = call.args.get("reason")
    text = reason if isinstance(reason, str) else None
    await ctx.db(
        ctx.store.set_disposition,
        call.fork.repo,  # the store keys a fork's plans and dispositions by its GitHub name
        sha,
        held,
        reason=text,
        approver=call.actor,
        at=ctx.clock(),
    )
    await requests.ingest(ctx, call.fork.repo, reason=f"/{call.cmd.name} {sha[:10]} by @{call.actor}")
    done = f"upstream commit `{sha[:10]}` {plain(subject)} is {VERB[held]} by @{call.actor}"
    why = f" Reason: {plain(text)}" if text else ""
    reply = f"{done}.{why}\n\nSluice re-plans the fork; the ingestion PRs follow.\n"
    return Outcome(done, reply=reply, reaction=QUEUED)
