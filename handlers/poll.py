"""The poll loop: for an upstream the App is not installed on (no webhooks), ask `git ls-remote` instead."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from bot.app.context import Context
from bot.core.errors import GitError, redact
from bot.core.upstream_access import UpstreamRefused
from bot.github.installations import on_github
from bot.ports import Fork
from handlers import requests, upstream

log = logging.getLogger("sluice.poll")
GONE = ""  # the upstream head the poll saw when upstream had no such branch


async def poll_once(ctx: Context) -> list[str]:
    """Request an ingestion for every fork whose polled upstream moved; the forks requested."""
    moved: list[str] = []
    sending: dict[int, bool] = {}  # per installation upstream: whether GitHub sends its webhooks
    for fork in await ctx.db(ctx.registry.all_forks):
        if await _webhooks_arrive(ctx, fork, sending):
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
            if fork.upstream_seen != GONE:
                await _gone(ctx, fork)
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


async def _gone(ctx: Context, fork: Fork) -> None:
    """Upstream has no such branch now: told once (then `upstream_seen` marks it gone, and a branch that
    comes back is ingested), or told again next round when GitHub did not take the check run."""
    try:
        await upstream.report_gone(ctx, fork, how="git ls-remote finds none")
    except Exception:  # the other forks are polled all the same
        log.exception(
            "%s: the upstream branch %s is gone, and telling the fork failed", fork.repo, fork.upstream_branch
        )
        return
    await ctx.db(ctx.registry.mark_upstream_seen, fork.repo, old=fork.upstream_seen, new=GONE)


async def _webhooks_arrive(ctx: Context, fork: Fork, sending: dict[int, bool]) -> bool:
    """Whether the App is installed on the fork's upstream and GitHub sends its pushes: the installation is
    recorded, and GitHub has it, not suspended (a suspended one sends nothing, and no event says it ended).
    Asked of GitHub once per installation and round; when GitHub does not answer, the upstream is polled."""
    if not fork.upstream_repo:
        return False
    installation_id = await ctx.db(ctx.registry.installation_of, fork.upstream_repo)
    if installation_id is None:
        return False
    if installation_id not in sending:
        try:
            found = await on_github(ctx.github, installation_id)
        except Exception as exc:  # polling an upstream that also sends webhooks is harmless
            log.warning(
                "installation %d: GitHub did not say if it is active (%s); polling", installation_id, exc
            )
            found = None
        sending[installation_id] = found is not None and not found.suspended
    return sending[installation_id]


async def loop(ctx: Context, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await poll_once(ctx)
        except Exception:  # the loop outlives any one round's failure (a database blip, say)
            log.exception("poll round failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), ctx.settings.poll_interval)
