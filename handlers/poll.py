"""The poll loop: for an upstream the App is not installed on (no webhooks), ask `git ls-remote` instead."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from bot.app.context import Context
from bot.core.errors import GitError, redact
from bot.core.upstream_access import UpstreamRefused
from handlers import requests, upstream

log = logging.getLogger("sluice.poll")
GONE = ""  # the upstream head the poll saw when upstream had no such branch


async def poll_once(ctx: Context) -> list[str]:
    """Request an ingestion for every fork whose polled upstream moved; the forks requested."""
    moved = []
    for fork in await ctx.db(ctx.registry.all_forks):
        if fork.upstream_repo and await ctx.db(ctx.registry.installation_of, fork.upstream_repo) is not None:
            continue  # the App is installed upstream: push webhooks arrive, no need to poll
        try:
            # Settings or DNS may have changed since the fork registered: the host is checked every time.
            await asyncio.to_thread(ctx.check_upstream_host, fork.repo, fork.upstream_url)
            head = await asyncio.to_thread(
                ctx.mirror(fork.repo).ls_remote, fork.upstream_url, fork.upstream_branch
            )
        except (GitError, UpstreamRefused) as exc:
            log.warning("poll of %s for %s failed: %s", redact(fork.upstream_url), fork.repo, exc.message)
            continue
        if head is None:
            # Told once (upstream_seen marks it gone), polled on: a branch that comes back is ingested.
            if fork.upstream_seen != GONE and await ctx.db(
                ctx.registry.mark_upstream_seen, fork.repo, old=fork.upstream_seen, new=GONE
            ):
                await upstream.report_gone(ctx, fork, how="git ls-remote finds none")
            continue
        if head == fork.upstream_seen:
            continue
        # Compare-and-set: of several replicas polling at once, one requests the ingestion.
        if await ctx.db(ctx.registry.mark_upstream_seen, fork.repo, old=fork.upstream_seen, new=head):
            await requests.ingest(
                ctx, fork.repo, reason=f"poll: upstream {fork.upstream_branch} moved to {head[:10]}"
            )
            moved.append(fork.repo)
    return moved


async def loop(ctx: Context, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await poll_once(ctx)
        except Exception:  # the loop outlives any one round's failure (a database blip, say)
            log.exception("poll round failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), ctx.settings.poll_interval)
