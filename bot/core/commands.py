"""Slash commands: a comment's first line `/name args` parsed strictly, and the replies that list them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from bot.core.ingestion import IngestionRecord
from bot.core.lag import LagPoint
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
    """`/name args` from the first line of a person's comment; `rest` is the text after the name, which
    each command's `Usage` parses strictly (see `parse_arguments`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")
    rest: str = ""
    actor: str  # the commenter's login
    on: Conversation
    comment_id: GitHubId

    @property
    def line(self) -> str:
        """The command as the person wrote it (name lower-cased), for the audit log and the replies."""
        return f"/{self.name} {self.rest}".rstrip()


def parse(body: str | None, *, actor: str, on: Conversation, comment_id: int) -> SlashCommand | None:
    """The command on the comment's first line, or None when that line is not exactly `/name [args]`."""
    first = (body or "").split("\n", 1)[0].rstrip("\r \t")
    found = COMMAND_LINE.fullmatch(first)
    if found is None:
        return None
    rest = (found["rest"] or "").strip(" \t")
    return SlashCommand(name=found["name"].lower(), rest=rest, actor=actor, on=on, comment_id=comment_id)


def reply_marker(cmd: SlashCommand) -> str:
    """Marks Sluice's one reply to a command comment, so a retried job edits it rather than posting again."""
    return f"<!-- sluice:reply:{cmd.comment_id} -->"


def help_reply(helps: Iterable[tuple[str, str]]) -> str:
    """`/help`'s answer: one line per registered command, its HELP and who may run it."""
    lines = "\n".join(f"- {line} (who: {who})" for line, who in helps)
    return f"Sluice understands these commands, each on the first line of a comment:\n\n{lines}\n"


def status_reply(
    repo: str,
    point: LagPoint | None,
    ingestions: Sequence[IngestionRecord],
    emergency: Sequence[tuple[int, str]],
) -> str:
    """`/status`'s answer: the newest lag point, then the ingestions and emergency picks still open."""
    lines = [f"## Where `{repo}` stands", ""]
    if point is None:
        lines.append("No ingestion run has finished yet, so there is no lag to show.")
    else:
        days = "n/a (nothing ingested yet)" if point.days_behind is None else f"{point.days_behind:.1f}"
        tip = f"`{point.ingestion_tip[:10]}`" if point.ingestion_tip else "none yet"
        lines += [
            f"- Days Behind Upstream: **{days}**",
            f"- Backlog Commits: {point.backlog_commits}; pending upstream commits: {point.pending_commits}",
            f"- Ingestion tip: {tip}; upstream head: `{point.upstream_head[:10]}`",
            f"- As of the ingestion run at {point.at:%Y-%m-%d %H:%M} UTC",
        ]
    lines += ["", f"Open ingestions: {len(ingestions)}"]
    for record in ingestions:
        where = f"#{record.pr_number}" if record.pr_number else "no PR yet"
        waits = f", needs a human at `{record.needs_human[:10]}`" if record.needs_human else ""
        lines.append(f"- `{record.id}` ({record.kind}, {record.commits} commits): {where}{waits}")
    lines += ["", f"Open emergency picks: {len(emergency)}"]
    lines += [f"- #{number} {title}" for number, title in emergency]
    return "\n".join(lines) + "\n"
