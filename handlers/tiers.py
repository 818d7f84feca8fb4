"""Tiered validation's jobs: bring a PR's tiers forward (`tiers`), run a tier here (`tier-local`), and the
events that ask for it: a PR opened or pushed, a check run's Re-run or Run L3 button."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from pathlib import Path

from gidgethub.routing import Router

from bot.app.context import Context
from bot.app.worker import Rejected
from bot.core import tier_checks
from bot.core.bisect_pr import candidate_branch
from bot.core.config import CONFIG_PATH, ConfigError, SluiceConfig
from bot.core.errors import BadInput
from bot.core.permissions import WRITE_ACCESS
from bot.core.tier_checks import RERUN, RUN_L3
from bot.core.tiers import (
    LEVELS,
    TRUNK_PULL,
    Level,
    NotNow,
    Obstacle,
    RunState,
    Subject,
    TierRun,
    Verdict,
    Want,
    failed_levels,
    tier_config,
    why_not,
)
from bot.core.webhooks import CheckRunEvent, CheckSuiteEvent, Pull, PullRequestEvent
from bot.flows.bisection import time_out_probes
from bot.flows.local_tier import run_local
from bot.flows.tiers import (
    ActionsBackend,
    Tiering,
    advance,
    complete,
    show,
    subject_of,
    time_out,
    time_out_stalled,
)
from bot.github.forge import ForkGitHub
from bot.ports import Fork, Job, TierBackend
from handlers import requests
from handlers.requests import LocalTierRequest, TiersRequest, TierTimeoutsRequest

router = Router()
log = logging.getLogger("sluice.tiers")


class LocalBackend:
    """The `local` backend: each tier run becomes a `tier-local` job on this machine's workers."""

    def __init__(self, ctx: Context, fork: str) -> None:
        self.ctx, self.fork = ctx, fork

    async def start(
        self, subject: Subject, run: TierRun, *, workflow: str, earlier: dt.datetime | None = None
    ) -> int | None:
        assert run.id is not None  # again after a failure: the job is queued once (enqueue_once)
        await requests.local_tier(self.ctx, self.fork, run.id)
        return None


async def tiering(ctx: Context, fork: Fork) -> Tiering:
    """The fork's tier settings (its `.github/sluice.yml` on trunk) and where its tiers run."""
    forge = ctx.forge(fork.installation_id, fork.repo)
    config = await repo_config(ctx, fork)
    backend: TierBackend = (
        LocalBackend(ctx, fork.repo)
        if ctx.settings.tier_backend == "local"
        else ActionsBackend(forge, trunk=fork.branch, clock=ctx.clock)
    )

    async def after(run: TierRun) -> None:  # a probe's result, a real failure or an L3 a bisection may want
        if run.bisection is not None or run.verdict is Verdict.FAILED or await regressed_l3(ctx, run):
            await requests.bisect(ctx, fork.repo, run.id or 0)

    return Tiering(forge, ctx.tier_runs, ctx.db, backend, config, ctx.clock, after=after)


async def regressed_l3(ctx: Context, run: TierRun) -> bool:
    """An L3 run that passed its tests, and whose comparison (kept with its ending) found a critical kernel
    regressed beyond the noise: it may call for a performance bisection. Another passed run asks for none."""
    passed = run.verdict in (Verdict.PASSED, Verdict.BROKEN_TRUNK)
    if run.level is not Level.L3 or not passed or run.id is None:
        return False
    return any(r.critical for r in await ctx.db(ctx.tier_runs.regressions, run.id))


async def repo_config(ctx: Context, fork: Fork) -> SluiceConfig:
    try:
        return await ctx.trunk_config(fork)
    except (ConfigError, BadInput) as exc:
        raise Rejected(
            f"{fork.repo}:{fork.branch}:{CONFIG_PATH} is invalid:\n{exc.message}",
            "fix it and push: the tiers of the ingestion PRs, and of the PRs whose head has no tier run, "
            "go on then; a tier run whose result came meanwhile is read from GitHub at its timeout",
        ) from exc


