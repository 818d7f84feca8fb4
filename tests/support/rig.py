"""The GitHub simulator wired to Sluice over loopback: the sim served, upstream and fork, the settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr

from bot.app.service import create_app
from bot.app.settings import Settings
from bot.db.store import Store
from tests.support.github_sim import GitHubSim


def url_of(server: Any) -> str:
    """The base URL an aiohttp test server listens on, without the trailing slash."""
    return str(server.make_url("")).rstrip("/")


async def serve_sim(aiohttp_server: Any, root: Path) -> tuple[GitHubSim, str]:
    """A simulator keeping its repositories under `root`, served on loopback; and its URL."""
    sim = GitHubSim(root=root)
    return sim, url_of(await aiohttp_server(sim.app))


def upstream_and_fork(sim: GitHubSim, upstream: str, fork: str, files: dict[str, str]) -> None:
    """`upstream` with one commit of `files` on main, and `fork` whose main is a copy of it."""
    sim.create_repo(upstream)
    sim.commit(upstream, "main", files, message="initial")
    sim.create_repo(fork)
    sim.git(fork, "fetch", "--quiet", str(sim.repo_path(upstream)), "main:main")


def fork_config(sim_url: str, upstream: str) -> str:
    """The fork's `.github/sluice.yml`: ingest `upstream`'s main, served by the simulator, onto main."""
    return f"upstream:\n  url: {sim_url}/{upstream}.git\n  branch: main\nfork:\n  branch: main\n"


def sim_settings(sim: GitHubSim, sim_url: str, *, secret: str, data_dir: Path, **changes: Any) -> Settings:
    """Settings that reach the simulator as its App: the App's id and key, the sim's URL, the hook secret."""
    values: dict[str, Any] = {
        "app_id": sim.app_id,
        "private_key": SecretStr(sim.private_key_pem or ""),
        "webhook_secret": SecretStr(secret),
        "github_url": sim_url,
        "data_dir": data_dir,
    }
    return Settings(**(values | changes))


def serve_settings(sim: GitHubSim, sim_url: str, *, secret: str, data_dir: Path, **changes: Any) -> Settings:
    """`sim_settings` for a served bot: one job worker, no upstream polling, leases short enough to test."""
    quick: dict[str, Any] = {"workers": 1, "poll_interval": 0, "lease_seconds": 30}
    return sim_settings(sim, sim_url, secret=secret, data_dir=data_dir, **(quick | changes))


async def sim_with_fork(
    aiohttp_server: Any, tmp_path: Path, *, upstream: str, fork: str, secret: str = "s"
) -> tuple[GitHubSim, Settings]:
    """A served simulator holding `upstream` and its `fork` (one README), and settings that reach it."""
    sim, url = await serve_sim(aiohttp_server, tmp_path / "sim")
    upstream_and_fork(sim, upstream, fork, {"README.md": "triton\n"})
    settings = sim_settings(
        sim,
        url,
        secret=secret,
        data_dir=tmp_path / "data",
        allow_private_upstreams=True,  # the simulator listens on loopback, which Sluice refuses by default
    )
    return sim, settings


async def serve_bot(aiohttp_server: Any, settings: Settings, store: Store) -> tuple[Any, str]:
    """`sluice serve`'s app (its workers and loops running) on loopback; the server and its URL."""
    server = await aiohttp_server(create_app(settings, store=store, background=True))
    return server, url_of(server)


def installation_created(
    sim: GitHubSim, full_name: str, installation_id: int, *, permissions: dict[str, str] | None = None
) -> dict[str, Any]:
    """The `installation` event (`created`) GitHub sends when the App is installed on `full_name` alone."""
    owner, name = full_name.split("/")
    return {
        "action": "created",
        "installation": {
            "id": installation_id,
            "account": {"login": owner, "id": 1, "type": "Organization"},
            "repository_selection": "selected",
            "app_id": sim.app_id,
            "target_type": "Organization",
            "permissions": permissions or {"contents": "write", "pull_requests": "write"},
            "events": ["push", "pull_request"],
        },
        "repositories": [
            {
                "id": sim.repos[full_name].id,
                "name": name,
                "full_name": full_name,
                "private": sim.repos[full_name].private,
            }
        ],
        "sender": {"login": "octocat", "id": 583231, "type": "User"},
    }
