"""Showing an update on a check run of Sluice's: in place, or on a new run where GitHub would not take it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.core.webhooks import CheckRun
from bot.ports import CheckRunWriter


def reopens(shown: CheckRun, body: Mapping[str, Any]) -> bool:
    """Whether `body` takes the completed run `shown` back to queued or in progress, which GitHub never does
    (the run would keep its old conclusion): it goes on a new run, as an Actions re-run does, and the
    completed one keeps its result."""
    status = body.get("status")
    return shown.completed and status is not None and status != "completed"


async def show(
    forge: CheckRunWriter, sha: str, name: str, bodies: Sequence[Mapping[str, Any]], *, shown: CheckRun | None
) -> int:
    """Send `bodies` (the first carries the status, the rest more annotations) to the check run `name` on
    `sha`, whose latest run is `shown` (None: there is none yet); the id of the run that shows them."""
    first, *rest = bodies
    if shown is None or reopens(shown, first):
        check_id = await forge.new_check_run(sha, name, first)
    else:
        check_id = shown.id
        await forge.update_check_run(check_id, first)
    for body in rest:
        await forge.update_check_run(check_id, body)
    return check_id
