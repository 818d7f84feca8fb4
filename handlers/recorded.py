"""Every delivery of the kinds whose other actions Sluice does not act on is still recorded as a job: a
comment that is not a command, an issue event, a check suite requested or completed."""

from __future__ import annotations

import logging

from gidgethub.routing import Router

from bot.app.context import Context
from bot.ports import Job

RECORDED = ("issue_comment", "issues", "check_suite")  # what they act on: their handlers' modules
router = Router()
log = logging.getLogger("sluice.recorded")


async def record(event: object, *, ctx: Context, job: Job) -> None:
    log.info("delivery %s (%s on %s) recorded", job.delivery_id, job.kind, job.key)


for kind in RECORDED:  # every action of each: the delivery and its job are kept
    router.add(record, kind)
