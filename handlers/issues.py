"""`issues` events: a person ticked backlog boxes in the fork's dashboard issue: retry those commits."""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Sequence

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core.dashboard import BACKLOG_LINE, LABEL, is_dashboard, newly_ticked, ticks
from bot.core.models import Disposition
from bot.core.permissions import WRITE_ACCESS
from bot.core.webhooks import IssuesEvent
from bot.github.forge import ForkGitHub
from bot.ports import Job
from handlers import requests

router = Router()
log = logging.getLogger("sluice.issues")
LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")  # GitHub's logins: none closes a `-->`
REFUSED_TICK = "<!-- sluice:refused-tick:{login} -->"  # one answer per person, edited at each refused tick


@router.register("issues", action="edited")
async def on_edited(event: IssuesEvent, *, ctx: Context, job: Job) -> None:
    sender, issue = event.sender, event.issue
    if sender.login == ctx.bot_login or sender.type == "Bot":
        return  # Sluice's own edits (each dashboard update) and other bots' never retry anything
    if (
        not is_dashboard(issue.body, issue.label_names)
        or issue.author != ctx.bot_login
        or event.body_before is None
    ):
        return
    ticked = newly_ticked(event.body_before, issue.text)
    repo = event.repository.full_name
    fork = await ctx.db(ctx.registry.fork, repo) if ticked else None
    if fork is None:
        return
    forge = ctx.forge(fork.installation_id, repo)
    permission = await forge.permission_level(sender.login)
    if permission not in WRITE_ACCESS:
        await refuse_ticks(forge, issue.number, ticked, login=sender.login, access=permission)
        return
    await ctx.db(undefer, ctx, repo, ticked, by=sender.login)
    await requests.ingest(ctx, repo, reason=f"@{sender.login} ticked {len(ticked)} backlog commit(s)")


async def refuse_ticks(
    forge: ForkGitHub, number: int, ticked: Sequence[str], *, login: str, access: str
) -> None:
    """Ticks by someone without write access retry nothing: the boxes are unticked again, and the dashboard
    says why in one comment per person, edited at each refused tick (ticking again adds no comment)."""
    log.info(
        "%s#%d: @%s (%s) ticked backlog boxes; retrying needs write access", forge.repo, number, login, access
    )
    restored = await untick(forge, number, ticked)
    if LOGIN.fullmatch(login) is None:  # not GitHub's: it goes into the marker's HTML comment only if it is
        log.warning("%s#%d: the tick's sender %a is no GitHub login; not answered", forge.repo, number, login)
        return
    marker = REFUSED_TICK.format(login=login)
    body = refused_tick(login, access, repo=forge.repo, shas=ticked, restored=restored)
    await forge.upsert_comment(number, marker=marker, body=f"{marker}\n{body}")


async def untick(forge: ForkGitHub, number: int, shas: Collection[str]) -> bool:
    """Untick the boxes of `shas` in the dashboard as it reads now (a run may have redrawn it since the
    event), writing only when one is still ticked; False when the dashboard is not open to edit.

    Jobs of one fork run one at a time, so no dashboard update of Sluice's can interleave; a person's edit
    in the moment between the read and the write loses only its boxes' looks, not its event."""
    dashboard = next((i for i in await forge.open_issues(label=LABEL) if i.number == number), None)
    if dashboard is None:
        return False
    body = dashboard.text
    if any(ticks(body).get(sha) for sha in shas):
        await forge.edit_issue(number, title=dashboard.title, body=unticked(body, shas))
    return True


def unticked(body: str, shas: Collection[str]) -> str:
    """`body` with the backlog boxes of `shas` unticked (its line ends made LF, as Sluice writes them)."""

    def box(line: re.Match[str]) -> str:
        if line["sha"] not in shas:
            return line[0]
        at = line.start("tick") - line.start()
        return f"{line[0][:at]} {line[0][at + 1 :]}"

    return BACKLOG_LINE.sub(box, body.replace("\r\n", "\n"))


def refused_tick(login: str, access: str, *, repo: str, shas: Sequence[str], restored: bool) -> str:
    """The dashboard's answer to backlog boxes ticked by someone without write access: who, why, what now."""
    commits = ", ".join(f"`{sha[:10]}`" for sha in shas)
    box = "box" if len(shas) == 1 else "boxes"
    shown = f"The {box} is unticked again." if restored else f"The {box} stays ticked until the next run."
    return (
        f"@{login}: Sluice did not retry {commits} (ticked in the backlog): @{login} has {access} access to "
        f"{repo}, and retrying a backlog commit needs write access. {shown}\n\n"
        "To fix: ask someone with write access (write, maintain or admin) to tick it.\n"
    )


def undefer(ctx: Context, repo: str, shas: Sequence[str], *, by: str) -> list[str]:
    """Make the deferred ones among `shas` pending again (as `sluice defer --undo` does); which they were."""
    held = ctx.store.dispositions(repo)
    deferred = [sha for sha in shas if sha in held and held[sha].disposition == Disposition.DEFERRED]
    now = ctx.clock()
    for sha in deferred:
        reason = "retried from the dashboard"
        ctx.store.set_disposition(repo, sha, Disposition.PENDING, reason=reason, approver=by, at=now)
    return deferred
