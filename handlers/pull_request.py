"""`pull_request` events on a fork: a sticky comment on how the change grows the patch stack."""

from __future__ import annotations

import asyncio
import logging

from gidgethub.routing import Router

from bot.app.context import Context
from bot.core import audit
from bot.core.audit import AuditState
from bot.core.emergency import EMERGENCY_PREFIX
from bot.core.ingestion import BRANCH_PREFIX
from bot.core.models import Disposition
from bot.core.webhooks import PullRequestEvent
from bot.flows import patch_stack
from bot.flows.engine import take_snapshot
from bot.ports import Fork, Job
from handlers import gatekeeping, ingest, requests, upstream

router = Router()
SLUICES = (BRANCH_PREFIX, EMERGENCY_PREFIX)  # Sluice's own branches, in the fork itself (not a contributor's)
log = logging.getLogger("sluice.pull_request")


@router.register("pull_request", action="opened")
@router.register("pull_request", action="synchronize")
@router.register("pull_request", action="reopened")
@router.register("pull_request", action="edited")
async def on_pull_request(event: PullRequestEvent, *, ctx: Context, job: Job) -> None:
    """A fork PR into fork trunk (opened, pushed to, reopened, or moved there): its patch-stack comment."""
    if event.text_edit:
        return
    fork = await ctx.db(ctx.registry.fork, event.repository.full_name)
    pull = event.pull_request
    if fork is None or pull.base.ref != fork.branch:
        return
    if pull.on_branch_of(fork.repo, SLUICES):
        return  # Sluice's own ingestion PRs and emergency picks carry upstream commits, not stack growth
    auth, upstream_auth = await upstream.fork_auth(ctx, fork)
    body = await asyncio.to_thread(_comment, ctx, fork, pull.number, auth, upstream_auth)
    forge = ctx.forge(fork.installation_id, fork.repo)
    await forge.upsert_comment(pull.number, marker=patch_stack.PATCH_STACK_MARKER, body=body)


@router.register("pull_request", action="synchronize")
@router.register("pull_request", action="ready_for_review")
@router.register("pull_request", action="edited")
async def on_ingestion_push(event: PullRequestEvent, *, ctx: Context, job: Job) -> None:
    """A new head on an ingestion PR (or an emergency pick): approvals of the old head stop counting, so its
    gate is judged anew; as it is when a draft is marked ready for review (Sluice merges no draft), and when
    the PR moved onto another base (a stacked PR GitHub retargets to fork trunk once the one below merged)."""
    if event.text_edit:
        return
    if event.pull_request.on_branch_of(event.repository.full_name, SLUICES):
        await gatekeeping.reevaluate(ctx, event.repository.full_name, event.pull_request.number)


@router.register("pull_request", action="closed")
async def on_ingestion_closed(event: PullRequestEvent, *, ctx: Context, job: Job) -> None:
    """An ingestion PR closed, merged or not: it leaves the open ingestions at once (`/status`, the status
    page, the `open_ingestions` figure), paused or not. Merged (by a person: Sluice's own merge has done
    this), it and an emergency pick get their rollback tag and closed audit record."""
    repo, pull = event.repository.full_name, event.pull_request
    if pull.on_branch_of(repo, BRANCH_PREFIX):
        ingestion = pull.head.ref.removeprefix(BRANCH_PREFIX)
        closed = await ctx.db(ctx.registry.close_pull, repo, ingestion, pull.number, at=ctx.clock())
        if closed:
            log.info(
                "%s #%d (%s) closed%s", repo, pull.number, pull.head.ref, " (merged)" if pull.merged else ""
            )
    if pull.merged and pull.on_branch_of(repo, SLUICES):
        await gatekeeping.merged(ctx, repo, pull.number)
    if not pull.merged and pull.on_branch_of(repo, SLUICES):
        await ctx.db(_audit_unmerged, ctx, repo, pull.number, pull.head.sha)
    if not pull.merged and pull.on_branch_of(repo, EMERGENCY_PREFIX):
        await _emergency_dropped(ctx, repo, pull.number, pull.head.ref)


def _audit_unmerged(ctx: Context, repo: str, number: int, head: str) -> None:
    """The audit record of a Sluice PR closed without a merge ends there (`unmerged`), not `open` forever."""
    record = ctx.gates.audit(repo, number)
    if record is not None and record.state is AuditState.OPEN:
        ctx.gates.save_audit(audit.unmerged(record, head=head, at=ctx.clock()), at=ctx.clock())
        log.info("%s #%d: audit record ended unmerged", repo, number)


async def _emergency_dropped(ctx: Context, repo: str, number: int, branch: str) -> None:
    """An emergency pick's PR closed unmerged: its commit is no longer on its way in that way, so it goes
    back to pending (the next plan bundles or chains it) and an ingestion run is asked for. Only the
    disposition this PR set: a later `/cherry-pick` of the same commit in another PR keeps its own."""
    prefix = branch.removeprefix(EMERGENCY_PREFIX)
    held = await ctx.db(ctx.store.dispositions, repo)
    dropped = [
        record.sha
        for record in held.values()
        if record.disposition is Disposition.EMERGENCY
        and record.sha.startswith(prefix)
        and (record.reason or "").endswith(f" in #{number}")
    ]
    for sha in dropped:
        reason = f"emergency pick #{number} closed unmerged"
        await ctx.db(
            ctx.store.set_disposition,
            repo,
            sha,
            Disposition.PENDING,
            reason=reason,
            approver=None,
            at=ctx.clock(),
        )
        log.info("%s: %s is pending again: %s", repo, sha[:10], reason)
    if dropped:
        await requests.ingest(ctx, repo, reason=f"emergency pick #{number} closed unmerged")


def _comment(
    ctx: Context, fork: Fork, number: int, auth: dict[str, str], upstream_auth: dict[str, str] | None
) -> str:
    mirror, sync = ctx.sync_fork(fork, auth=auth, upstream_auth=upstream_auth)
    head = mirror.fetch_ref(ctx.clone_url(fork.repo), f"refs/pull/{number}/head", auth=auth)
    repo = ctx.repository(mirror)
    config = ingest.fork_config(ctx, repo, sync, fork)
    snapshot = take_snapshot(repo, fork_ref=sync.fork_ref, upstream_ref=sync.upstream_ref, config=config)
    report = patch_stack.measure(
        repo,
        base=sync.fork_head,
        head=head,
        upstream_head=sync.upstream_head,
        config=config,
        now=ctx.clock(),
        stack_before=snapshot.status.patch_stack_commits,
    )
    return patch_stack.comment(report, upstream_name=fork.upstream_repo or fork.upstream_url)
