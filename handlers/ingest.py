"""`ingest` jobs: build the desired state (sync, plan, pick), observe the fork, reconcile, apply."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from gidgethub.routing import Router

from bot.app.context import Context
from bot.app.worker import Rejected
from bot.core import audit
from bot.core.config import ConfigError, SluiceConfig
from bot.core.dashboard import backlog_of
from bot.core.errors import ConfigRefused, redact
from bot.core.ingestion import (
    BRANCH_PREFIX,
    MAX_OPEN_UNITS,
    IngestionRecord,
    Links,
    Unit,
    units_of,
    upstream_web_url,
)
from bot.core.lag import lag_point
from bot.core.models import CommitInfo, Plan
from bot.core.reconcile import Desired, DesiredUnit, ObservedState, PushBranch, reconcile
from bot.flows.engine import CONFIG_PATH, load_repo_config
from bot.flows.ingest import Picking, Push, Record, apply, observe, pick_units
from bot.flows.pick import Picker
from bot.flows.planning import build_plan, model_problem
from bot.git.mirror import BranchUpdate, SyncResult
from bot.ports import FileReader, Fork, Job, Repository
from handlers import dashboard, requests, upstream
from handlers.dashboard import Shown
from handlers.requests import IngestRequest

KIND = "ingest"
log = logging.getLogger("sluice.ingest")


router = Router()  # requests.ingest() enqueues the jobs


@dataclass(frozen=True)
class Built:
    """Everything decided locally, before GitHub is asked anything: the plan, the units as the fork should
    show them, and what git and the registry say of the fork's ingestion branches."""

    plan: Plan
    desired: Desired
    seen: ObservedState
    picking: Picking
    config: SluiceConfig
    stream: tuple[CommitInfo, ...]  # upstream's first-parent history that fork trunk lacks, oldest first


class ModelUnusable(Rejected):
    """`risk.model` names no usable model in fork trunk's tree: every plan would fail on it."""

    def __init__(self, fork: Fork, exc: ConfigRefused, *, head: str) -> None:
        self.problem, self.head = model_problem(exc), head
        super().__init__(f"{fork.repo}: {self.problem}", "fix it and push; Sluice re-plans on that push")


@router.register(KIND)
async def handle(request: IngestRequest, *, ctx: Context, job: Job) -> None:
    fork = await ctx.db(ctx.registry.fork, request.fork)
    if fork is None:
        log.info("ingest job %d: %s is no longer a registered fork; nothing to do", job.id, request.fork)
        return
    paused = await ctx.db(ctx.gates.paused, fork.repo)
    auth, upstream_auth = await upstream.fork_auth(ctx, fork)
    forge = ctx.forge(fork.installation_id, fork.repo)
    try:
        built = await asyncio.to_thread(_build, ctx, fork, auth, upstream_auth, upto=request.upto)
    except ModelUnusable as exc:  # trunk lost the file since registration, or it went bad
        await upstream.report_invalid(forge, exc.head, exc.problem)
        raise
    if paused is not None:  # planned, not applied: the dashboard alone says so, and where the fork stands
        log.warning("%s: automatic ingestion is paused (%s); `/resume` lifts it", fork.repo, paused.reason)
        await ctx.db(_record_lag, ctx, fork.repo, built.plan)  # the lag keeps being measured while paused
        await dashboard.update(ctx, forge, _shown(ctx, fork, built))
        return
    observed = await observe(forge, built.desired, seen=built.seen)
    trunk = await forge.branch_head(fork.branch)
    if trunk != built.plan.status.fork_head:
        # A merge (or a push) moved fork trunk while this run planned: its plan may still hold a unit just
        # merged, whose PR it would open again. Plan again on the new trunk instead.
        log.info("%s: trunk moved to %s while planning; planning again", fork.repo, trunk[:10])
        await requests.ingest(ctx, fork.repo, reason=f"fork trunk moved to {trunk[:10]} while planning")
        return
    actions = reconcile(built.desired, observed)
    await apply(actions, forge=forge, push=_pusher(ctx, fork), record=_recorder(ctx))
    await ctx.db(_record_lag, ctx, fork.repo, built.plan)
    await ctx.db(_save_audits, ctx, fork.repo, built)
    for record in await ctx.db(ctx.registry.ingestions, fork.repo, state="open"):
        if record.pr_number is not None:  # level-triggered: a resync also times out stalled tier runs
            await requests.tiers(ctx, fork.repo, record.pr_number)
    await dashboard.update(ctx, forge, _shown(ctx, fork, built))
    log.info(
        "ingested %s: %d units, %d pushed, %d actions, %d pending upstream commits, %d backlog commits",
        fork.repo,
        len(built.desired.units),
        sum(isinstance(a, PushBranch) for a in actions),
        len(actions),
        built.plan.status.pending_commits,
        built.plan.status.backlog_commits,
    )


