"""What the commands about one PR share: the ingestion PR (or, for the tier commands, any PR Sluice validates)
found, and anything else refused with a reply that says where the command works; the fork's gate as trunk
configures it, tier names, the gate's word, and a tier asked for that cannot start now refused with why."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused
from bot.core.config import SluiceConfig
from bot.core.emergency import EMERGENCY_PREFIX
from bot.core.ingestion import BRANCH_PREFIX
from bot.core.tiers import Level, Want, why_not
from bot.core.webhooks import Pull
from bot.flows.merge import Gatekeeper, Outcome
from bot.flows.tiers import subject_of
from handlers import gatekeeping
from handlers.commands.call import Call
from handlers.tiers import not_run_locally

GATE_SAYS = {
    Outcome.WAITING: "the gate is closed",
    Outcome.OPEN: "the gate is open; the merge is left to a person",
    Outcome.MERGED: "the gate is open and Sluice merged the PR",
    Outcome.REFUSED: "the gate is open but GitHub refused the merge (the head moved)",
    Outcome.SKIPPED: "the gate was not judged",
}


async def ingestion_pull(call: Call, *, ctx: Context) -> Pull:
    """The open ingestion PR the command was commented on; refused on an issue or any other PR."""
    where = f"`/{call.cmd.name}` acts on an open ingestion PR (branch `{BRANCH_PREFIX}…`)"
    return await _own_pull(call, (BRANCH_PREFIX,), where=where, other="not one", ctx=ctx)


async def gated_pull(call: Call, *, ctx: Context) -> Pull:
    """The open PR the gate judges that the command was commented on: an ingestion PR or an emergency pick
    (`/cherry-pick`'s, which goes through the same gate); refused on an issue or any other PR."""
    where = (
        f"`/{call.cmd.name}` acts on an open ingestion PR (branch `{BRANCH_PREFIX}…`) or emergency pick "
        f"(`{EMERGENCY_PREFIX}…`)"
    )
    return await _own_pull(call, (BRANCH_PREFIX, EMERGENCY_PREFIX), where=where, other="neither", ctx=ctx)


async def _own_pull(call: Call, prefixes: tuple[str, ...], *, where: str, other: str, ctx: Context) -> Pull:
    """The open PR from one of Sluice's branches (`prefixes`, in the fork itself) that the command was
    commented on; refused, saying `where` the command works, on an issue, another PR or a closed one."""
    on = call.cmd.on
    pull = await _pull_on(call, ctx=ctx, where=where, remedy="comment it on that PR")
    if not pull.on_branch_of(call.fork.repo, prefixes):
        raise CommandRefused(f"{where}; #{on.number} is {other}", "comment it on that PR")
    if not pull.is_open:
        raise CommandRefused(f"{where}; #{on.number} is {pull.state}", "nothing to do on it")
    return pull


async def validated_pull(call: Call, *, ctx: Context) -> Pull:
    """The open PR the command was commented on whose tiers Sluice runs: an ingestion PR (into fork trunk or,
    stacked, into the unit before it), or a PR into fork trunk (an emergency pick, a branch of the fork's, and
    with the GitHub backend a PR from outside the fork). An issue, another PR into another branch or a closed
    one is refused, saying where the command works."""
    on, trunk = call.cmd.on, call.fork.branch
    where = f"`/{call.cmd.name}` acts on an open ingestion PR or PR into `{trunk}`, whose tiers Sluice runs"
    pull = await _pull_on(call, ctx=ctx, where=where, remedy="comment it on the PR")
    if pull.base.ref != trunk and not pull.on_branch_of(call.fork.repo, (BRANCH_PREFIX,)):
        base = pull.base.ref[:60].replace("`", "'")
        raise CommandRefused(f"{where}; #{on.number} is into `{base}`", f"comment it on a PR into `{trunk}`")
    if not pull.is_open:
        raise CommandRefused(f"{where}; #{on.number} is {pull.state}", "nothing to do on it")
    if (
        refused := not_run_locally(ctx, call.fork.repo, pull.head.repo_name, pull=f"#{on.number}")
    ) is not None:
        raise CommandRefused(*refused)
    return pull


async def _pull_on(call: Call, *, ctx: Context, where: str, remedy: str) -> Pull:
    """The PR the command was commented on; refused on an issue, saying `where` the command works."""
    on = call.cmd.on
    if not on.is_pull:
        raise CommandRefused(f"{where}; #{on.number} is an issue", remedy)
    return await ctx.forge(call.fork.installation_id, call.fork.repo).get_pull(on.number)


async def gate_of(call: Call, *, ctx: Context) -> Gatekeeper:
    """The fork's gate with trunk's config; refused while `.github/sluice.yml` is broken."""
    keeper = await gatekeeping.gatekeeper(ctx, call.fork)
    if keeper is None:
        raise CommandRefused(
            f"`.github/sluice.yml` on {call.fork.branch} is invalid (its `sluice/config` check says why)",
            "fix the config first",
        )
    return keeper


def level_of(text: object, *, waivable: bool = False) -> Level:
    """`l1`, `L2`, `sluice/l3`… as a tier; L1 refused where it may never be waived."""
    name = str(text).lower().removeprefix("sluice/")
    level = next((lv for lv in Level if lv.value == name), None)
    if level is None:
        shown = str(text)[:20].replace("`", "'")
        raise CommandRefused(f"`{shown}` is not a tier", "name l1, l2 or l3")
    if waivable and level is Level.L1:
        raise CommandRefused("L1 is never waived: the fork must build and pass its smoke tests", "fix L1")
    return level


async def teams_of(keeper: Gatekeeper, teams: set[str], login: str) -> list[str]:
    """The teams among `teams` that GitHub says `login` is an active member of."""
    return [team for team in sorted(teams) if await keeper.forge.in_team(team, login)]


async def refuse_unless_it_starts(
    call: Call, pull: Pull, want: Want, *, config: SluiceConfig, again: str, ctx: Context
) -> None:
    """Refused, saying why and what to do (`again`: the command to comment later), when the tiers job would
    start nothing for `want` on the PR's head now: a tier below has not passed, or the tier still runs."""
    subject = subject_of(pull, fork=call.fork.repo)
    runs = await ctx.db(ctx.tier_runs.for_pull, subject.fork, subject.pull)
    blocked = why_not(subject, runs, config, now=ctx.clock(), want=want)
    if blocked is not None:
        raise CommandRefused(blocked.reason, blocked.remedy(again))
