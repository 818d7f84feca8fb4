"""Publishing the dashboard issue: the fork's one issue, edited in place, written only when it changes."""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence

from bot.core.dashboard import LABEL, MARKER, TITLE
from bot.core.webhooks import FullIssue
from bot.ports import Forge

log = logging.getLogger("sluice.dashboard")
SUPERSEDED = "Sluice keeps one dashboard per fork: this one is superseded by #{number}."


class Published(enum.StrEnum):
    CREATED = "created"
    EDITED = "edited"
    UNCHANGED = "unchanged"  # the body was already this: nothing written
    REOPENED = "reopened"


def _dashboards(issues: Sequence[FullIssue]) -> list[FullIssue]:
    """Sluice's dashboard issues among `issues` (label and marker), oldest first."""
    found = [i for i in issues if MARKER in i.text]
    return sorted(found, key=lambda issue: issue.number)


async def publish(forge: Forge, body: str, *, remembered: int | None = None) -> tuple[Published, int]:
    """Show `body` in the fork's dashboard issue: edit the open one, else reopen the one a person closed
    (the same issue, its link and history kept), else create it. Never a second one: the issue is found by
    its label, and else as `remembered` (the number this fork's dashboard had last), whose label a person
    took off; that issue gets its label back."""
    open_now = _dashboards(await forge.open_issues(label=LABEL))
    if open_now:
        keep, *extra = open_now
        for issue in extra:  # from before Sluice kept one: point them at the one kept
            await forge.close_issue(issue.number, comment=SUPERSEDED.format(number=keep.number))
        return await _edited(forge, keep, body)
    closed = _dashboards(await forge.closed_issues(label=LABEL))
    if not closed and remembered is not None:
        closed = await _unlabelled(forge, remembered)
        if closed and closed[0].state == "open":
            return await _edited(forge, closed[0], body)
    if closed:
        number = closed[0].number
        await forge.reopen_issue(number, title=TITLE, body=body)
        log.info("%s: the dashboard #%d was closed; reopened it", forge.repo, number)
        return Published.REOPENED, number
    number = await forge.create_issue(title=TITLE, body=body, labels=[LABEL])
    log.info("%s: opened the dashboard #%d", forge.repo, number)
    return Published.CREATED, number


async def _edited(forge: Forge, issue: FullIssue, body: str) -> tuple[Published, int]:
    if issue.text == body and issue.title == TITLE:
        return Published.UNCHANGED, issue.number
    await forge.edit_issue(issue.number, title=TITLE, body=body)
    return Published.EDITED, issue.number


async def _unlabelled(forge: Forge, number: int) -> list[FullIssue]:
    """The remembered dashboard `number`, its label put back, when it is still the App's and still the
    dashboard (its marker kept); else nothing (deleted, transferred, or its text replaced)."""
    issue = await forge.own_issue(number)
    if issue is None or not _dashboards([issue]):
        return []
    await forge.add_labels(number, [LABEL])
    log.info("%s: the dashboard #%d had lost its %s label; put it back", forge.repo, number, LABEL)
    return [issue]
