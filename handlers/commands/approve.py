"""`/approve`: a code owner of the components the PR's api, semantic or proposed resolutions touch
approves them on the PR's current head SHA (a later push needs a new approval), as a review would. On an
emergency pick, a code owner of any file the picked commit touches approves the pick."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Usage
from bot.core.emergency import is_emergency_pull
from bot.core.gate import emergency_owners
from bot.core.permissions import Ownership, Permission, ownership
from bot.flows.merge import read_codeowners
from handlers import gatekeeping
from handlers.commands.call import Call, Outcome
from handlers.commands.on_pull import GATE_SAYS, gate_of, gated_pull, teams_of

NAME = "approve"
WHO = Permission.CODE_OWNER
USAGE = Usage(NAME)
HELP = f"`{USAGE.line}` — approve this PR's api/semantic/proposed resolutions (or emergency pick) on its head"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    pull = await gated_pull(call, ctx=ctx)
    number, head = pull.number, pull.head.sha
    keeper = await gate_of(call, ctx=ctx)
    if is_emergency_pull(pull, fork=call.fork.repo):
        paths = sorted(await keeper.forge.pull_files(number))
        # any code owner of any of its files vouches for the pick, as the gate counts it
        owners = emergency_owners(paths, await read_codeowners(keeper), keeper.config)
        area, subject = Ownership({f"the files of emergency pick #{number}": owners}), "emergency pick"
    else:
        paths = await _needing_approval(call, number, ctx=ctx)
        area, subject = (
            ownership(paths, codeowners=await read_codeowners(keeper), config=keeper.config),
            "resolutions",
        )
    teams = await teams_of(keeper, area.teams, call.actor)
    call.require_owner(area, what=f"the {subject} of #{number}", member_of=teams)
    outcome = await gatekeeping.approve(ctx, call.fork.repo, number, login=call.actor, head=head)
    done = f"@{call.actor} approved #{number}'s {subject} on head `{head[:10]}`"
    shown = ", ".join(f"`{p}`" for p in paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    reply = f"{done} ({shown}); a later push needs a new approval.\n\nNow {GATE_SAYS[outcome]}.\n"
    return Outcome(done, reply=reply)


async def _needing_approval(call: Call, number: int, *, ctx: Context) -> list[str]:
    """The paths of the ingestion PR's api, semantic and proposed resolutions; refused when it has none."""
    record = await ctx.db(ctx.gates.audit, call.fork.repo, number)
    needing = [r for r in (record.resolutions() if record is not None else ()) if r.needs_approval]
    if not needing:
        raise CommandRefused(
            f"#{number} has no api, semantic or proposed resolution, so no code owner's approval is needed",
            "nothing to approve; the gate decides on the tiers alone",
        )
    return sorted({r.path for r in needing})
