"""The gate re-evaluated for an ingestion PR: the fork's config read from trunk, then `bot.flows.merge`."""

from __future__ import annotations

import logging

from bot.app.context import Context
from bot.core.config import CONFIG_PATH, ConfigError, parse_config
from bot.db.gates import GateStore
from bot.db.registry import Fork
from bot.flows.merge import Gatekeeper, Outcome, evaluate

log = logging.getLogger("sluice.gate")


async def reevaluate(ctx: Context, repo: str, number: int) -> Outcome:
    """Judge PR `number` of `repo` again (and merge it when the gate passes and policy allows)."""
    fork = await ctx.db(ctx.registry.fork, repo)
    if fork is None:
        return Outcome.SKIPPED
    keeper = await gatekeeper(ctx, fork)
    if keeper is None:
        return Outcome.SKIPPED
    outcome = await evaluate(keeper, number)
    log.info("%s #%d: gate %s", repo, number, outcome.value)
    return outcome


async def gatekeeper(ctx: Context, fork: Fork) -> Gatekeeper | None:
    """The fork's gate, with `.github/sluice.yml` as trunk has it; None while that file is broken (its
    `sluice/config` check run says why)."""
    forge = ctx.forge(fork.installation_id, fork.repo)
    text = await forge.read_text(CONFIG_PATH, ref=fork.branch)
    try:
        config = parse_config(text or "", trusted_url_prefixes=ctx.trusted_url_prefixes)
    except ConfigError as exc:
        log.warning(
            "%s: %s is invalid; the gate waits for a valid one:\n%s", fork.repo, CONFIG_PATH, exc.message
        )
        return None
    gates = GateStore(ctx.store)
    return Gatekeeper(forge, gates, ctx.db, fork.branch, config, ctx.clock, ctx.bot_login)
