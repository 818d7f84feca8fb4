"""`/help`: reply with every registered command's HELP line."""

from __future__ import annotations

from bot.app.context import Context
from bot.core.commands import HELP_NAME, SlashCommand, help_reply
from handlers import commands

NAME = HELP_NAME
HELP = "`/help` — list the commands Sluice understands"


async def handle(cmd: SlashCommand, *, ctx: Context) -> None:
    listed = sorted(commands.COMMANDS.values(), key=lambda command: command.NAME)
    await commands.reply(cmd, help_reply(command.HELP for command in listed), ctx=ctx)
