"""The slash-command registry: one module per command (`NAME`, `HELP`, `handle`), listed in `MODULES`."""

from __future__ import annotations

import logging
from typing import Protocol

from bot.app.context import Context
from bot.core.commands import SlashCommand, reply_marker, unknown_reply
from handlers.commands import help as help_command  # it reads COMMANDS only when it runs

log = logging.getLogger("sluice.commands")


class Command(Protocol):
    """What a command module provides (a module satisfies this protocol by its top-level names)."""

    NAME: str
    HELP: str  # one line: "`/name args` — what it does", shown by /help

    async def handle(self, cmd: SlashCommand, *, ctx: Context) -> None: ...


MODULES: tuple[Command, ...] = (help_command,)
COMMANDS: dict[str, Command] = {module.NAME: module for module in MODULES}


async def run(cmd: SlashCommand, *, ctx: Context) -> None:
    """Run the command `cmd` names; a name Sluice does not know gets a reply pointing to /help."""
    command = COMMANDS.get(cmd.name)
    if command is None:
        log.info("%s#%d: @%s asked for /%s, unknown", cmd.on.repo, cmd.on.number, cmd.actor, cmd.name)
        await reply(cmd, unknown_reply(cmd), ctx=ctx)
        return
    log.info("%s#%d: /%s from @%s", cmd.on.repo, cmd.on.number, cmd.name, cmd.actor)
    await command.handle(cmd, ctx=ctx)


async def reply(cmd: SlashCommand, body: str, *, ctx: Context) -> None:
    """Answer the command's comment with one comment of Sluice's, edited in place if the job runs again."""
    forge = ctx.forge(cmd.on.installation_id, cmd.on.repo)
    marker = reply_marker(cmd)
    await forge.upsert_comment(cmd.on.number, marker=marker, body=f"{marker}\n{body}")
