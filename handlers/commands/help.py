"""`/help`: reply with every registered command's HELP line and who may run it."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.command_args import Usage
from bot.core.commands import HELP_NAME, help_reply
from bot.core.permissions import Permission
from handlers import commands
from handlers.commands.call import Call, Outcome

NAME = HELP_NAME
WHO = Permission.ANYONE
USAGE = Usage(NAME)
HELP = "`/help` — list the commands Sluice understands"


async def handle(call: Call, *, ctx: Context) -> Outcome:
    listed = sorted(commands.COMMANDS.values(), key=lambda command: command.NAME)
    body = help_reply((command.HELP, command.WHO.described) for command in listed)
    return Outcome("answered /help", reply=body)
