"""`ingest` jobs: sync a fork's mirror, plan, pick each unit onto the one before, push, open or update PRs."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass

from bot.app.context import Context
from bot.app.worker import Rejected
from bot.core.config import ConfigError, SluiceConfig
from bot.core.ingestion import (
    BRANCH_PREFIX,
    CLASSIFICATION_MARKER,
    MAX_OPEN_UNITS,
    TIER_TITLES,
    Label,
    Links,
    PickedUnit,
    Tier,
    classification_comment,
    labels,
    pr_body,
    title,
    units_of,
    upstream_web_url,
)
from bot.core.models import Plan
from bot.db.jobs import Job
from bot.db.registry import Fork, IngestionRecord
from bot.flows.engine import CONFIG_PATH, load_repo_config
from bot.flows.pick import Picker, pick_in_order
from bot.flows.planning import build_plan
from bot.git.mirror import BranchUpdate, SyncResult
from bot.git.repo import GitRepo
from bot.github.forge import ForkGitHub
from handlers import upstream

KIND = "ingest"
MANAGED_LABELS = frozenset(label.value for label in Label)
MAX_BODY_CHARS = 60_000  # GitHub refuses PR bodies and comments over 65,536 characters
log = logging.getLogger("sluice.ingest")


async def request(ctx: Context, fork: str, *, reason: str) -> None:
    """Ask for an ingestion run of `fork`; a burst of requests coalesces into one queued job."""
    payload = {"fork": fork, "reason": reason}
    if await ctx.db(ctx.queue.enqueue_once, KIND, payload, key=fork, now=ctx.clock()) is not None:
        log.info("ingestion of %s requested: %s", fork, reason)


@dataclass(frozen=True)
class Built:
    """Everything decided locally, before anything is written to GitHub."""

    config: SluiceConfig
    plan: Plan
    sync: SyncResult
    units: tuple[PickedUnit, ...]
    updates: tuple[BranchUpdate, ...]
    upstream_parents: dict[str, str]  # unit id -> the parent of its first upstream commit
    human: tuple[str, ...] = ()  # units whose branch a person pushed to: left alone, kept open


async def handle(ctx: Context, job: Job) -> None:
    fork = await ctx.db(ctx.registry.fork, str(job.payload["fork"]))
    if fork is None:
        log.info(
            "ingest job %d: %s is no longer a registered fork; nothing to do", job.id, job.payload["fork"]
        )
        return
    auth, upstream_auth = await upstream.fork_auth(ctx, fork)
    built = await asyncio.to_thread(_build, ctx, fork, auth, upstream_auth)
    auth = await ctx.git_auth(fork.installation_id)  # planning a large fork can outlast a token
    await asyncio.to_thread(ctx.mirror(fork.repo).push, list(built.updates), auth=auth)
    forge = ctx.forge(fork.installation_id, fork.repo)
    links = Links(
        upstream_web=upstream_web_url(fork.upstream_url, web_base=ctx.web_url),
        fork_clone_url=ctx.clone_url(fork.repo),
        fork_branch=fork.branch,
    )
    for picked in built.units:
        record = await _publish(forge, picked, built=built, links=links, fork=fork)
        await ctx.db(ctx.registry.save_ingestion, record, at=ctx.clock())
    await _close_stale(ctx, forge, fork, keep={p.unit.id for p in built.units} | set(built.human))
    log.info(
        "ingested %s: %d units, %d pushed, %d pending upstream commits",
        fork.repo,
        len(built.units),
        len(built.updates),
        built.plan.status.backlog_commits,
    )


def _build(ctx: Context, fork: Fork, auth: dict[str, str], upstream_auth: dict[str, str] | None) -> Built:
    mirror, sync = ctx.sync_fork(fork, auth=auth, upstream_auth=upstream_auth)
    remote = mirror.fetch_branches(BRANCH_PREFIX, auth=auth)
    repo = GitRepo(mirror.path)
    config = fork_config(ctx, repo, sync, fork)
    plan = build_plan(
        repo,
        config,
        fork=sync.fork_ref,
        upstream=sync.upstream_ref,
        store=ctx.store,
        progress=log.debug,
        clock=ctx.clock,
    )
    infos = {c.sha: c for c in repo.commits(sync.upstream_head, "--not", sync.fork_head, first_parent=True)}
    # Resolutions people made before are reused; the repo config's resolver command never runs here.
    picker = Picker(
        repo, config, recall=lambda keys: ctx.store.resolutions(fork.repo, keys), use_resolver=False
    )
    units: list[PickedUnit] = []
    onto, base = sync.fork_head, fork.branch
    recorded = {r.id: r.head for r in ctx.registry.ingestions(fork.repo)}
    human: list[str] = []
    for unit in units_of(plan)[:MAX_OPEN_UNITS]:
        theirs = remote.get(unit.branch)
        if theirs is not None and not _pushed_by_sluice(repo, theirs, unit.id, recorded.get(unit.id)):
            log.info(
                "%s: a person pushed to %s; Sluice leaves it and what builds on it", fork.repo, unit.branch
            )
            human.append(unit.id)
            break
        head, reports = pick_in_order(
            picker,
            onto,
            [infos[c.sha] for c in unit.commits],
            strategy=config.strategy,
            trailers=[("Sluice-Ingestion", unit.id)],
        )
        units.append(PickedUnit(unit, base_branch=base, head=head, reports=reports))
        if head is None or units[-1].blocked is not None:
            break  # later units build on this one: they wait for the human
        onto, base = head, unit.branch
    updates = tuple(
        BranchUpdate(p.unit.branch, p.head, remote.get(p.unit.branch))
        for p in units
        if p.head is not None and remote.get(p.unit.branch) != p.head
    )
    parents = {
        p.unit.id: infos[p.unit.commits[0].sha].parents[0]
        for p in units
        if infos[p.unit.commits[0].sha].parents
    }
    return Built(config, plan, sync, tuple(units), updates, parents, tuple(human))


def _pushed_by_sluice(repo: GitRepo, head: str, unit_id: str, recorded: str | None) -> bool:
    """Whether the branch head is Sluice's work, which it may replace (a person's resolution it may not)."""
    if head == recorded:
        return True
    message = repo.run("log", "-1", "--format=%B", head)
    return f"Sluice-Ingestion: {unit_id}" in message and "(cherry picked from commit" not in message


def fork_config(ctx: Context, repo: GitRepo, sync: SyncResult, fork: Fork) -> SluiceConfig:
    """The fork's `.github/sluice.yml` at trunk; a broken one rejects the job with its problems."""
    try:
        trusted = ctx.trusted_url_prefixes
        config = load_repo_config(repo, sync.fork_head, sync.fork_ref, trusted_url_prefixes=trusted)
    except ConfigError as exc:
        raise Rejected(
            f"{fork.repo}: {CONFIG_PATH} on {fork.branch} is invalid:\n{exc}",
            f"fix it (check with `sluice config check {CONFIG_PATH}`) and push; Sluice re-plans on that push",
        ) from exc
    # The store keys the fork's plans, chains and resolutions by its GitHub name.
    return config.model_copy(update={"fork": config.fork.model_copy(update={"repo": fork.repo})})


