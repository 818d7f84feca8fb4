"""Events Sluice records now and acts on in later work: reviews, check runs and suites, comments."""

from __future__ import annotations

import logging

from gidgethub.routing import Router

from bot.app.context import Context
from bot.ports import Job

RECORDED = ("issue_comment", "issues", "check_suite")  # workflow_run: handlers.workflow_run
router = Router()
log = logging.getLogger("sluice.recorded")


async def record(event: object, *, ctx: Context, job: Job) -> None:
    log.info("delivery %s (%s on %s) recorded; no action yet", job.delivery_id, job.kind, job.key)


for kind in RECORDED:  # every action of each: the delivery and its job are kept, to act on later
    router.add(record, kind)
