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


async def publish(forge: Forge, body: str) -> tuple[Published, int]:
    """Show `body` in the fork's dashboard issue: edit the open one, else reopen the one a person closed
    (the same issue, its link and history kept), else create it. Never a second one."""
    open_now = _dashboards(await forge.open_issues(label=LABEL))
    if open_now:
        keep, *extra = open_now
        for issue in extra:  # from before Sluice kept one: point them at the one kept
            await forge.close_issue(issue.number, comment=SUPERSEDED.format(number=keep.number))
        number = keep.number
        if keep.text == body and keep.title == TITLE:
            return Published.UNCHANGED, number
        await forge.edit_issue(number, title=TITLE, body=body)
        return Published.EDITED, number
    closed = _dashboards(await forge.closed_issues(label=LABEL))
    if closed:
        number = closed[0].number
        await forge.reopen_issue(number, title=TITLE, body=body)
        log.info("%s: the dashboard #%d was closed; reopened it", forge.repo, number)
        return Published.REOPENED, number
    number = await forge.create_issue(title=TITLE, body=body, labels=[LABEL])
    log.info("%s: opened the dashboard #%d", forge.repo, number)
    return Published.CREATED, number
