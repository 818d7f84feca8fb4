"""What GitHub itself (not a delivery) says about the App's installations and the repositories they hold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gidgethub import BadRequest

from bot.core.webhooks import Installation, Repository
from bot.github.answers import parsed
from bot.github.client import GitHubClient


@dataclass(frozen=True)
class GitHubInstallation:
    """An installation of this App as GitHub reports it."""

    id: int
    account: str
    suspended: bool


async def on_github(github: GitHubClient, installation_id: int) -> GitHubInstallation | None:
    """GitHub's record of the installation (`GET /app/installations/{id}`), None when it has none."""
    found = await _app_get_or_none(
        github, "/app/installations/{installation_id}", {"installation_id": installation_id}
    )
    if found is None:
        return None
    installation = parsed(Installation, found, what=f"installation {installation_id}")
    account = installation.account.login if installation.account is not None else "?"
    return GitHubInstallation(installation.id, account, suspended=installation.suspended_at is not None)


async def repos_on_github(github: GitHubClient, installation_id: int) -> frozenset[str]:
    """The repositories GitHub says the installation holds (`GET /installation/repositories`)."""
    api = github.for_installation(installation_id)
    pages = api.getiter("/installation/repositories?per_page=100", iterable_key="repositories")
    what = f"a repository of installation {installation_id}"
    return frozenset([parsed(Repository, repo, what=what).full_name async for repo in pages])


async def holds(github: GitHubClient, installation_id: int, repo: str) -> bool:
    """Whether GitHub says `repo` is in the installation (`GET /repos/{owner}/{repo}/installation`)."""
    owner, name = repo.split("/", 1)
    found = await _app_get_or_none(
        github, "/repos/{owner}/{repo}/installation", {"owner": owner, "repo": name}
    )
    return (
        found is not None and parsed(Installation, found, what=f"{repo}'s installation").id == installation_id
    )


async def _app_get_or_none(github: GitHubClient, url: str, url_vars: dict[str, Any]) -> Any:
    try:
        return await github.app_get(url, url_vars)
    except BadRequest as exc:
        if exc.status_code == 404:
            return None
        raise
