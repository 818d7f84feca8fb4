"""`register` jobs: is an installed repository a fork Sluice keeps in sync? Its `.github/sluice.yml` says."""

from __future__ import annotations

import asyncio
import logging

from gidgethub.routing import Router

from bot.app.context import Context
from bot.app.worker import Rejected
from bot.core.config import ConfigError, SluiceConfig, parse_config_bytes
from bot.core.errors import ConfigRefused, redact
from bot.core.ingestion import BRANCH_PREFIX, owner_repo
from bot.core.tier_workflows import workflow_notes, workflow_paths
from bot.core.upstream_access import AccessKind, UpstreamAccess, UpstreamRefused
from bot.flows.engine import CONFIG_PATH
from bot.flows.planning import load_risk_model, model_problem
from bot.git.mirror import validate_url
from bot.github.forge import ForkGitHub
from bot.ports import FileReader, Fork, Job, Repository
from handlers import requests, upstream
from handlers.requests import RegisterRequest
from handlers.tiers import not_run_locally

router = Router()
CONFIG_CHECK = upstream.CONFIG_CHECK
log = logging.getLogger("sluice.register")


@router.register(requests.REGISTER)
async def handle(request: RegisterRequest, *, ctx: Context, job: Job) -> None:
    repo, installation_id = request.repo, request.installation_id
    if await ctx.db(ctx.registry.installation_of, repo) != installation_id:
        log.info("%s is no longer in installation %d; not registering it", repo, installation_id)
        return
    forge, reader = ctx.forge(installation_id, repo), _Reader(ctx, repo, installation_id)
    default_branch = await forge.default_branch()
    head, text = await reader.read(default_branch)
    if text is None:
        log.info("%s has no %s on %s: not a fork Sluice keeps in sync", repo, CONFIG_PATH, default_branch)
        await ctx.db(ctx.registry.unregister_fork, repo)
        return
    config = await _parsed(ctx, forge, head, text)
    if config.fork.branch != default_branch:  # trunk's file is the one the gate, tiers and ingestion read
        head, config = await _on_trunk(ctx, forge, reader, config.fork.branch, default_head=head)
    repository = await reader.opened()
    if "upstream" not in config.model_fields_set and config.downstreams:
        await _grants_only(ctx, forge, head, config)
        return
    await _risk_model(forge, repository, head, config)
    try:
        access = await ctx.upstream_access(
            repo, installation_id=installation_id, upstream_url=config.upstream.url
        )
    except UpstreamRefused as exc:
        await upstream.report_refused(ctx, exc, repo=repo, installation_id=installation_id, head=head)
        raise Rejected(exc.message, exc.remedy) from exc
    summary = _accepted(config, access) + await _tier_workflows(ctx, repository, head, config)
    await forge.report_check(head, CONFIG_CHECK, ok=True, title=f"{CONFIG_PATH} is valid", summary=summary)
    fork = Fork(
        repo=repo,
        installation_id=installation_id,
        branch=config.fork.branch,
        upstream_url=validate_url(config.upstream.url),
        upstream_branch=config.upstream.branch,
        upstream_repo=owner_repo(config.upstream.url, web_base=ctx.web_url),
        upstream_seen=None,
    )
    await ctx.db(ctx.registry.register_fork, fork, at=ctx.clock())
    log.info(
        "%s registered: trunk %s, upstream %s %s", repo, fork.branch, fork.upstream_url, fork.upstream_branch
    )
    await requests.ingest(ctx, repo, reason="registered")
    await _tiers_never_started(ctx, forge, fork)


async def _tiers_never_started(ctx: Context, forge: ForkGitHub, fork: Fork) -> None:
    """Bring forward the tiers of the open PRs into trunk with no tier run on their head: a PR opened (or
    pushed) while the config was broken got none, and would otherwise wait for its next push. Ingestion PRs
    are the ingestion run's to bring forward."""
    for pull in await forge.open_pulls():
        head, number = pull.head, pull.number
        if pull.base.ref != fork.branch or pull.on_branch_of(fork.repo, BRANCH_PREFIX):
            continue
        if not_run_locally(ctx, fork.repo, head.repo_name, pull=f"#{number}") is not None:
            continue  # its L1 check run said so when it was opened
        runs = await ctx.db(ctx.tier_runs.for_pull, fork.repo, number)
        if not any(run.head_sha == head.sha for run in runs):
            await requests.tiers(ctx, fork.repo, number)


async def _tier_workflows(ctx: Context, repo: FileReader, head: str, config: SluiceConfig) -> str:
    """With the GitHub backend the tiers run as the fork's workflows: the ones missing from `head`, or running
    elsewhere than the config says, as a section of the check's summary (empty when they agree)."""
    if ctx.settings.tier_backend != "github":
        return ""
    paths = workflow_paths(config).values()
    texts = {path: await asyncio.to_thread(repo.read_file, head, path) for path in paths}
    files = {path: None if text is None else text.decode("utf-8", "replace") for path, text in texts.items()}
    notes = await asyncio.to_thread(workflow_notes, config, files)  # YAML files: seconds, for a large one
    if not notes:
        return ""
    lines = "".join(f"- {note}\n" for note in notes)
    return f"\n\n**Tier workflows** (the tiers may not run where the config says):\n\n{lines}"


