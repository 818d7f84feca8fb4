"""`pull_request_review`: a code owner's approval (or its withdrawal) opens or closes an ingestion's gate."""

from __future__ import annotations

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.webhooks import PullRequestReviewEvent
from bot.ports import Job
from handlers import gatekeeping

router = Router()


@router.register("pull_request_review", action="submitted")
@router.register("pull_request_review", action="edited")
@router.register("pull_request_review", action="dismissed")
async def on_review(event: PullRequestReviewEvent, *, ctx: Context, job: Job) -> None:
    await gatekeeping.reevaluate(ctx, event.repository.full_name, event.pull_request.number)
