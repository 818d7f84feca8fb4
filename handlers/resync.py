"""Nothing lost: the redelivery sweep asks GitHub again for webhooks that never reached Sluice, and the
periodic resync re-plans every fork from the repositories' real state, each on one replica per interval."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from gidgethub import HTTPException
from prometheus_client import CollectorRegistry, Counter

from bot.app.context import Context
from bot.core.errors import SluiceError
from bot.core.redelivery import (
    REDELIVERY_WINDOW,
    Redelivery,
    SweepPlan,
    plan_redeliveries,
    undelivered,
)
from bot.core.tiers import RunState
from bot.db.leases import Leases, periodically
from bot.github.deliveries import AppDeliveries
from handlers import gatekeeping, requests

REDELIVERY, RESYNC, TIER_SWEEP = "redelivery", "resync", "tier-sweep"  # the leases' names
SHORTEST_TIMEOUT = dt.timedelta(minutes=1)  # no tier's timeout_minutes is shorter
log = logging.getLogger("sluice.resync")


class ReconcileMetrics:
    """The sweep's and the resync's counters, on the app's /metrics registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.sweeps = Counter("sluice_redelivery_sweeps", "Redelivery sweeps run", registry=registry)
        self.redeliveries = Counter(
            "sluice_redeliveries",
            "Redeliveries Sluice asked GitHub for, by outcome (asked, failed)",
            ["outcome"],
            registry=registry,
        )
        self.skipped = Counter(
            "sluice_redelivery_skipped",
            "Failed deliveries the sweep did not ask for again, by reason",
            ["reason"],
            registry=registry,
        )
        self.resyncs = Counter("sluice_resyncs", "Periodic resyncs run", registry=registry)
        self.resynced_forks = Counter(
            "sluice_resync_forks", "Forks the periodic resync asked to re-plan", registry=registry
        )


async def sweep_once(ctx: Context, metrics: ReconcileMetrics) -> SweepPlan:
    """Ask GitHub to redeliver, once each, the events it failed to deliver and Sluice never recorded."""
    deliveries = AppDeliveries(ctx.github.app_api())
    attempts = await deliveries.since(ctx.clock() - REDELIVERY_WINDOW)  # GitHub redelivers no older one
    recorded = await ctx.db(ctx.job_requests.recorded, undelivered(attempts))
    plan = plan_redeliveries(attempts, recorded=recorded, now=ctx.clock())
    for redelivery in plan.redeliver:
        await _ask(deliveries, redelivery, metrics)
    for reason, count in plan.skipped.items():
        metrics.skipped.labels(reason=reason.value).inc(count)
    metrics.sweeps.inc()
    log.info(
        "redelivery sweep: %d attempts listed, %d redeliveries asked for, skipped %s",
        len(attempts),
        len(plan.redeliver),
        dict(sorted((k.value, v) for k, v in plan.skipped.items())) or "none",
    )
    return plan


async def _ask(deliveries: AppDeliveries, redelivery: Redelivery, metrics: ReconcileMetrics) -> None:
    what = f"{redelivery.guid} ({redelivery.event}{f'.{redelivery.action}' if redelivery.action else ''})"
    try:
        await deliveries.redeliver(redelivery.attempt_id)
    except (HTTPException, SluiceError) as exc:  # one refusal must not stop the others
        log.warning("GitHub refused to redeliver %s: %s", what, exc)
        metrics.redeliveries.labels(outcome="failed").inc()
        return
    log.info(
        "asked GitHub to redeliver %s: %d attempts so far, the last answered %s (%s)",
        what,
        redelivery.attempts,
        redelivery.last_status_code,
        redelivery.last_status,
    )
    metrics.redeliveries.labels(outcome="asked").inc()


async def resync_once(ctx: Context, metrics: ReconcileMetrics) -> list[str]:
    """Request an ingestion of every registered fork; the forks requested.

    A queued, not yet started ingestion of a fork absorbs the request (`enqueue_once`), so the resync
    never piles jobs up.
    """
    forks = [fork.repo for fork in await ctx.db(ctx.registry.all_forks)]
    for repo in forks:
        await requests.ingest(ctx, repo, reason="periodic resync")
    metrics.resyncs.inc()
    metrics.resynced_forks.inc(len(forks))
    log.info("resync: %d forks re-planned", len(forks))
    return forks


async def tier_sweep_once(ctx: Context) -> list[str]:
    """Ask each fork with a tier run waiting longer than any tier's timeout, or waiting for its dispatch,
    to time out its stalled runs (its job reads the fork's own timeouts); the forks asked. The gates of PRs
    whose waiver expired since are asked to be judged again too (`judge_expired_waivers`)."""
    await gatekeeping.judge_expired_waivers(ctx)
    since = ctx.clock() - SHORTEST_TIMEOUT
    waiting = await ctx.db(ctx.tier_runs.waiting)
    forks = sorted({r.fork for r in waiting if r.state is RunState.UNDISPATCHED or r.dispatched_at <= since})
    for fork in forks:
        await requests.tier_timeouts(ctx, fork)
    log.info("tier sweep: %d waiting runs, %d forks asked to time out theirs", len(waiting), len(forks))
    return forks


def loops(
    ctx: Context, *, registry: CollectorRegistry, holder: str, stop: asyncio.Event
) -> dict[str, Coroutine[Any, Any, None]]:
    """The sweep's and the resync's loops by name, for those whose interval is set (0 turns one off)."""
    metrics, leases, settings = ReconcileMetrics(registry), Leases(ctx.store), ctx.settings

    def every(name: str, interval: float, task: Callable[[], Awaitable[object]]) -> Coroutine[Any, Any, None]:
        return periodically(
            name, task, interval=interval, leases=leases, holder=holder, clock=ctx.clock, stop=stop
        )

    out = {}
    if settings.redelivery_interval > 0:
        out[REDELIVERY] = every(REDELIVERY, settings.redelivery_interval, lambda: sweep_once(ctx, metrics))
    if settings.resync_interval > 0:
        out[RESYNC] = every(RESYNC, settings.resync_interval, lambda: resync_once(ctx, metrics))
    if settings.tier_sweep_interval > 0:
        out[TIER_SWEEP] = every(TIER_SWEEP, settings.tier_sweep_interval, lambda: tier_sweep_once(ctx))
    return out
