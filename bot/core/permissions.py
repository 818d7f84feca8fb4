"""Who may run a command: GitHub's repository roles in order, and code ownership of an area of the tree."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from bot.core.codeowners import CodeOwners
from bot.core.config import SluiceConfig
from bot.core.gate import owners_of


class Permission(enum.Enum):
    """What a command requires. The roles are GitHub's (anyone < read < triage < write < maintain <
    admin); CODE_OWNER is no role: the commenter must own the files the command is about."""

    ANYONE = "anyone"
    READ = "read"
    TRIAGE = "triage"
    WRITE = "write"
    MAINTAIN = "maintain"
    ADMIN = "admin"
    CODE_OWNER = "code owner"

    @property
    def rank(self) -> int:
        return LADDER.index(self) if self in LADDER else len(LADDER)

    def allows(self, role: Permission) -> bool:
        """Whether someone with `role` on the repository meets this requirement (CODE_OWNER: never by
        role alone; the command checks ownership of its area)."""
        return self is not Permission.CODE_OWNER and role.rank >= self.rank

    @property
    def described(self) -> str:
        return {
            Permission.ANYONE: "anyone",
            Permission.CODE_OWNER: "a code owner of the files it is about, with write access",
        }.get(self, f"{self.value} access to the repository")


# The collaborator-permission API's legacy `permission` that grants write access (maintain reads as write):
# what a tier button press, a tick in the backlog issue and an approval the gate counts require.
WRITE_ACCESS = frozenset({"admin", "write"})

LADDER = (
    Permission.ANYONE,
    Permission.READ,
    Permission.TRIAGE,
    Permission.WRITE,
    Permission.MAINTAIN,
    Permission.ADMIN,
)


def role_of(role_name: object, permission: object) -> Permission:
    """The collaborator-permission answer as a role: `role_name` (GitHub's fine-grained name, which
    tells maintain and triage apart), else the legacy `permission`; anything else grants nothing."""
    for value in (role_name, permission):
        if isinstance(value, str) and value in {p.value for p in LADDER} - {"anyone"}:
            return Permission(value)
    return Permission.ANYONE


@dataclass(frozen=True)
class Ownership:
    """Who owns each path of an area, by CODEOWNERS and by the config's component owners (as the gate reads
    them: `gate.owners_of`)."""

    owners: dict[str, tuple[str, ...]]  # path -> `@login` / `@org/team` entries

    @property
    def teams(self) -> set[str]:
        """The `@org/team` owners named: the handler asks GitHub whether the commenter is in them."""
        return {o.lower() for names in self.owners.values() for o in names if "/" in o}

    def refusal(self, login: str, *, member_of: Iterable[str] = ()) -> str | None:
        """Why `login` (a member of the teams `member_of`) may not act for the area, or None: they must own
        every path that has an owner, and at least one path must have one (a path nobody owns gives nobody
        a say)."""
        owned = {path: names for path, names in self.owners.items() if names}
        if not owned:
            return "no code owner is named for any file it touches (CODEOWNERS or a component's owners)"
        mine = {"@" + login.lower(), *(t.lower() for t in member_of)}
        missing = sorted(p for p, names in owned.items() if not mine & {n.lower() for n in names})
        if missing:
            # the owners in code: named, not pinged (a refusal anyone with write access can cause)
            shown = ", ".join(f"`{p}` (`{' '.join(owned[p])}`)" for p in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            return f"@{login} does not own {shown}{more}"
        return None


def ownership(paths: Iterable[str], *, codeowners: CodeOwners, config: SluiceConfig) -> Ownership:
    """Each path's owners: its CODEOWNERS owners plus the owners of the config component it falls in."""
    return Ownership({path: owners_of(path, codeowners, config) for path in paths})