def _build(
    ctx: Context,
    fork: Fork,
    auth: dict[str, str],
    upstream_auth: dict[str, str] | None,
    *,
    upto: str | None = None,
) -> Built:
    """The git and planning work (blocking: run it in a thread)."""
    mirror, sync = ctx.sync_fork(fork, auth=auth, upstream_auth=upstream_auth)
    branches = mirror.fetch_branches(ctx.clone_url(fork.repo), BRANCH_PREFIX, auth=auth)
    repo = ctx.repository(mirror)
    config = fork_config(ctx, repo, sync, fork)
    try:
        plan = build_plan(
            repo,
            config,
            fork=sync.fork_ref,
            upstream=sync.upstream_ref,
            store=ctx.store,
            progress=log.debug,
            clock=ctx.clock,
        )
    except ConfigRefused as exc:  # `risk.model`: said on GitHub by the handler, not only in the log
        raise ModelUnusable(fork, exc, head=sync.fork_head) from exc
    records = {r.id: r for r in ctx.registry.ingestions(fork.repo)}
    stream = repo.commits(sync.upstream_head, "--not", sync.fork_head, first_parent=True)
    opened = {i for i, r in records.items() if r.state != "closed"}
    chosen = _units_upto(repo, units_of(plan), upto=upto, fork_head=sync.fork_head, opened=opened)
    picking = _pick(
        ctx,
        repo,
        chosen,
        config=config,
        sync=sync,
        fork=fork,
        branches=branches,
        records=records,
        stream=stream,
    )
    links, parents = links_of(ctx, fork), picking.upstream_parents
    units = tuple(
        DesiredUnit.of(p, config=config, links=links, upstream_parent=parents.get(p.unit.id))
        for p in picking.units
    )
    seen = ObservedState(branches=branches, pushed_by_people=picking.pushed_by_people, records=records)
    return Built(plan, Desired(fork.repo, units), seen, picking, config, tuple(stream))


def _save_audits(ctx: Context, repo: str, built: Built) -> None:
    """Open (or refresh) the audit record of every unit that has a PR: its commits' outcomes and conflicts,
    and the patch stack it was picked onto."""
    gates, picking, status = ctx.gates, built.picking, built.plan.status
    records = {r.id: r for r in ctx.registry.ingestions(repo, state="open")}
    for picked in picking.units:
        record = records.get(picked.unit.id)
        if record is None or record.pr_number is None or picked.head is None:
            continue
        opened = audit.opened(
            picked,
            fork=repo,
            pr_number=record.pr_number,
            upstream_base=picking.upstream_parents.get(picked.unit.id),
            fork_base=status.fork_head,
            patch_stack_commits=status.patch_stack_commits,
        )
        gates.save_audit(opened, at=ctx.clock())


