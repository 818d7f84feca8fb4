"""Local bare mirror holding fork trunk and the upstream branch, fetched incrementally."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bot.errors import GitError
from bot.gitio import GIT_ENV, GitRepo, validate_ref

# Transports git may use for a mirror; `ext::` and `fd::` run commands and are never allowed.
URL_FORMS = re.compile(r"^(?:(?:https?|ssh|git|file)://|[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:(?!//)|/)")
CREDENTIALS = re.compile(r"//[^/@\s]*@")
SAFE_GIT = ("-c", "protocol.ext.allow=never", "-c", "protocol.fd.allow=never", "-c", "core.askPass=")


def validate_url(url: str) -> str:
    """A repository URL or absolute path that git cannot take for an option or a command transport."""
    if not url or url.startswith("-") or any(ord(ch) < 32 for ch in url) or not URL_FORMS.match(url):
        raise GitError(
            f"not a repository URL Sluice will fetch: {redact(url)!r}",
            "use https://, ssh://, git://, file://, user@host:path, or an absolute path",
        )
    return url


def redact(url: str) -> str:
    """The URL without credentials (`https://user:token@host` -> `https://host`), for messages and logs."""
    return CREDENTIALS.sub("//", url)


@dataclass(frozen=True)
class SyncResult:
    fork_ref: str
    upstream_ref: str
    fork_head: str
    upstream_head: str
    fork_moved: bool
    upstream_moved: bool


class Mirror:
    """A bare repo: fork trunk as `refs/heads/<branch>`, upstream as `refs/remotes/upstream/<branch>`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).resolve()

    def _git(self, *args: str) -> str:
        proc = subprocess.run(
            ["git", *SAFE_GIT, *args],
            cwd=self.path,
            capture_output=True,
            text=True,
            env={**os.environ, **GIT_ENV},
        )
        if proc.returncode != 0:
            detail = proc.stderr.strip().splitlines()
            raise GitError(f"git {args[0]} failed in the mirror: {detail[-1] if detail else proc.returncode}")
        return proc.stdout.strip()

    def _ensure(self) -> None:
        if not (self.path / "HEAD").exists():
            self.path.mkdir(parents=True, exist_ok=True)
            self._git("init", "--quiet", "--bare")

    def _fetch(self, remote: str, url: str, refspec: str) -> None:
        self._git("config", f"remote.{remote}.url", url)
        self._git("fetch", "--quiet", "--no-tags", "--prune", "--no-write-fetch-head", remote, refspec)

    def sync(self, *, fork_url: str, fork_branch: str, upstream_url: str, upstream_branch: str) -> SyncResult:
        """Fetch what is new on both sides; the first call clones, later ones transfer only new objects."""
        for url in (fork_url, upstream_url):
            validate_url(url)
        for branch in (fork_branch, upstream_branch):
            validate_ref(branch)
        self._ensure()
        repo = GitRepo(self.path)
        fork_ref, upstream_ref = f"refs/heads/{fork_branch}", f"refs/remotes/upstream/{upstream_branch}"
        before = (repo.resolve_optional(fork_ref), repo.resolve_optional(upstream_ref))
        self._fetch("fork", fork_url, f"+refs/heads/{fork_branch}:{fork_ref}")
        self._fetch("upstream", upstream_url, f"+refs/heads/{upstream_branch}:{upstream_ref}")
        fork_head, upstream_head = repo.resolve(fork_ref), repo.resolve(upstream_ref)
        return SyncResult(
            fork_ref=fork_branch,
            upstream_ref=f"upstream/{upstream_branch}",
            fork_head=fork_head,
            upstream_head=upstream_head,
            fork_moved=before[0] != fork_head,
            upstream_moved=before[1] != upstream_head,
        )
