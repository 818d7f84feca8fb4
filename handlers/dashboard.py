"""The dashboard issue after each ingestion run: gather what it shows, render it, publish it in place."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.app.context import Context
from bot.core.config import SluiceConfig
from bot.core.dashboard import BacklogCommit, DashboardModel, OpenIngestion, render
from bot.core.ingestion import IngestionRecord, Links, Tier
from bot.core.models import Plan
from bot.flows.dashboard import Published, publish
from bot.github.forge import ForkGitHub

log = logging.getLogger("sluice.dashboard")
TIERS = frozenset(t.value for t in Tier)
LIVE = ("open", "blocked")  # the registry's states of an ingestion that has a PR or a tracking issue


@dataclass(frozen=True)
class Shown:
    """What this ingestion run decided that the dashboard shows."""

    plan: Plan
    config: SluiceConfig
    backlog: tuple[BacklogCommit, ...]
    links: Links


async def update(ctx: Context, forge: ForkGitHub, shown: Shown) -> Published:
    """Render the dashboard from the lag history, the registry and the tiers' check runs; publish it."""
    repo = forge.repo
    history = await ctx.db(ctx.lag_history.history, repo)
    records = [r for state in LIVE for r in await ctx.db(ctx.registry.ingestions, repo, state=state)]
    model = DashboardModel(
        fork=repo,
        now=ctx.clock(),
        history=history,
        links=shown.links,
        chains=shown.plan.chains,
        components=shown.config.all_components,
        backlog=shown.backlog,
        ingestions=[await _ingestion(forge, r) for r in sorted(records, key=_order)],
        # waivers, holds, paused and throttle: given here once the gate records them; absent, they read "none"
    )
    published, number = await publish(forge, render(model))
    log.info("%s: dashboard #%d %s", repo, number, published.value)
    return published


def _order(record: IngestionRecord) -> tuple[int, str]:
    return (record.pr_number or 0, record.id)


async def _ingestion(forge: ForkGitHub, record: IngestionRecord) -> OpenIngestion:
    blocked = record.state == "blocked"
    runs = await forge.check_runs(record.head) if record.head and not blocked else {}
    return OpenIngestion(
        unit_id=record.id,
        number=record.pr_number,
        blocked=blocked,
        commits=record.commits,
        tiers=_states(runs),
    )


def _states(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {name: str(run.get("conclusion") or run["status"]) for name, run in runs.items() if name in TIERS}
