"""A refusal to read a fork's upstream, told on the fork's `sluice/config` check run and rejecting the job."""

from __future__ import annotations

from bot.app.context import Context
from bot.app.worker import Rejected
from bot.core.upstream_access import UpstreamRefused
from bot.ports import Fork

CONFIG_CHECK = "sluice/config"
REFUSED_TITLE = "Sluice may not read the upstream"


async def report_refused(
    ctx: Context, exc: UpstreamRefused, *, repo: str, installation_id: int, head: str
) -> None:
    summary = f"{exc.message}.\n\n**To fix:** {exc.remedy}.\n"
    forge = ctx.forge(installation_id, repo)
    await forge.report_check(head, CONFIG_CHECK, ok=False, title=REFUSED_TITLE, summary=summary)


async def fork_auth(ctx: Context, fork: Fork) -> tuple[dict[str, str], dict[str, str] | None]:
    """`ctx.fork_auth`, with a refusal reported on the fork's trunk and turned into a rejected job."""
    try:
        return await ctx.fork_auth(fork)
    except UpstreamRefused as exc:
        head = await ctx.forge(fork.installation_id, fork.repo).branch_head(fork.branch)
        await report_refused(ctx, exc, repo=fork.repo, installation_id=fork.installation_id, head=head)
        raise Rejected(exc.message, exc.remedy) from exc