def _units_upto(
    repo: Repository, units: list[Unit], *, upto: str | None, fork_head: str, opened: set[str]
) -> list[Unit]:
    """The units, in order, up to the first with a commit after `upto` on the upstream stream that has no
    ingestion open yet (each unit builds on the one before, so none after it opens either; open ones stay
    rather than being closed and opened again). The plan itself stays whole, and so does the lag."""
    if upto is None:
        return units
    allowed = {c.sha for c in repo.commits(upto, "--not", fork_head, first_parent=True)}
    kept: list[Unit] = []
    for unit in units:
        if unit.id not in opened and any(c.sha not in allowed for c in unit.commits):
            break
        kept.append(unit)
    return kept


def _pick(
    ctx: Context,
    repo: Repository,
    units: list[Unit],
    *,
    config: SluiceConfig,
    sync: SyncResult,
    fork: Fork,
    branches: dict[str, str],
    records: dict[str, IngestionRecord],
    stream: Sequence[CommitInfo],
) -> Picking:
    commits = {c.sha: c for c in stream}
    # Resolutions people made before are reused; the repo config's resolver command never runs here.
    picker = Picker(
        repo, config, recall=lambda keys: ctx.store.resolutions(fork.repo, keys), use_resolver=False
    )
    picking = pick_units(
        picker,
        units[:MAX_OPEN_UNITS],
        commits=commits,
        onto=sync.fork_head,
        base=fork.branch,
        strategy=config.strategy,
        branches=branches,
        records=records,
    )
    for branch in picking.pushed_by_people:
        log.info("%s: a person pushed to %s; Sluice leaves it and what builds on it", fork.repo, branch)
    return picking


def _record_lag(ctx: Context, repo: str, plan: Plan) -> None:
    """One point of the fork's lag history per ingestion run, for `/metrics` and the status page."""
    open_now = sum(len(ctx.registry.ingestions(repo, state=state)) for state in ("open", "blocked"))
    point = lag_point(repo, plan.status, open_ingestions=open_now, at=ctx.clock())
    ctx.lag_history.record(point)


def _shown(ctx: Context, fork: Fork, built: Built) -> Shown:
    return Shown(built.plan, built.config, backlog_of(built.stream, built.plan), links_of(ctx, fork))


def links_of(ctx: Context, fork: Fork) -> Links:
    """Where the fork's PRs and comments link upstream commits, and what their local commands fetch."""
    return Links(
        upstream_web=upstream_web_url(fork.upstream_url, web_base=ctx.web_url),
        fork_clone_url=ctx.clone_url(fork.repo),
        fork_branch=fork.branch,
        upstream_clone_url=redact(fork.upstream_url),  # the commit a person resolves is not on the fork
    )


def _pusher(ctx: Context, fork: Fork) -> Push:
    async def push(updates: Sequence[BranchUpdate]) -> None:
        auth = await ctx.git_auth(fork.installation_id)  # planning a large fork can outlast a token
        await asyncio.to_thread(ctx.mirror(fork.repo).push, updates, auth=auth)

    return push


def _recorder(ctx: Context) -> Record:
    async def record(saved: IngestionRecord) -> None:
        await ctx.db(ctx.registry.save_ingestion, saved, at=ctx.clock())

    return record


def fork_config(ctx: Context, repo: FileReader, sync: SyncResult, fork: Fork) -> SluiceConfig:
    """The fork's `.github/sluice.yml` at trunk; a broken one rejects the job with its problems."""
    try:
        trusted = ctx.trusted_url_prefixes
        config = load_repo_config(
            repo, sync.fork_head, sync.fork_ref, trusted_url_prefixes=trusted, machine_paths=False
        )
    except ConfigError as exc:
        raise Rejected(
            f"{fork.repo}: {CONFIG_PATH} on {fork.branch} is invalid:\n{exc.message}",
            f"fix it (check with `sluice config check {CONFIG_PATH}`) and push; Sluice re-plans on that push",
        ) from exc
    # The store keys the fork's plans, chains and resolutions by its GitHub name.
    return config.model_copy(update={"fork": config.fork.model_copy(update={"repo": fork.repo})})
