"""What stops a fork's ingestion at its upstream or its config, told on the fork's `sluice/config` check run:
a refusal to read the upstream (the job rejected), a followed branch that upstream no longer has, and a
config Sluice cannot use."""

from __future__ import annotations

import logging

from bot.app.context import Context
from bot.app.worker import Rejected
from bot.core.config import CONFIG_PATH
from bot.core.errors import redact
from bot.core.upstream_access import UpstreamRefused
from bot.github.forge import ForkGitHub
from bot.ports import Fork

CONFIG_CHECK = "sluice/config"
REFUSED_TITLE = "Sluice may not read the upstream"
INVALID_TITLE = f"{CONFIG_PATH} is invalid"
GONE_TITLE = "The upstream branch is gone"
log = logging.getLogger("sluice.upstream")


async def report_invalid(forge: ForkGitHub, head: str, problems: str) -> None:
    """The config at `head` cannot be used: `problems` (as `sluice config check` prints them) on its check."""
    why = "Sluice cannot use this file, so it does not keep this fork in sync until it is fixed"
    summary = f"{why}:\n\n```text\n{problems}\n```\n"
    await forge.report_check(head, CONFIG_CHECK, ok=False, title=INVALID_TITLE, summary=summary)


async def report_refused(
    ctx: Context, exc: UpstreamRefused, *, repo: str, installation_id: int, head: str
) -> None:
    summary = f"{exc.message}.\n\n**To fix:** {exc.remedy}.\n"
    forge = ctx.forge(installation_id, repo)
    await forge.report_check(head, CONFIG_CHECK, ok=False, title=REFUSED_TITLE, summary=summary)


async def report_gone(ctx: Context, fork: Fork, *, how: str) -> None:
    """Upstream no longer has the branch the fork follows (deleted or renamed): nothing is ingested until it
    is back or the configuration names another; the fork's trunk says so on its `sluice/config` check."""
    log.warning(
        "%s: upstream %s has no branch %s (%s)",
        fork.repo,
        redact(fork.upstream_url),
        fork.upstream_branch,
        how,
    )
    summary = (
        f"Upstream ({redact(fork.upstream_url)}) has no branch `{fork.upstream_branch}` any more ({how}): "
        "Sluice has nothing to ingest until it is back.\n\n"
        f"**To fix:** if upstream renamed it, set `upstream.branch` in `{CONFIG_PATH}` to its new name.\n"
    )
    forge = ctx.forge(fork.installation_id, fork.repo)
    head = await forge.branch_head(fork.branch)
    await forge.report_check(head, CONFIG_CHECK, ok=False, title=GONE_TITLE, summary=summary)


async def fork_auth(ctx: Context, fork: Fork) -> tuple[dict[str, str], dict[str, str] | None]:
    """`ctx.fork_auth`, with a refusal reported on the fork's trunk and turned into a rejected job."""
    try:
        return await ctx.fork_auth(fork)
    except UpstreamRefused as exc:
        head = await ctx.forge(fork.installation_id, fork.repo).branch_head(fork.branch)
        await report_refused(ctx, exc, repo=fork.repo, installation_id=fork.installation_id, head=head)
        raise Rejected(exc.message, exc.remedy) from exc
