"""`/l3 [suite]`: run L3 on the PR's head now (an ingestion PR, an emergency pick or a fork PR: any PR Sluice
validates), whatever `tiers.l3_policy` says. A suite named must be one of the config's L3 suites, and then
only it runs (the dispatch's `selection` holds its index)."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import CommandRefused, Kind, Positional, Usage
from bot.core.permissions import Permission
from bot.core.tiers import Want
from handlers import requests
from handlers.commands.call import QUEUED, Call, Outcome
from handlers.commands.on_pull import gate_of, refuse_unless_it_starts, validated_pull

NAME = "l3"
WHO = Permission.WRITE
USAGE = Usage(NAME, (Positional("suite", Kind.TEXT, optional=True),))
HELP = f"`{USAGE.line}` — run L3 on this PR's head now (only the L3 suite named, when one is)"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    pull = await validated_pull(call, ctx=ctx)
    number, head = pull.number, pull.head.sha
    keeper = await gate_of(call, ctx=ctx)
    suites = [suite.name for suite in keeper.config.tiers.l3.suites]
    named = call.args.get("suite")
    if named is not None and named not in suites:
        shown = str(named)[:40].replace("`", "'")
        raise CommandRefused(f"`{shown}` is not an L3 suite", f"name one of {', '.join(suites)}")
    want = Want(l3=True, suite=None if named is None else str(named))
    again = f"/{NAME}" + (f" {want.suite}" if want.suite else "")
    await refuse_unless_it_starts(call, pull, want, config=keeper.config, again=again, ctx=ctx)
    await requests.tiers(ctx, call.fork.repo, number, l3=True, suite=want.suite)
    done = f"L3 requested on #{number}'s head `{head[:10]}` by @{call.actor}"
    running = f"its suite {named} only" if named is not None else f"its suites ({', '.join(suites)})"
    reply = f"{done}; it runs {running} and its check run reports.\n"
    return Outcome(done, reply=reply, reaction=QUEUED)
