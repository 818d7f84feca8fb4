"""`/approve`: a code owner of the components the PR's api, semantic or proposed resolutions touch
approves them on the PR's current head SHA (a later push needs a new approval), as a review would."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Usage
from bot.core.permissions import Permission, ownership
from handlers import gatekeeping
from handlers.commands.call import Call, Outcome
from handlers.commands.on_pull import GATE_SAYS, codeowners, gate_of, ingestion_pull, teams_of

NAME = "approve"
WHO = Permission.CODE_OWNER
USAGE = Usage(NAME)
HELP = f"`{USAGE.line}` — approve this ingestion PR's api/semantic/proposed resolutions on its head SHA"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    pull = await ingestion_pull(call, ctx=ctx)
    number, head = int(pull["number"]), str(pull["head"]["sha"])
    record = await ctx.db(ctx.gates.audit, call.fork.repo, number)
    needing = [r for r in (record.resolutions() if record is not None else ()) if r.needs_approval]
    if not needing:
        raise CommandRefused(
            f"#{number} has no api, semantic or proposed resolution, so no code owner's approval is needed",
            "nothing to approve; the gate decides on the tiers alone",
        )
    keeper = await gate_of(call, ctx=ctx)
    paths = sorted({r.path for r in needing})
    area = ownership(paths, codeowners=await codeowners(keeper), config=keeper.config)
    teams = await teams_of(keeper, area.teams, call.actor)
    call.require_owner(area, what=f"the resolutions of #{number}", member_of=teams)
    outcome = await gatekeeping.approve(ctx, call.fork.repo, number, login=call.actor, head=head)
    done = f"@{call.actor} approved #{number}'s resolutions on head `{head[:10]}`"
    shown = ", ".join(f"`{p}`" for p in paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    reply = f"{done} ({shown}); a later push needs a new approval.\n\nNow {GATE_SAYS[outcome]}.\n"
    return Outcome(done, reply=reply)