async def _grants_only(ctx: Context, forge: ForkGitHub, head: str, config: SluiceConfig) -> None:
    """A config with `downstreams` and no `upstream` lets forks read this repository; it is no fork itself."""
    await ctx.db(ctx.registry.unregister_fork, forge.repo)
    listed = ", ".join(f"`{d}`" for d in config.downstreams)
    summary = f"Sluice lets {listed} read this repository as their upstream; it does not sync this one."
    await forge.report_check(head, CONFIG_CHECK, ok=True, title=f"{CONFIG_PATH} is valid", summary=summary)


class _Reader:
    """The repository's branches fetched into its mirror, and `.github/sluice.yml` read at their heads."""

    def __init__(self, ctx: Context, repo: str, installation_id: int) -> None:
        self.ctx, self.repo, self.installation_id = ctx, repo, installation_id
        self.mirror = ctx.mirror(repo)
        self._repository: Repository | None = None

    async def read(self, branch: str) -> tuple[str, bytes | None]:
        auth = await self.ctx.git_auth(self.installation_id)
        url = self.ctx.clone_url(self.repo)
        head = await asyncio.to_thread(self.mirror.fetch_branch, url, branch, auth=auth)
        repository = await self.opened()
        return head, await asyncio.to_thread(repository.read_file, head, CONFIG_PATH)

    async def opened(self) -> Repository:
        if self._repository is None:
            self._repository = await asyncio.to_thread(self.ctx.repository, self.mirror)
        return self._repository


async def _parsed(ctx: Context, forge: ForkGitHub, head: str, text: bytes) -> SluiceConfig:
    """The file at `head` parsed as the App reads it; invalid: told on its `sluice/config` check, rejected."""
    try:
        return await asyncio.to_thread(  # a large file takes seconds: not on the event loop
            parse_config_bytes,
            text,
            filename=CONFIG_PATH,
            trusted_url_prefixes=ctx.trusted_url_prefixes,  # upstream.url: https://, or this GitHub
            machine_paths=False,  # a repository's file: no path on this machine (`risk.model`)
        )
    except ConfigError as exc:
        await upstream.report_invalid(forge, head, str(exc))
        raise Rejected(
            f"{forge.repo}: {CONFIG_PATH} is invalid:\n{exc.message}",
            "fix it and push; Sluice registers the fork then",
        ) from exc


async def _on_trunk(
    ctx: Context, forge: ForkGitHub, reader: _Reader, trunk: str, *, default_head: str
) -> tuple[str, SluiceConfig]:
    """The default branch's file names another trunk (`fork.branch`): the file there governs, and must be
    there and name the same trunk."""
    head, text = await reader.read(trunk)
    config = await _parsed(ctx, forge, head, text) if text is not None else None
    if config is not None and config.fork.branch == trunk:
        return head, config
    why = (
        f"`fork.branch` names `{trunk}`, which has no {CONFIG_PATH}"
        if config is None
        else f"`fork.branch` names `{trunk}`, whose {CONFIG_PATH} names `{config.fork.branch}`"
    )
    summary = f"{why}: the gate, the tiers and ingestion read the file on fork trunk. Commit it there."
    await forge.report_check(
        default_head, CONFIG_CHECK, ok=False, title=f"{CONFIG_PATH} is invalid", summary=summary
    )
    raise Rejected(f"{forge.repo}: {why}", f"commit {CONFIG_PATH} on {trunk}, naming it as fork.branch")


async def _risk_model(forge: ForkGitHub, repository: Repository, head: str, config: SluiceConfig) -> None:
    """`risk.model` naming a file: it must be a usable model in the tree at `head`, or every ingestion would
    fail to plan with nothing said on GitHub; told on `sluice/config`, as the file's own problems are."""
    try:
        await asyncio.to_thread(load_risk_model, repository, config, fork_head=head)
    except ConfigRefused as exc:
        problem = model_problem(exc)
        await upstream.report_invalid(forge, head, problem)
        raise Rejected(f"{forge.repo}: {problem}", "fix it and push; Sluice registers the fork then") from exc


READ_AS = {
    AccessKind.ANONYMOUS: "read anonymously: it is public",
    AccessKind.FORK_TOKEN: "read with this installation's token",
    AccessKind.CONSENTED: "read with its installation's token: its config lists this fork as a downstream",
}


def _accepted(config: SluiceConfig, access: UpstreamAccess) -> str:
    return (
        f"Sluice keeps `{config.fork.branch}` in sync with `{redact(config.upstream.url)}` "
        f"`{config.upstream.branch}` ({config.strategy.value}); the upstream is {READ_AS[access.kind]}."
    )