@router.register(requests.TIERS)
async def on_tiers(request: TiersRequest, *, ctx: Context, job: Job) -> None:
    fork = await ctx.db(ctx.registry.fork, request.fork)
    if fork is None:
        return
    t = await tiering(ctx, fork)
    want = Want(rerun=request.rerun, l3=request.l3, suite=request.suite)
    moved = await advance(t, request.pull, want=want, asked_on=request.head)
    if moved is not None and request.head is not None:  # pushed to between the ask and now: the PR says so
        what = "L3" if request.l3 else request.rerun.name if request.rerun else "the tiers"
        marker = f"<!-- sluice:moved-on:{request.head}:{what} -->"
        body = moved_on(None, what=what, where=f"on `{request.head[:10]}`", head=moved)
        forge = ctx.forge(fork.installation_id, fork.repo)
        await forge.upsert_comment(request.pull, marker=marker, body=f"{marker}\n{body}")
    await time_out_probes(t, request.pull)  # a bisection's stalled probes, as advance does the PR's own


@router.register(requests.TIER_TIMEOUTS)
async def on_tier_timeouts(request: TierTimeoutsRequest, *, ctx: Context, job: Job) -> None:
    """The periodic sweep, for one fork: its runs past their tier's timeout are timed out."""
    fork = await ctx.db(ctx.registry.fork, request.fork)
    if fork is None:
        return
    # trunk's own runs are trunk watch's to time out (handlers.trunk_watch): they have no PR to bring forward
    waiting = [r for r in await ctx.db(ctx.tier_runs.waiting) if r.fork == fork.repo and r.pull != TRUNK_PULL]
    if waiting:
        await time_out_stalled(await tiering(ctx, fork), waiting)


@router.register(requests.TIER_LOCAL)
async def on_local_tier(request: LocalTierRequest, *, ctx: Context, job: Job) -> None:
    fork = await ctx.db(ctx.registry.fork, request.fork)
    runs = ctx.tier_runs
    run = await ctx.db(runs.get, request.run)
    if fork is None or run is None or run.state is not RunState.DISPATCHED or run.pull == TRUNK_PULL:
        return  # a trunk run is handlers.trunk_watch's
    t = await tiering(ctx, fork)
    pull = await t.forge.get_pull(run.pull)
    auth = await ctx.git_auth(fork.installation_id)
    mirror = ctx.mirror(fork.repo)
    ref = f"refs/pull/{run.pull}/head"
    if run.bisection is not None and run.probe is not None:  # a probe: its candidate branch
        ref = f"refs/heads/{candidate_branch(run.ingestion, run.bisection, run.probe)}"
    await asyncio.to_thread(mirror.fetch_ref, ctx.clone_url(fork.repo), ref, auth=auth)
    timeout_s = tier_config(t.config, run.level).timeout_minutes * 60
    baseline = pull.base.sha
    finished = await asyncio.to_thread(
        run_local, Path(mirror.path), run, config=t.config, baseline_sha=baseline, timeout_s=timeout_s
    )
    if finished is None:
        await time_out(t, run)
        await advance(t, run.pull)
        return
    assert run.id is not None
    await complete(t, run.id, finished)


@router.register("pull_request", action="opened")
@router.register("pull_request", action="synchronize")
@router.register("pull_request", action="reopened")
@router.register("pull_request", action="edited")
async def on_pull_request(event: PullRequestEvent, *, ctx: Context, job: Job) -> None:
    """L1 on every ingestion PR and fork PR against fork trunk, on each new head, and on a PR retargeted to
    fork trunk (`edited`, its base changed; a title or body edit asks for nothing)."""
    if event.text_edit:
        return
    fork = await ctx.db(ctx.registry.fork, event.repository.full_name)
    if fork is None or event.pull_request.base.ref != fork.branch:
        return
    head_repo = event.pull_request.head.repo_name
    if (refused := not_run_locally(ctx, fork.repo, head_repo, pull="this PR")) is not None:
        log.warning(
            "%s#%d: from %s; the local backend runs only the fork's own branches",
            fork.repo,
            event.pull_request.number,
            head_repo or "a deleted repository",
        )
        why, fix = refused
        output = tier_checks.not_run_here(
            Level.L1, short="PR from outside the fork", reason=f"{why}. To run it: {fix}"
        )
        await show(await tiering(ctx, fork), event.pull_request.head.sha, Level.L1, output)
        return
    await requests.tiers(ctx, fork.repo, event.pull_request.number)


