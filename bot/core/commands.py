"""Slash commands: a comment's first line `/name args` parsed strictly, and the replies that list them."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from bot.core.command_args import MAX_TEXT
from bot.core.ingestion import IngestionRecord
from bot.core.lag import LagPoint
from bot.core.markdown import plain
from bot.core.webhooks import GitHubId, RepoName

# An attempt at a command: `/name` at the very start of the comment, then the end of the line, a space of
# any kind or an invisible character. `/usr/bin/env is broken`, `/help.` or `/café` are prose, not attempts.
COMMAND_NAME = re.compile(r"/(?P<name>[A-Za-z][A-Za-z0-9-]{0,31})")
# Exactly a command: the name, then a space or tab before any arguments, and no control character but tabs.
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
# The longest first line read as a command: room for /waive's three text arguments at MAX_TEXT characters
# each, quoted, every character escaped (`\"`), and 100 for its name, flags and date (3,106 in all).
MAX_LINE = 3 * (2 + 2 * MAX_TEXT) + 100
EXCERPT = 40  # characters of a refused line quoted back in its refusal, escaped
HELP_NAME = "help"


class Conversation(BaseModel):
    """The issue or pull request a comment was made on, and the installation Sluice answers it through."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repo: RepoName
    number: GitHubId
    is_pull: bool
    installation_id: GitHubId


class LineProblem(BaseModel):
    """Why a first line that starts as a command is not exactly `/name [args]`, and what would be."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    message: str
    remedy: str


class SlashCommand(BaseModel):
    """`/name args` from the first line of a person's comment; `rest` is the text after the name, which
    each command's `Usage` parses strictly (see `parse_arguments`). A command with a `problem` is never run,
    only refused: its `rest` is then a short excerpt, escaped, for the refusal and the audit log."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")
    rest: str = ""
    actor: str  # the commenter's login
    on: Conversation
    comment_id: GitHubId
    problem: LineProblem | None = None

    @property
    def line(self) -> str:
        """The command as the person wrote it (name lower-cased), for the audit log and the replies."""
        return f"/{self.name} {self.rest}".rstrip()


def parse(body: str | None, *, actor: str, on: Conversation, comment_id: int) -> SlashCommand | None:
    """The command on the comment's first line; None when that line is no attempt at one (see
    COMMAND_NAME). An attempt that is not exactly `/name [args]` comes back with its `problem`."""
    first = (body or "").split("\n", 1)[0].rstrip("\r \t")
    found = COMMAND_NAME.match(first)
    if found is None or not _ends_name(first, found.end()):
        return None
    name, after = found["name"].lower(), first[found.end() :]
    problem = line_problem(first, name_end=found.end())
    if problem is not None:
        rest = _excerpt(after.lstrip(" \t"))
        return SlashCommand(name=name, rest=rest, actor=actor, on=on, comment_id=comment_id, problem=problem)
    return SlashCommand(name=name, rest=after.strip(" \t"), actor=actor, on=on, comment_id=comment_id)


def line_problem(line: str, *, name_end: int) -> LineProblem | None:
    """Why `line`, a `/name` ending at `name_end`, is not exactly `/name [args]`: too long, a character
    other than a space or tab right after the name, or a control character (a tab aside). None when exact."""
    if len(line) > MAX_LINE:
        return LineProblem(
            message=f"the command line is {len(line)} characters; at most {MAX_LINE}",
            remedy=f"shorten it: each quoted text may have up to {MAX_TEXT} characters",
        )
    args = len(line) - len(line[name_end:].lstrip(" \t"))  # where the arguments start
    if args == name_end < len(line):  # no space or tab between the name and what follows it
        odd = name_end
    elif (control := CONTROL.search(line, args)) is not None:
        odd = control.start()
    else:
        return None
    return LineProblem(
        message=f"the line holds {described(line[odd])} at column {odd + 1}",
        remedy="write it again with plain spaces and no control characters",
    )


def described(char: str) -> str:
    """A character named for a reply: `U+00A0 (no-break space)`."""
    return f"U+{ord(char):04X} ({unicodedata.name(char, 'a control character').lower()})"


def _ends_name(line: str, end: int) -> bool:
    """Whether the `/name` ending at `end` stands alone: the line ends, or a space or an invisible
    character follows (a letter, digit or punctuation makes it prose, or a path)."""
    if end == len(line):
        return True
    char = line[end]
    return char.isspace() or unicodedata.category(char) in ("Cc", "Cf")


def _excerpt(text: str) -> str:
    """The start of a line Sluice will not run, safe to quote: short, unprintable characters escaped, and
    no backtick to close a code span."""
    shown = "".join(ch if " " <= ch <= "~" else ascii(ch)[1:-1] for ch in text[:EXCERPT])
    return shown.replace("`", "'") + ("…" if len(text) > EXCERPT else "")


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
    lines += [f"- #{number} {plain(title)}" for number, title in emergency]
    return "\n".join(lines) + "\n"
