"""`/retry [tier]`: run that tier again on the PR's head, or, without one, every tier that failed there; on
any PR Sluice validates (an ingestion PR, an emergency pick or a fork PR). On a PR from outside the fork,
`/retry l2` is the maintainer's Run L2."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Kind, Positional, Usage
from bot.core.permissions import Permission
from bot.core.tiers import Level, Want, failed_levels
from handlers import requests
from handlers.commands.call import QUEUED, Call, Outcome
from handlers.commands.on_pull import gate_of, level_of, refuse_unless_it_starts, validated_pull

NAME = "retry"
WHO = Permission.WRITE
USAGE = Usage(NAME, (Positional("tier", Kind.TEXT, optional=True),))
HELP = f"`{USAGE.line}` — re-run that tier (l1, l2, l3), or the failed ones, on this PR's head"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    named = call.args.get("tier")
    wanted = level_of(named) if named is not None else None
    pull = await validated_pull(call, ctx=ctx)
    number, head = pull.number, pull.head.sha
    if wanted is not None:
        config = (await gate_of(call, ctx=ctx)).config
        again = f"/{NAME} {wanted.value}"
        await refuse_unless_it_starts(call, pull, Want(rerun=wanted), config=config, again=again, ctx=ctx)
    levels = [wanted] if wanted is not None else await _failed(call, head, ctx=ctx)
    if not levels:
        raise CommandRefused(f"no tier failed on #{number}'s head `{head[:10]}`", "name the tier to re-run")
    for level in levels:
        await requests.tiers(ctx, call.fork.repo, number, rerun=level)
    shown = ", ".join(level.name for level in levels)
    done = f"{shown} re-run on #{number}'s head `{head[:10]}`, asked by @{call.actor}"
    return Outcome(done, reply=f"{done}; the check runs report.\n", reaction=QUEUED)


async def _failed(call: Call, head: str, *, ctx: Context) -> list[Level]:
    """The tiers whose check run on `head` concluded failed or timed out."""
    runs = await ctx.forge(call.fork.installation_id, call.fork.repo).check_runs(head)
    return failed_levels(runs)