def not_run_locally(ctx: Context, fork: str, head_repo: str | None, *, pull: str) -> tuple[str, str] | None:
    """Why the local backend runs no tier of `pull` (its head in `head_repo`), and what to do; None when it
    does. It runs a head on the bot's own machine: only the fork's own branches, never code from another
    repository (the GitHub backend runs those on GitHub's runners)."""
    if ctx.settings.tier_backend != "local" or head_repo == fork:
        return None
    return (
        "Sluice's local backend runs tiers on its own machine, so only for the fork's own branches; "
        f"{pull}'s head is in {head_repo or 'a deleted repository'}",
        "push it to a branch of the fork, or deploy with the GitHub backend (`SLUICE_TIER_BACKEND=github`), "
        "which runs it on GitHub's runners",
    )


@router.register("check_run", action="requested_action")
async def on_requested_action(event: CheckRunEvent, *, ctx: Context, job: Job) -> None:
    """A person with write access pressed Re-run (or Run L3, or a PR from outside the fork's Run L2) on a
    tier's check run: that tier is dispatched."""
    wanted = event.requested_action.identifier if event.requested_action else None
    level = next((lv for lv in LEVELS if lv.check.value == event.check_run.name), None)
    if level is not None and wanted in (RERUN, RUN_L3):
        await _asked(ctx, event, level, l3=wanted == RUN_L3)


@router.register("check_run", action="rerequested")
async def on_rerequested(event: CheckRunEvent, *, ctx: Context, job: Job) -> None:
    """GitHub's own Re-run on a tier's check run: the tier runs again, as its Re-run button has it (on
    `sluice/gate`: handlers.check_run)."""
    level = next((lv for lv in LEVELS if lv.check.value == event.check_run.name), None)
    if level is not None:
        await _asked(ctx, event, level, l3=False)


@router.register("check_suite", action="rerequested")
async def on_suite_rerequested(event: CheckSuiteEvent, *, ctx: Context, job: Job) -> None:
    """GitHub's "Re-run all checks" on Sluice's suite: every tier that failed or timed out on the head runs
    again, as `/retry` has it (the tiers above a failed one were never run: they follow when it passes); with
    none, the PR says how to run a passed tier again."""
    fork = await ctx.db(ctx.registry.fork, event.repository.full_name)
    if fork is None:
        return
    head = event.check_suite.head_sha
    pull = await ctx.db(ctx.tier_runs.pull_for_head, fork.repo, head)
    forge = ctx.forge(fork.installation_id, fork.repo)
    sender = event.sender.login if event.sender is not None else None
    marker = f"<!-- sluice:refused-suite:{event.check_suite.id} -->"
    asked = ("the failed tiers", '"Re-run all checks"')
    if pull is None or not await _may_press(forge, fork, pull, sender, asked, marker=marker):
        return
    if await _pull_on(forge, pull, head, sender=sender, asked=asked, marker=marker) is None:
        return
    checks = await forge.check_runs(head)
    failed = failed_levels(checks)
    for level in failed:
        await requests.tiers(ctx, fork.repo, pull, rerun=level, head=head)
    if not failed:
        body = (
            f'@{sender}: no tier failed on `{head[:10]}`, so "Re-run all checks" ran nothing. To run a '
            "passed tier again, press Re-run on its check run.\n"
        )
        await forge.upsert_comment(pull, marker=marker, body=f"{marker}\n{body}")


