"""`/signoff l3`: an owner of an area whose L3 benchmarks regressed beyond noise on the ingestion PR's head
accepts those metrics, on that head only (a later push needs a new signoff). The areas and their owners are
the config's `tiers.l3.areas` (its `owners`, and the CODEOWNERS and component owners of its `files`); the
kernels no area covers are L3's `owner`'s (else the config's code owners')."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Kind, Positional, Usage
from bot.core.gate import area_shown, l3_area_owners
from bot.core.l3_metrics import by_area, listed
from bot.core.permissions import Ownership, Permission
from bot.flows.merge import read_codeowners
from handlers import gatekeeping
from handlers.commands.call import Call, Outcome
from handlers.commands.on_pull import GATE_SAYS, gate_of, gated_pull, teams_of

NAME = "signoff"
WHO = Permission.CODE_OWNER
USAGE = Usage(NAME, (Positional("tier", Kind.TEXT),))
HELP = f"`/{NAME} l3` — accept L3's regressed metrics on this ingestion PR's head, as an owner of their area"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    tier = str(call.args.get("tier"))
    if tier.lower() != "l3":
        shown = tier[:20].replace("`", "'")
        raise CommandRefused(f"`{shown}` cannot be signed off: only L3's metrics are", "write `/signoff l3`")
    pull = await gated_pull(call, ctx=ctx)
    number, head = pull.number, pull.head.sha
    metrics = await ctx.db(ctx.signoffs.l3_metrics, call.fork.repo, number, head_sha=head)
    if metrics is None or not metrics.regressions:
        why = "L3 has no result on it" if metrics is None else "no L3 metric regressed on it"
        raise CommandRefused(
            f"there is nothing to sign off on #{number}'s head `{head[:10]}`: {why}",
            "nothing to do; a signoff counts only for a head whose L3 run regressed",
        )
    keeper = await gate_of(call, ctx=ctx)
    found = await read_codeowners(keeper)
    areas = by_area(metrics.regressions, keeper.config)
    owners = {area: l3_area_owners(area, found, keeper.config) for area in areas}
    everyone = Ownership({f"area {a}": names for a, names in owners.items()})
    teams = await teams_of(keeper, everyone.teams, call.actor)
    mine = [a for a in areas if _owns(owners[a], call.actor, teams)]
    # Owning one affected area is enough to sign that area off; owning none is refused, naming the owners.
    call.require_owner(
        Ownership({f"area {a}": owners[a] for a in mine}) if mine else everyone,
        what=f"an area whose L3 metrics regressed on #{number}",
        member_of=teams,
    )
    new, outcome = await gatekeeping.signoff(ctx, call.fork.repo, number, login=call.actor, head=head)
    signed = "; ".join(f"area {area_shown(a)}: {listed(areas[a])}" for a in mine)
    done = f"@{call.actor} signed off L3's regressed metrics on #{number}'s head `{head[:10]}`"
    lines = [f"{done} ({signed}); a later push needs a new signoff."]
    if not new:
        done = f"@{call.actor} had signed off L3's metrics on #{number}'s head `{head[:10]}` already"
        lines = [f"{done} ({signed}): nothing changed."]
    waiting = [a for a in areas if a not in mine]
    if waiting:
        rest = "; ".join(f"area {area_shown(a)} ({' '.join(owners[a]) or 'no owner named'})" for a in waiting)
        lines.append(f"Still to be signed off by their owners: {rest}.")
    return Outcome(done, reply="\n\n".join([*lines, f"Now {GATE_SAYS[outcome]}."]) + "\n")


def _owns(owners: tuple[str, ...], login: str, teams: list[str]) -> bool:
    mine = {"@" + login.lower(), *(t.lower() for t in teams)}
    return bool(mine & {o.lower() for o in owners})
