"""Events Sluice records now and acts on in later work (slash commands, reviews, check and workflow runs)."""

from __future__ import annotations

import logging

from bot.app.context import Context
from bot.db.jobs import Job

log = logging.getLogger("sluice.recorded")


async def handle(ctx: Context, job: Job) -> None:
    log.info("delivery %s (%s on %s) recorded; no action yet", job.delivery_id, job.kind, job.key)