async def _asked(ctx: Context, event: CheckRunEvent, level: Level, *, l3: bool) -> None:
    """A tier asked for again from its check run: dispatched when the person may (write access, as GitHub's
    collaborator permission says); anyone else's press starts nothing (what runs on the fork's
    self-hosted runners is a maintainer's decision), and the PR says so."""
    fork = await ctx.db(ctx.registry.fork, event.repository.full_name)
    if fork is None:
        return
    sender = event.sender.login if event.sender is not None else None
    forge = ctx.forge(fork.installation_id, fork.repo)
    pull = await ctx.db(ctx.tier_runs.pull_for_head, fork.repo, event.check_run.head_sha)
    what = "L3" if l3 else level.name
    marker = f"<!-- sluice:refused-press:{event.check_run.id} -->"
    asked = (what, f"the `{event.check_run.name}` check run")
    if not await _may_press(forge, fork, pull, sender, asked, marker=marker):
        return
    if pull is None:
        log.info(
            "%s: %s asked for on %s, which no PR Sluice validates has",
            fork.repo,
            what,
            event.check_run.head_sha,
        )
        return
    head = event.check_run.head_sha
    if (read := await _pull_on(forge, pull, head, sender=sender, asked=asked, marker=marker)) is None:
        return
    want = Want(l3=True) if l3 else Want(rerun=level)
    t = await tiering(ctx, fork)
    subject = subject_of(read, fork=fork.repo)
    runs = await ctx.db(ctx.tier_runs.for_pull, fork.repo, pull)
    blocked = why_not(subject, runs, t.config, now=ctx.clock(), want=want)
    if blocked is not None:  # it would start nothing now: the PR says why, rather than nothing happening
        marker = f"<!-- sluice:not-now:{event.check_run.id} -->"
        body = not_now(sender or "someone", blocked, what=what, where=asked[1])
        await forge.upsert_comment(pull, marker=marker, body=f"{marker}\n{body}")
        return
    if l3:
        await requests.tiers(ctx, fork.repo, pull, l3=True, head=head)
    else:
        await requests.tiers(ctx, fork.repo, pull, rerun=level, head=head)


async def _pull_on(
    forge: ForkGitHub, pull: int, head: str, *, sender: str | None, asked: tuple[str, str], marker: str
) -> Pull | None:
    """PR `pull` while `head`, where a tier was asked for, is still its head; else None, and the PR says so
    (in the press's one comment): a person who read one head never starts a later push on the fork's
    runners."""
    found = await forge.get_pull(pull)
    if found.head.sha == head:
        return found
    what, where, now = *asked, found.head.sha
    log.warning("%s #%d: %s asked for on %s; the head is now %s", forge.repo, pull, what, head, now)
    body = moved_on(sender, what=what, where=f"from {where} of `{head[:10]}`", head=now)
    await forge.upsert_comment(pull, marker=marker, body=f"{marker}\n{body}")
    return None


def moved_on(sender: str | None, *, what: str, where: str, head: str) -> str:
    """The PR's answer to a tier asked for on a head that is no longer the PR's (`head` is)."""
    who = f"@{sender}: " if sender else ""
    return (
        f"{who}Sluice did not run {what} (asked for {where}): the PR's head is now `{head[:10]}`, pushed "
        "since, and a tier starts only on the head it was asked for.\n\n"
        "To fix: read the new head's changes, then ask again on its own check run.\n"
    )


def not_now(sender: str, blocked: NotNow, *, what: str, where: str) -> str:
    """The PR's answer to a tier asked for from its check run that cannot start on the head now."""
    below = Level.of_number(blocked.wanted.number - 1).name if blocked.wanted is not Level.L1 else ""
    if blocked.obstacle is Obstacle.RUNNING:
        fix = "press it again once it ends"
    elif blocked.obstacle is Obstacle.FAILED:
        fix = f"re-run {blocked.level.name} or push a fix, then press it again once {below} passes"
    else:
        fix = f"press it again once {below} passes"
    said = f"@{sender}: Sluice did not run {what} (asked for from {where}): {blocked.reason}."
    return f"{said}\n\nTo fix: {fix}.\n"


async def _may_press(
    forge: ForkGitHub,
    fork: Fork,
    pull: int | None,
    sender: str | None,
    asked: tuple[str, str],
    *,
    marker: str,
) -> bool:
    """Whether `sender` has write access; if not, the PR is told (`asked`: what, and where it was asked
    for) in one comment per check run or suite, edited for each refused press, so pressing again adds none."""
    access = await forge.permission_level(sender) if sender is not None else "none"
    if access in WRITE_ACCESS:
        return True
    what, where = asked
    log.warning("%s: %s asked for by @%s, who lacks write access", fork.repo, what, sender)
    if pull is not None and sender is not None:
        body = refused_press(sender, access, repo=fork.repo, what=what, where=where)
        await forge.upsert_comment(pull, marker=marker, body=f"{marker}\n{body}")
    return False


def refused_press(sender: str, access: str, *, repo: str, what: str, where: str) -> str:
    """The PR's answer to a tier asked for from a check run (or suite) by someone without write access."""
    return (
        f"@{sender}: Sluice did not run {what} (asked for from {where}): @{sender} has {access} access to "
        f"{repo}, and starting a tier on the fork's runners needs write access.\n\n"
        "To fix: ask someone with write access to press it.\n"
    )
