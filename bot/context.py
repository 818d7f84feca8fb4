"""What a job handler works with: settings, the store, the registry, GitHub, git mirrors and the clock."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.forge import ForkGitHub
from bot.github import GitHubClient
from bot.jobs import JobQueue
from bot.mirror import Mirror, token_auth
from bot.registry import Registry
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

    def clone_url(self, repo: str) -> str:
        return f"{self.web_url}/{repo}.git"

    def mirror(self, fork: str) -> Mirror:
        return Mirror(Path(self.settings.data_dir) / "mirrors" / f"{fork}.git")

    async def git_auth(self, installation_id: int) -> dict[str, str]:
        return token_auth(await self.github.installation_token(installation_id))

    def forge(self, installation_id: int, repo: str) -> ForkGitHub:
        return ForkGitHub(self.github.for_installation(installation_id), repo, bot_login=self.bot_login)
