"""What a command's `handle` gets (the checked call) and gives back (its outcome)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bot.core.command_args import Arguments, CommandRefused
from bot.core.commands import SlashCommand
from bot.core.permissions import Ownership, Permission
from bot.ports import Fork

ACCEPTED, QUEUED = "+1", "eyes"  # reactions: done now / work queued that reports on its own


@dataclass
class Call:
    """A command whose commenter passed the role check and whose arguments parsed."""

    cmd: SlashCommand
    args: Arguments
    fork: Fork
    role: Permission
    owner_checked: bool = False

    @property
    def actor(self) -> str:
        return self.cmd.actor

    def require_owner(self, ownership: Ownership, *, what: str, member_of: Iterable[str] = ()) -> None:
        """Refuse unless the commenter (in the teams `member_of`) owns `what`'s area, every owned path."""
        self.owner_checked = True
        refusal = ownership.refusal(self.actor, member_of=member_of)
        if refusal is not None:
            raise CommandRefused(
                f"`/{self.cmd.name}` needs a code owner of {what}: {refusal}",
                "ask one of the owners named, or add the owner to CODEOWNERS or the component's owners",
            )


@dataclass(frozen=True)
class Outcome:
    """What a command did: `done` for the audit log, `reply` (if any) posted as Sluice's answer."""

    done: str
    reply: str | None = None
    reaction: str = ACCEPTED
