"""The gate re-evaluated for an ingestion PR: the fork's config read from trunk, then `bot.flows.merge`."""

from __future__ import annotations

import logging

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.config import CONFIG_PATH, ConfigError
from bot.core.errors import BadInput, NotFound
from bot.core.gate import Waiver
from bot.flows.merge import Gatekeeper, Outcome, evaluate, is_sluice_pull, record_merge
from bot.ports import Fork, Job
from handlers import requests
from handlers.requests import GateRequest

log = logging.getLogger("sluice.gate")


router = Router()


@router.register(requests.GATE)
async def on_gate(request: GateRequest, *, ctx: Context, job: Job) -> None:
    """The periodic sweep's ask: judge the PR's gate again (a waiver on it expired)."""
    log.info("%s #%d: judging the gate again: %s", request.fork, request.pull, request.reason)
    await reevaluate(ctx, request.fork, request.pull)


async def judge_expired_waivers(ctx: Context) -> list[tuple[str, int]]:
    """Ask for the gate of each PR whose waiver expired since the last ask (the sweep calls this): a gate
    the waiver kept green turns red when it ends, not at the PR's next event. The PRs asked for."""
    expired = await ctx.db(ctx.gates.expired_unjudged, ctx.clock())
    for repo, number in expired:
        await requests.gate(ctx, repo, number, reason="a waiver on it expired")
    return expired


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


async def merged(ctx: Context, repo: str, number: int) -> Outcome:
    """PR `number` was merged (by a person, or by Sluice, whose record is closed already)."""
    fork = await ctx.db(ctx.registry.fork, repo)
    keeper = await gatekeeper(ctx, fork) if fork is not None else None
    return await record_merge(keeper, number) if keeper is not None else Outcome.SKIPPED


async def gatekeeper(ctx: Context, fork: Fork) -> Gatekeeper | None:
    """The fork's gate, with `.github/sluice.yml` as trunk has it; None while that file is broken (its
    `sluice/config` check run says why)."""
    try:
        config = await ctx.trunk_config(fork)
    except (ConfigError, BadInput) as exc:
        log.warning(
            "%s: %s is invalid; the gate waits for a valid one:\n%s", fork.repo, CONFIG_PATH, exc.message
        )
        return None
    forge, gates = ctx.forge(fork.installation_id, fork.repo), ctx.gates
    return Gatekeeper(
        forge, gates, ctx.db, fork.branch, config, ctx.clock, ctx.bot_login, signoffs=ctx.signoffs
    )


# ------------------------------------------------------------------ what the slash commands (issue 14) call
# Each records its fact and judges the gate again at once; who may call it is the command's decision.


async def approve(ctx: Context, repo: str, number: int, *, login: str, head: str | None = None) -> Outcome:
    """`/approve`: `login` approves `head` (the one the command checked and names; else the PR's current
    head); it stops counting at the next push."""
    fork = await _registered(ctx, repo)
    if head is None:
        head = (await ctx.forge(fork.installation_id, repo).get_pull(number)).head.sha
    await ctx.db(ctx.gates.record_approval, repo, number, login=login, head_sha=head, at=ctx.clock())
    return await reevaluate(ctx, repo, number)


async def signoff(ctx: Context, repo: str, number: int, *, login: str, head: str) -> tuple[bool, Outcome]:
    """`/signoff l3`: `login` accepts L3's regressed metrics on `head` (the head the command checked); it
    stops counting at the next push. Whether it is new (False: they had signed off this head already)."""
    await _registered(ctx, repo)
    new = await ctx.db(ctx.signoffs.record_signoff, repo, number, login=login, head_sha=head, at=ctx.clock())
    return new, await reevaluate(ctx, repo, number)


async def waive(ctx: Context, repo: str, number: int, waiver: Waiver) -> Outcome:
    """`/waive`: a failed L2 or L3 counts as passed until the waiver's expiry (ValueError for L1)."""
    await _registered(ctx, repo)
    await ctx.db(ctx.gates.add_waiver, repo, number, waiver, at=ctx.clock())
    return await reevaluate(ctx, repo, number)


async def hold(ctx: Context, repo: str, number: int, *, by: str, reason: str) -> Outcome:
    """`/hold`: the gate stays closed until `/unhold`."""
    await _registered(ctx, repo)
    await ctx.db(ctx.gates.set_hold, repo, number, by=by, reason=reason, at=ctx.clock())
    return await reevaluate(ctx, repo, number)


async def unhold(ctx: Context, repo: str, number: int) -> Outcome:
    """`/unhold`: release the hold (nothing changes when there was none) and judge the gate again."""
    await _registered(ctx, repo)
    await ctx.db(ctx.gates.clear_hold, repo, number)
    return await reevaluate(ctx, repo, number)


async def pause(ctx: Context, repo: str, *, by: str, reason: str) -> None:
    """`/pause`: no automatic ingestion and no merge for the fork until `/resume`."""
    await _registered(ctx, repo)
    await ctx.db(ctx.gates.pause, repo, by=by, reason=reason, at=ctx.clock())


async def resume(ctx: Context, repo: str, *, by: str) -> dict[int, Outcome]:
    """`/resume`: lift the pause, start the run of failures from zero, ingest at once, and judge again the
    gate of each open ingestion PR and emergency pick (one whose gate passed meanwhile merges now: nothing
    else would judge it again). Each such PR's outcome, by number."""
    fork = await _registered(ctx, repo)
    await ctx.db(ctx.gates.resume, repo)
    await requests.ingest(ctx, repo, reason=f"ingestion resumed by @{by}")
    pulls = await ctx.forge(fork.installation_id, repo).open_pulls()
    ours = sorted(p.number for p in pulls if is_sluice_pull(p, repo))
    return {number: await reevaluate(ctx, repo, number) for number in ours}


async def _registered(ctx: Context, repo: str) -> Fork:
    fork = await ctx.db(ctx.registry.fork, repo)
    if fork is None:
        raise NotFound(f"{repo} is not a fork Sluice keeps in sync", "add .github/sluice.yml to its trunk")
    return fork
