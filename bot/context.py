"""What a job handler works with: settings, the store, the registry, GitHub, git mirrors and the clock."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.forge import ForkGitHub
from bot.github import GitHubClient
from bot.jobs import JobQueue
from bot.mirror import Mirror, SyncResult, token_auth
from bot.registry import Fork, Registry
from bot.settings import Settings
from bot.store import Store

Clock = Callable[[], dt.datetime]


@dataclass
class Context:
    settings: Settings
    store: Store
    queue: JobQueue
    registry: Registry
    github: GitHubClient
    bot_login: str  # "<app slug>[bot]": the author of the App's comments and pushes
    clock: Clock

    @property
    def web_url(self) -> str:
        return self.settings.web_url()

    @property
    def trusted_url_prefixes(self) -> tuple[str, ...]:
        """Besides https://, where a fork's `upstream.url` may point: the service's own GitHub."""
        return (self.web_url + "/",)

    def clone_url(self, repo: str) -> str:
        return f"{self.web_url}/{repo}.git"

    def mirror(self, fork: str) -> Mirror:
        return Mirror(Path(self.settings.data_dir) / "mirrors" / f"{fork}.git")

    async def git_auth(self, installation_id: int) -> dict[str, str]:
        return token_auth(await self.github.installation_token(installation_id))

    async def fork_auth(self, fork: Fork) -> tuple[dict[str, str], dict[str, str] | None]:
        """git credentials for the fork, and for its upstream when the App is installed there too."""
        upstream = self.registry.installation_of(fork.upstream_repo) if fork.upstream_repo else None
        return await self.git_auth(fork.installation_id), (
            await self.git_auth(upstream) if upstream else None
        )

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

    def forge(self, installation_id: int, repo: str) -> ForkGitHub:
        return ForkGitHub(self.github.for_installation(installation_id), repo, bot_login=self.bot_login)