async def _publish(
    forge: ForkGitHub, picked: PickedUnit, *, built: Built, links: Links, fork: Fork
) -> IngestionRecord:
    unit = picked.unit
    body = _fit(pr_body(picked, links=links, upstream_parent=built.upstream_parents.get(unit.id)))
    marker = f"<!-- sluice:ingestion:{unit.id} -->"
    if picked.head is None:  # the first commit needs a human: there is nothing to open a PR with yet
        number = await forge.upsert_issue(title=title(unit), body=body, labels=labels(picked), marker=marker)
        state = "blocked"
    else:
        number = await _upsert_pull(forge, picked, body=body)
        await forge.set_labels(number, labels(picked), managed=MANAGED_LABELS)
        states = await forge.ensure_check_runs(picked.head, {t.value: TIER_TITLES[t] for t in Tier})
        tiers = {Tier(name): state for name, state in states.items()}
        comment = classification_comment(picked, config=built.config, links=links, tiers=tiers)
        await forge.upsert_comment(number, marker=CLASSIFICATION_MARKER, body=_fit(comment))
        issue = await forge.find_issue(label=Label.NEEDS_HUMAN.value, marker=marker)
        if issue is not None:
            await forge.close_issue(issue["number"], comment=f"Continued in #{number}.")
        state = "open"
    blocked = picked.blocked
    return IngestionRecord(
        fork=fork.repo,
        id=unit.id,
        kind=unit.kind.value,
        state=state,
        pr_number=number,
        head=picked.head,
        upstream_first=unit.commits[0].sha,
        upstream_last=unit.commits[-1].sha,
        commits=len(unit.commits),
        needs_human=blocked.upstream if blocked is not None else None,
    )


async def _upsert_pull(forge: ForkGitHub, picked: PickedUnit, *, body: str) -> int:
    unit = picked.unit
    pull = await forge.open_pull_for(unit.branch)
    if pull is None:
        pull = await forge.create_pull(
            title=title(unit), body=body, head=unit.branch, base=picked.base_branch
        )
        log.info("%s: opened #%s for %s", forge.repo, pull["number"], unit.id)
    else:
        await forge.update_pull(pull, title=title(unit), body=body, base=picked.base_branch)
    return int(pull["number"])


async def _close_stale(ctx: Context, forge: ForkGitHub, fork: Fork, *, keep: set[str]) -> None:
    """Close ingestion PRs the plan no longer has (upstream or the fork's trunk changed under them)."""
    records = {r.id: r for r in await ctx.db(ctx.registry.ingestions, fork.repo, state="open")}
    for pull in await forge.open_pulls():
        branch = pull["head"]["ref"]
        if (
            not branch.startswith(BRANCH_PREFIX)
            or (pull["head"].get("repo") or {}).get("full_name") != fork.repo
        ):
            continue
        unit_id = branch.removeprefix(BRANCH_PREFIX)
        if unit_id in keep:
            continue
        note = (
            f"Sluice closes this PR: the current plan no longer has `{unit_id}` (its commits were ingested, "
            "re-planned into other units, or wait behind a unit that needs a human)."
        )
        await forge.close_pull(pull["number"], comment=note)
        if unit_id in records:
            closed = dataclasses.replace(records[unit_id], state="closed")
            await ctx.db(ctx.registry.save_ingestion, closed, at=ctx.clock())


def _fit(text: str) -> str:
    if len(text) <= MAX_BODY_CHARS:
        return text
    return text[:MAX_BODY_CHARS] + "\n\n… (cut: GitHub limits a description to 65,536 characters)\n"
