"""What a job handler works with: settings, the store, the registry, GitHub, git mirrors and the clock."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec, TypeVar

from bot.app.settings import Settings
from bot.core.config import CONFIG_PATH, ConfigError, SluiceConfig, parse_config_bytes
from bot.core.errors import BadInput, GitTransportError, redact
from bot.core.ingestion import owner_repo
from bot.core.upstream_access import (
    UpstreamAccess,
    UpstreamFacts,
    UpstreamRefused,
    address_refusal,
    decide,
    host_of,
    needs_consent,
    url_refusal,
)
from bot.db.audit import CommandAudit
from bot.db.bisections import Bisections
from bot.db.gates import GateStore
from bot.db.jobs import JobQueue
from bot.db.lag import LagHistory
from bot.db.signoffs import L3Signoffs
from bot.db.store import Store
from bot.db.tier_runs import TierRuns
from bot.db.trunk_watch import TrunkWatchStore
from bot.git.mirror import Mirror, SyncResult, token_auth
from bot.git.repo import GitRepo
from bot.github.client import GitHubClient
from bot.github.forge import ForkGitHub
from bot.ports import (
    BisectionRecords,
    Clock,
    CommandLog,
    Fork,
    ForkRegistry,
    GateRecords,
    JobRequests,
    LagReader,
    LagRecorder,
    Repository,
    SignoffRecords,
    TierRunRecords,
    TrunkWatchRecords,
)

P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger("sluice.context")


@dataclass
class Context:
    settings: Settings
    store: Store
    queue: JobQueue  # the worker's; handlers ask through `job_requests`
    registry: ForkRegistry
    github: GitHubClient
    bot_login: str  # "<app slug>[bot]": the author of the App's comments and pushes
    clock: Clock

    async def db(self, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`call` (the registry's, the queue's, the store's) in a worker thread: a database round trip on the
        event loop would stall everything else on it, the webhook intake's acknowledgements included."""
        return await asyncio.to_thread(call, *args, **kwargs)

    @property
    def job_requests(self) -> JobRequests:
        """The queue as handlers may use it: asking for internal jobs, reading which deliveries it holds."""
        return self.queue

    @property
    def gates(self) -> GateRecords:
        """Waivers, approvals, holds, pauses, failures and audit records (blocking: call through `db`)."""
        return GateStore(self.store)

    @property
    def tier_runs(self) -> TierRunRecords:
        """Each tier attempt on a PR head (blocking: call through `db`)."""
        return TierRuns(self.store)

    @property
    def signoffs(self) -> SignoffRecords:
        """L3's regressions per PR head and the `/signoff l3`s given (blocking: call through `db`)."""
        return L3Signoffs(self.store)

    @property
    def bisections(self) -> BisectionRecords:
        """Bisections of failed ingestions and the culprits they blamed (blocking: call through `db`)."""
        return Bisections(self.store)

    @property
    def trunk_watch(self) -> TrunkWatchRecords:
        """Failures tracked on fork trunk, and trunk's tier runs (blocking: call through `db`)."""
        return TrunkWatchStore(self.store)

    @property
    def lag_history(self) -> LagRecorder:
        """Where each ingestion run records where the fork stands (read back by `/metrics` and `GET /`)."""
        return LagHistory(self.store)

    @property
    def lag_points(self) -> LagReader:
        """The lag history read back, for `/status` (blocking: call through `db`)."""
        return LagHistory(self.store)

    @property
    def command_log(self) -> CommandLog:
        """The audit log of slash commands (blocking: call through `db`)."""
        return CommandAudit(self.store)

    @property
    def web_url(self) -> str:
        return self.settings.web_url()

    @property
    def trusted_url_prefixes(self) -> tuple[str, ...]:
        """Besides https://, how a fork's `upstream.url` may be fetched: over the scheme the service's own
        GitHub is reached by (plain http only on a test bench). Which hosts are allowed is for the upstream
        access rule (bot.upstream_access) to say, with its own message."""
        return (self.web_url.partition("://")[0] + "://",)

    def clone_url(self, repo: str) -> str:
        return f"{self.web_url}/{repo}.git"

    def mirror(self, fork: str) -> Mirror:
        # No credential helper of the host's: an anonymous read is anonymous, a token the one handed over.
        return Mirror(Path(self.settings.data_dir) / "mirrors" / f"{fork}.git", credential_helpers=False)

    def repository(self, mirror: Mirror) -> Repository:
        """The fork's mirror as the flows read, probe and pick in it."""
        return GitRepo(mirror.path)

    async def git_auth(self, installation_id: int) -> dict[str, str]:
        return token_auth(await self.github.installation_token(installation_id))

    async def fork_auth(self, fork: Fork) -> tuple[dict[str, str], dict[str, str] | None]:
        """git credentials for the fork, and for its upstream as `upstream_access` allows (None: anonymous).

        Raises UpstreamRefused when Sluice may not read the upstream for this fork at all.
        """
        access = await self.upstream_access(
            fork.repo, installation_id=fork.installation_id, upstream_url=fork.upstream_url
        )
        upstream = access.installation_id
        return await self.git_auth(fork.installation_id), (
            await self.git_auth(upstream) if upstream is not None else None
        )

    async def upstream_access(self, fork: str, *, installation_id: int, upstream_url: str) -> UpstreamAccess:
        """How the upstream may be read for `fork` (in `installation_id`); raises UpstreamRefused."""
        await asyncio.to_thread(self.check_upstream_host, fork, upstream_url)
        upstream = owner_repo(upstream_url, web_base=self.web_url)
        public = await asyncio.to_thread(self.mirror(fork).readable_anonymously, upstream_url)
        upstream_installation = await self.db(self.registry.installation_of, upstream) if upstream else None
        facts = UpstreamFacts(
            fork=fork,
            fork_installation=installation_id,
            upstream_url=redact(upstream_url),
            upstream=upstream,
            public=public,
            upstream_installation=upstream_installation,
        )
        if needs_consent(facts):
            assert facts.upstream is not None and facts.upstream_installation is not None
            downstreams = await self._downstreams(facts.upstream, facts.upstream_installation)
            facts = dataclasses.replace(facts, downstreams=downstreams)
        access = decide(facts)
        log.info("%s: upstream %s read with %s", fork, facts.upstream_url, access.kind.value)
        return access

    def check_upstream_host(self, fork: str, url: str) -> None:
        """Refuse an upstream on a host the operator did not allow, or one resolving to an internal address
        (blocking: it resolves the name)."""
        listed = self.settings.listed_upstream_hosts()
        refusal = url_refusal(
            url, web_url=self.web_url, github_host=self.settings.github_host(), listed_hosts=listed
        )
        host = host_of(url)
        if refusal is None and host is not None:  # only an allowed name is looked up
            addresses = self._resolve(host)
            allow_private = self.settings.allow_private_upstreams
            refusal = address_refusal(host, addresses, listed_hosts=listed, allow_private=allow_private)
        if refusal is not None:
            problem, remedy = refusal
            raise UpstreamRefused(f"{fork}: upstream.url {redact(url)!r} {problem}", remedy)

    @staticmethod
    def _resolve(host: str) -> list[str]:
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as exc:  # DNS may be down for a while: retried, not refused
            raise GitTransportError(
                f"cannot resolve the upstream host {host}: {exc}", "check DNS; it is tried again later"
            ) from None
        return [str(info[4][0]) for info in infos]

    async def _downstreams(self, upstream: str, installation_id: int) -> tuple[str, ...]:
        """`downstreams` of the upstream's own config, read with its installation's token for that alone."""
        try:
            raw = await self.forge(installation_id, upstream).file(CONFIG_PATH, ref=None)
            name = f"{upstream}:{CONFIG_PATH}"
            return (await asyncio.to_thread(parse_config_bytes, raw or b"", filename=name)).downstreams
        except (BadInput, ConfigError, ValueError) as exc:  # an unreadable grant grants nothing
            log.warning("%s: its %s is unusable, so it grants no downstream: %s", upstream, CONFIG_PATH, exc)
            return ()

    def sync_fork(
        self, fork: Fork, *, auth: dict[str, str], upstream_auth: dict[str, str] | None
    ) -> tuple[Mirror, SyncResult]:
        """Fetch the fork's trunk and upstream branch into the fork's mirror (blocking: run in a thread)."""
        mirror = self.mirror(fork.repo)
        return mirror, mirror.sync(
            fork_url=self.clone_url(fork.repo),
            fork_branch=fork.branch,
            upstream_url=fork.upstream_url,
            upstream_branch=fork.upstream_branch,
            fork_auth=auth,
            upstream_auth=upstream_auth,
        )

    async def trunk_config(self, fork: Fork) -> SluiceConfig:
        """`.github/sluice.yml` as fork trunk has it on GitHub (the defaults where there is none), parsed as
        the App parses a repository's file; ConfigError when it is invalid, BadInput when it is unreadable."""
        raw = await self.forge(fork.installation_id, fork.repo).file(CONFIG_PATH, ref=fork.branch)
        return await asyncio.to_thread(  # a large file takes seconds: not on the event loop
            parse_config_bytes,
            raw or b"",
            filename=f"{fork.repo}:{fork.branch}:{CONFIG_PATH}",
            trusted_url_prefixes=self.trusted_url_prefixes,
            machine_paths=False,  # a repository's file: no path on this machine (`risk.model`)
        )

    def forge(self, installation_id: int, repo: str) -> ForkGitHub:
        api = self.github.for_installation(installation_id)
        return ForkGitHub(api, repo, bot_login=self.bot_login, app_id=self.settings.app_id)
