"""`/waive <tier> --until YYYY-MM-DD --reason "…" --plan "…"`: a failed L2 or L3 counts as passed on this
ingestion PR's (or emergency pick's) current head until the end of that day (UTC), then the gate closes
again; a later push needs a new waiver. Never L1. Whoever owns the tier (its config `owner`, else the code
owners of `.github/sluice.yml`, the fork's policy) may grant it."""

from __future__ import annotations

import datetime as dt

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Flag, Kind, Positional, Usage
from bot.core.config import CONFIG_PATH
from bot.core.gate import Waiver
from bot.core.markdown import plain
from bot.core.permissions import Ownership, Permission, ownership
from bot.core.tiers import Level, tier_config
from bot.flows.merge import Gatekeeper, read_codeowners
from handlers import gatekeeping
from handlers.commands.call import Call, Outcome
from handlers.commands.on_pull import GATE_SAYS, gate_of, gated_pull, level_of, teams_of

MAX_WAIVER = dt.timedelta(days=90)  # the furthest expiry a waiver may name
NAME = "waive"
WHO = Permission.CODE_OWNER
USAGE = Usage(
    NAME,
    (Positional("tier", Kind.TEXT),),
    (
        Flag("until", Kind.DATE, required=True),
        Flag("reason", required=True),
        Flag("plan", required=True),
    ),
)
HELP = f"`{USAGE.line}` — a failed L2 or L3 counts as passed on this PR's head until that day ends (UTC)"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    level = level_of(call.args.get("tier"), waivable=True)
    until = call.args.get("until")
    assert isinstance(until, dt.date)
    today = ctx.clock().astimezone(dt.UTC).date()
    if until < today:
        raise CommandRefused(f"--until {until.isoformat()} is in the past", f"give {today} or later")
    if until > today + MAX_WAIVER:  # a waiver is a stopgap with a recovery plan, not a standing exception
        latest = (today + MAX_WAIVER).isoformat()
        raise CommandRefused(
            f"--until {until.isoformat()} is more than {MAX_WAIVER.days} days away",
            f"give {latest} or earlier",
        )
    pull = await gated_pull(call, ctx=ctx)
    keeper = await gate_of(call, ctx=ctx)
    area, owner = await _tier_owners(keeper, level)
    call.require_owner(
        area, what=f"tier {level.name}", member_of=await teams_of(keeper, area.teams, call.actor)
    )
    expires = dt.datetime.combine(until + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    reason, plan = str(call.args.get("reason")), str(call.args.get("plan"))
    number, head = pull.number, pull.head.sha
    waiver = Waiver(level.check, owner, reason, plan, expires, call.actor, head)
    outcome = await gatekeeping.waive(ctx, call.fork.repo, number, waiver)
    done = (
        f"{level.name} is waived on #{number} at head `{head[:10]}` by @{call.actor} until "
        f"{until.isoformat()} (end of day, UTC)"
    )
    reply = (
        f"{done}: {plain(reason)}\n\nRecovery plan: {plain(plan)}\n\nA later push needs a new waiver.\n\n"
        f"Now {GATE_SAYS[outcome]}.\n"
    )
    return Outcome(done, reply=reply)


async def _tier_owners(keeper: Gatekeeper, level: Level) -> tuple[Ownership, str]:
    """Who may waive the tier, and the owner the waiver names."""
    owner = tier_config(keeper.config, level).owner
    if owner is not None:
        return Ownership({f"tiers.{level.value}": (owner,)}), owner
    area = ownership([CONFIG_PATH], codeowners=await read_codeowners(keeper), config=keeper.config)
    return area, " ".join(area.owners.get(CONFIG_PATH, ())) or "nobody"
