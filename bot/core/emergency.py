"""Emergency picks (`/cherry-pick`) as data: the branch, trailers, PR title and body, and the reply."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.ingestion import Links
from bot.core.markdown import plain
from bot.core.models import CommitInfo, CommitReport, PickStatus
from bot.core.webhooks import Pull

EMERGENCY_PREFIX = "sluice/emergency/"
KIND_TRAILER = ("Sluice-Kind", "emergency")  # recognised as an emergency pick: never moves the ingestion tip


def emergency_id(branch: str) -> str:
    """The ingestion id of an emergency pick's branch (`sluice/emergency/<sha10>` -> `emergency-<sha10>`)."""
    return "emergency-" + branch.removeprefix(EMERGENCY_PREFIX)


def is_emergency_pull(pull: Pull, *, fork: str) -> bool:
    """Whether a PR is an emergency pick's: its head is a `sluice/emergency/` branch of the fork itself."""
    return pull.on_branch_of(fork, EMERGENCY_PREFIX)


@dataclass(frozen=True)
class EmergencyPick:
    """One upstream commit picked onto fork trunk on its own, at someone's request."""

    commit: CommitInfo
    pull: int | None  # the upstream PR it was named by, if it was
    requested_by: str
    reason: str | None

    @property
    def id(self) -> str:
        return emergency_id(self.branch)

    @property
    def branch(self) -> str:
        return EMERGENCY_PREFIX + self.commit.sha[:10]

    @property
    def trailers(self) -> tuple[tuple[str, str], ...]:
        return (KIND_TRAILER, ("Sluice-Ingestion", self.id))

    @property
    def named(self) -> str:
        return (  # `#&#8203;N`: upstream's PR number, never a link to the fork's own #N
            f"upstream PR #&#8203;{self.pull} (`{self.commit.sha[:10]}`)"
            if self.pull
            else f"`{self.commit.sha[:10]}`"
        )


def title(pick: EmergencyPick) -> str:
    return f"[sluice] emergency pick: {pick.commit.subject[:180]} ({pick.commit.sha[:7]})"


def pr_body(pick: EmergencyPick, report: CommitReport, *, links: Links) -> str:
    how = "applies cleanly" if report.status is PickStatus.CLEAN else f"applies ({report.status.value})"
    lines = [
        f"An emergency pick of {links.commit(pick.commit.sha)} onto `{links.fork_branch}`, on its own, "
        f"requested by @{pick.requested_by} with `/cherry-pick`.",
        "",
        f"- Upstream: {pick.named}: {plain(pick.commit.subject)}",
        f"- Reason: {plain(pick.reason) if pick.reason else 'none given'}",
        f"- Pick: {how}; the commit carries `Sluice-Kind: emergency` and `Sluice-Ingestion: {pick.id}`",
        "- Before it merges: **L1 must pass and a code owner must approve** (label `sluice:emergency`).",
        "- It never moves the ingestion tip: Days Behind Upstream stays as it is; regular ingestion "
        "brings the upstream commits before it later and recognises this one as already picked.",
        "",
        "### How to revert",
        "```sh",
        f"git log --format=%H --grep='^Sluice-Ingestion: {pick.id}$' {links.fork_branch} \\",
        "  | xargs git revert --no-edit",
        "```",
    ]
    return "\n".join(lines) + "\n"


def opened_reply(pick: EmergencyPick, number: int) -> str:
    return (
        f"Opened #{number}: the emergency pick of {pick.named} onto fork trunk, as its own ingestion PR "
        "(`Sluice-Kind: emergency`). L1 is queued; merging needs a code owner's approval. It does not move "
        "the ingestion tip, so Days Behind Upstream stays as it is.\n"
    )


def needs_human(pick: EmergencyPick, report: CommitReport) -> str:
    """Why the pick was not opened: the files that conflict, for the refusal."""
    files = ", ".join(f"`{f.path}` ({f.cls})" for f in report.files if not f.resolved) or "unknown files"
    return f"{pick.named} does not apply to fork trunk without a human: {files}"
