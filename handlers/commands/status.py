"""`/status`: where the fork stands — its newest lag point, open ingestions and emergency picks."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import Usage
from bot.core.commands import status_reply
from bot.core.emergency import is_emergency_pull
from bot.core.permissions import Permission
from handlers.commands.call import Call, Outcome

NAME = "status"
WHO = Permission.ANYONE
USAGE = Usage(NAME)
HELP = f"`{USAGE.line}` — where the fork stands: Days Behind Upstream, backlog, open ingestions"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    repo = call.fork.repo
    history = await ctx.db(ctx.lag_points.history, repo, limit=1)
    records = [
        r for state in ("open", "blocked") for r in await ctx.db(ctx.registry.ingestions, repo, state=state)
    ]
    pulls = await ctx.forge(call.fork.installation_id, repo).open_pulls()
    emergency = sorted((p.number, p.title) for p in pulls if is_emergency_pull(p, fork=repo))
    body = status_reply(repo, history[-1] if history else None, records, emergency)
    return Outcome("answered /status", reply=body)
