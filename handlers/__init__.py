"""Job handlers: one module per webhook event or internal job, each with a router; `ROUTES` joins them."""

from __future__ import annotations

from gidgethub.routing import Router

from bot.app.routing import Routes
from bot.core import webhooks
from handlers import (
    bisect,
    check_run,
    gatekeeping,
    ingest,
    installation,
    issue_comment,
    issues,
    pull_request,
    pull_request_review,
    push,
    recorded,
    register,
    requests,
    tiers,
    trunk_watch,
    workflow_run,
)

ROUTES = Routes(
    Router(
        push.router,
        pull_request.router,
        pull_request_review.router,
        check_run.router,
        installation.router,
        issue_comment.router,
        issues.router,
        recorded.router,
        register.router,
        ingest.router,
        tiers.router,
        trunk_watch.router,
        workflow_run.router,
        bisect.router,
        gatekeeping.router,
    ),
    payloads={**webhooks.MODELS, **requests.PAYLOADS},
)
