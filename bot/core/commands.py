"""Slash commands: a comment's first line `/name args` parsed strictly, and the replies that list them."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from bot.core.webhooks import GitHubId, RepoName

# `/name` at the very start of the comment, then arguments on that line: printable, no control characters.
COMMAND_LINE = re.compile(
    r"/(?P<name>[A-Za-z][A-Za-z0-9-]{0,31})(?:[ \t]+(?P<rest>[^\x00-\x1f\x7f]{0,500}))?"
)
HELP_NAME = "help"


class Conversation(BaseModel):
    """The issue or pull request a comment was made on, and the installation Sluice answers it through."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repo: RepoName
    number: GitHubId
    is_pull: bool
    installation_id: GitHubId


class SlashCommand(BaseModel):
    """`/name args` from the first line of a person's comment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")
    args: tuple[str, ...] = ()
    actor: str  # the commenter's login
    on: Conversation
    comment_id: GitHubId

    @property
    def rest(self) -> str:
        """The arguments as one string (a reason, say), spaces between them."""
        return " ".join(self.args)


def parse(body: str | None, *, actor: str, on: Conversation, comment_id: int) -> SlashCommand | None:
    """The command on the comment's first line, or None when that line is not exactly `/name [args]`."""
    first = (body or "").split("\n", 1)[0].rstrip("\r \t")
    found = COMMAND_LINE.fullmatch(first)
    if found is None:
        return None
    args = tuple((found["rest"] or "").split())
    return SlashCommand(name=found["name"].lower(), args=args, actor=actor, on=on, comment_id=comment_id)


def reply_marker(cmd: SlashCommand) -> str:
    """Marks Sluice's one reply to a command comment, so a retried job edits it rather than posting again."""
    return f"<!-- sluice:reply:{cmd.comment_id} -->"


def help_reply(helps: Iterable[str]) -> str:
    """`/help`'s answer: one line per registered command, as each command's HELP says it."""
    lines = "\n".join(f"- {line}" for line in helps)
    return f"Sluice understands these commands, each on the first line of a comment:\n\n{lines}\n"


def unknown_reply(cmd: SlashCommand) -> str:
    return f"Sluice has no `/{cmd.name}` command. Comment `/{HELP_NAME}` for the commands it understands.\n"
