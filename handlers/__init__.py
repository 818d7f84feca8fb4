"""Job handlers: one module per webhook event or job kind; `HANDLERS` maps a job's kind to its handler."""

from __future__ import annotations

from bot.app.worker import Handler
from handlers import ingest, installation, pull_request, push, recorded, register

HANDLERS: dict[str, Handler] = {
    push.KIND: push.handle,
    pull_request.KIND: pull_request.handle,
    "installation": installation.installation,
    "installation_repositories": installation.installation_repositories,
    register.KIND: register.handle,
    ingest.KIND: ingest.handle,
    **{
        kind: recorded.handle
        for kind in ("issue_comment", "pull_request_review", "check_run", "check_suite", "workflow_run")
    },
}
