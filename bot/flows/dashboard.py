"""Publishing the dashboard issue: the fork's one issue, edited in place, written only when it changes."""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from bot.core.dashboard import LABEL, MARKER, TITLE
from bot.ports import Forge

log = logging.getLogger("sluice.dashboard")
SUPERSEDED = "Sluice keeps one dashboard per fork: this one is superseded by #{number}."


class Published(enum.StrEnum):
    CREATED = "created"
    EDITED = "edited"
    UNCHANGED = "unchanged"  # the body was already this: nothing written
    REOPENED = "reopened"


def _dashboards(issues: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Sluice's dashboard issues among `issues` (label and marker), oldest first."""
    found = [i for i in issues if MARKER in (i.get("body") or "")]
    return sorted(found, key=lambda issue: int(issue["number"]))


async def publish(forge: Forge, body: str) -> tuple[Published, int]:
    """Show `body` in the fork's dashboard issue: edit the open one, else reopen the one a person closed
    (the same issue, its link and history kept), else create it. Never a second one."""
    open_now = _dashboards(await forge.open_issues(label=LABEL))
    if open_now:
        keep, *extra = open_now
        for issue in extra:  # from before Sluice kept one: point them at the one kept
            await forge.close_issue(int(issue["number"]), comment=SUPERSEDED.format(number=keep["number"]))
        number = int(keep["number"])
        if (keep.get("body") or "") == body and keep.get("title") == TITLE:
            return Published.UNCHANGED, number
        await forge.edit_issue(number, title=TITLE, body=body)
        return Published.EDITED, number
    closed = _dashboards(await forge.closed_issues(label=LABEL))
    if closed:
        number = int(closed[0]["number"])
        await forge.reopen_issue(number, title=TITLE, body=body)
        log.info("%s: the dashboard #%d was closed; reopened it", forge.repo, number)
        return Published.REOPENED, number
    number = await forge.create_issue(title=TITLE, body=body, labels=[LABEL])
    log.info("%s: opened the dashboard #%d", forge.repo, number)
    return Published.CREATED, number
