"""Local bare mirror holding fork trunk and the upstream branch, fetched incrementally."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import re
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.core.config import CONFIG_PATH
from bot.core.errors import GitAuthRejected, GitError, GitTransportError, redact
from bot.core.refs import validate_ref
from bot.git.environment import git_environ
from bot.git.repo import GIT_FAILED_REMEDY, GitRepo

# Transports git may use for a mirror; `ext::` and `fd::` run commands and are never allowed.
URL_FORMS = re.compile(r"^(?:(?:https?|ssh|git|file)://|[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:(?!//)|/)")
HTTP_CREDENTIALS = re.compile(r"^https?://[^/?#]*@", re.IGNORECASE)
# How git says that a remote wants credentials it was not given (or refused them), not that it is unreachable.
AUTH_REFUSED = re.compile(
    r"could not read Username|Authentication failed|Repository not found|repository '[^']*' not found"
    r"|returned error: 40[134]",
    re.IGNORECASE,
)
# How git says that the remote has no such branch: a name a person gave, which no retry makes appear.
NO_REMOTE_REF = re.compile(r"couldn't find remote ref (\S+)", re.IGNORECASE)
# No network command waits forever on a remote that took the connection and went quiet (the poll round and a
# job would wait with it): beside git's own low-speed limit on HTTP (GIT_ENV), every transport is cut off
# after these many seconds.
NETWORK_TIMEOUT_S = {"fetch": 2 * 3600.0, "push": 3600.0, "ls-remote": 120.0}
NETWORK_COMMANDS = frozenset(NETWORK_TIMEOUT_S)
SAFE_GIT = ("-c", "protocol.ext.allow=never", "-c", "protocol.fd.allow=never", "-c", "core.askPass=")
# The service's mirrors use no credential helper: the only credential git sends is the token handed to it.
NO_HELPERS = ("-c", "credential.helper=")
# Beside the mirror, not in it: whoever changes the mirror (its remotes' URLs, its refs) holds this first.
LOCK_SUFFIX = ".lock"


class CredentialsNeeded(GitTransportError):
    """The remote wants credentials git was not given: it is private, or not there; the next attempt
    decides again whose token, if any, reads it."""


def validate_url(url: str) -> str:
    """A repository URL or absolute path that git cannot take for an option or a command transport."""
    if not url or url.startswith("-") or any(ord(ch) < 32 for ch in url) or not URL_FORMS.match(url):
        raise GitError(
            f"not a repository URL Sluice will fetch: {redact(url)!r}",
            "use https://, ssh://, git://, file://, user@host:path, or an absolute path",
        )
    if HTTP_CREDENTIALS.match(url):  # never written to a mirror's config, where it would stay
        raise GitError(
            f"the repository URL {redact(url)!r} carries credentials",
            "remove them (they would stay in the mirror's config); use a credential helper or ssh",
        )
    return url


def token_auth(token: str) -> dict[str, str]:
    """Environment that makes git send a GitHub App installation token, as GitHub's git hosts accept it.

    The token travels in an `http.extraHeader` set through GIT_CONFIG_* variables: never on a command line
    (where `ps` shows it), never in a URL (where git's messages and the remote config would keep it).
    """
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }


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

    def __init__(self, path: Path, *, credential_helpers: bool = True) -> None:
        self.path = Path(path).resolve()
        self._helpers = () if credential_helpers else NO_HELPERS

    def _git(self, *args: str, auth: Mapping[str, str] | None = None) -> str:
        command = args[0]
        with subprocess.Popen(
            ["git", *SAFE_GIT, *self._helpers, *args],
            cwd=self.path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**git_environ(), **(auth or {})},
            start_new_session=True,  # its own process group: a timeout ends git-remote-https and ssh too
        ) as proc:
            try:
                out, err = proc.communicate(timeout=NETWORK_TIMEOUT_S.get(command))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                waited = NETWORK_TIMEOUT_S[command]
                raise GitTransportError(
                    f"git {command} failed in the mirror: no answer within {waited:.0f} s",
                    "check that the remote is reachable; it is tried again later",
                ) from None
        if proc.returncode != 0:
            raise failure_of_git(command, err, proc.returncode, authenticated=auth is not None)
        return out.strip()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the mirror's lock: workers and replicas share a fork's mirror, and a fetch sets the remote's
        URL and then fetches from it, which another fetch in between would point elsewhere (and git's own
        config and ref locks refuse a second writer rather than wait)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + LOCK_SUFFIX), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _ensure(self) -> None:
        if not (self.path / "HEAD").exists():
            self.path.mkdir(parents=True, exist_ok=True)
            self._git("init", "--quiet", "--bare")

    def _fetch(
        self,
        remote: str,
        url: str,
        refspec: str,
        *,
        auth: Mapping[str, str] | None = None,
    ) -> None:
        """Fetch `refspec` from `url`. What it brought joins the commit-graph when the caller writes it
        (`sync` writes it once, after both of its fetches)."""
        self._git("config", f"remote.{remote}.url", validate_url(url))
        self._git(
            "fetch", "--quiet", "--no-tags", "--prune", "--no-write-fetch-head", remote, refspec, auth=auth
        )

    def _write_graph(self) -> None:
        # A split commit-graph (only new commits are written) with changed-path filters: the history walks of
        # plans and picks, blame's and path-limited logs' above all, read it rather than parse every commit
        # and diff every tree.
        self._git("commit-graph", "write", "--reachable", "--split", "--changed-paths", "--no-progress")

    def sync(
        self,
        *,
        fork_url: str,
        fork_branch: str,
        upstream_url: str,
        upstream_branch: str,
        fork_auth: Mapping[str, str] | None = None,
        upstream_auth: Mapping[str, str] | None = None,
    ) -> SyncResult:
        """Fetch what is new on both sides; the first call clones, later ones transfer only new objects."""
        for url in (fork_url, upstream_url):
            validate_url(url)
        for branch in (fork_branch, upstream_branch):
            validate_ref(branch)
        fork_ref, upstream_ref = f"refs/heads/{fork_branch}", f"refs/remotes/upstream/{upstream_branch}"
        with self._locked():
            self._ensure()
            repo = GitRepo(self.path)
            before = (repo.resolve_optional(fork_ref), repo.resolve_optional(upstream_ref))
            fork_spec = f"+refs/heads/{fork_branch}:{fork_ref}"
            self._fetch("fork", fork_url, fork_spec, auth=fork_auth)
            upstream_spec = f"+refs/heads/{upstream_branch}:{upstream_ref}"
            self._fetch("upstream", upstream_url, upstream_spec, auth=upstream_auth)
            self._write_graph()
            fork_head, upstream_head = repo.resolve(fork_ref), repo.resolve(upstream_ref)
        return SyncResult(
            fork_ref=fork_branch,
            upstream_ref=f"upstream/{upstream_branch}",
            fork_head=fork_head,
            upstream_head=upstream_head,
            fork_moved=before[0] != fork_head,
            upstream_moved=before[1] != upstream_head,
        )

    def fetch_branch(self, url: str, branch: str, *, auth: Mapping[str, str] | None = None) -> str:
        """Fetch one branch of the fork at `url` into `refs/remotes/fork/<branch>`; its head."""
        validate_url(url)
        local = f"refs/remotes/fork/{validate_ref(branch)}"
        with self._locked():
            self._ensure()
            self._fetch("fork", url, f"+refs/heads/{branch}:{local}", auth=auth)
            self._write_graph()
            return GitRepo(self.path).resolve(local)

    def fetch_branches(
        self, url: str, prefix: str, *, auth: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The branches under `prefix` (e.g. `sluice/ingest/`) of the fork at `url`, as {branch: sha},
        fetched here (into a mirror made now, if an operator wiped the cache)."""
        validate_url(url)
        validate_ref(prefix.rstrip("/"))
        local = f"refs/remotes/fork/{prefix}"
        with self._locked():
            self._ensure()
            self._fetch("fork", url, f"+refs/heads/{prefix}*:{local}*", auth=auth)
            self._write_graph()
            listed = self._git("for-each-ref", "--format=%(objectname) %(refname)", local)
        return {
            ref.removeprefix("refs/remotes/fork/"): sha
            for sha, ref in (ln.split(" ", 1) for ln in listed.splitlines())
        }

    def fetch_ref(self, url: str, ref: str, *, auth: Mapping[str, str] | None = None) -> str:
        """Fetch one ref of the fork at `url` (e.g. `refs/pull/7/head`) into `refs/remotes/fork/<ref>`; its
        SHA (into a mirror made now, if an operator wiped the cache)."""
        validate_url(url)
        validate_ref(ref.removeprefix("refs/"))
        local = "refs/remotes/fork/" + ref.removeprefix("refs/")
        with self._locked():
            self._ensure()
            self._fetch("fork", url, f"+{ref}:{local}", auth=auth)
            self._write_graph()
            return GitRepo(self.path).resolve(local)

    def push(self, updates: Sequence[BranchUpdate], *, auth: Mapping[str, str] | None = None) -> None:
        """Move fork branches in one atomic push, each only if it is still where we saw it (a lease)."""
        if not updates:
            return
        leases, refspecs = [], []
        for update in updates:
            ref = f"refs/heads/{validate_ref(update.branch)}"
            leases.append(f"--force-with-lease={ref}:{update.old or ''}")
            refspecs.append(f"{update.new}:{ref}")
        with self._locked():
            self._git("push", "--quiet", "--atomic", "--porcelain", *leases, "fork", *refspecs, auth=auth)
            for update in updates:
                self._git("update-ref", f"refs/remotes/fork/{update.branch}", update.new)

    def ls_remote(self, url: str, branch: str, *, auth: Mapping[str, str] | None = None) -> str | None:
        """Where `branch` is on the remote `url`, without fetching anything (the poll loop's question)."""
        validate_url(url)
        ref = f"refs/heads/{validate_ref(branch)}"
        with self._locked():
            self._ensure()
        out = self._git("ls-remote", "--", url, ref, auth=auth)
        return next((line.split("\t", 1)[0] for line in out.splitlines() if line.endswith("\t" + ref)), None)

    def upstream_tag(self, tag: str, *, auth: Mapping[str, str] | None = None) -> str | None:
        """The commit upstream's tag `tag` points at (an annotated tag peeled), or None when upstream has
        no such tag; nothing is fetched (a tag on the upstream stream names a commit the mirror has)."""
        ref = f"refs/tags/{validate_ref(tag)}"
        out = self._git("ls-remote", "--", "upstream", ref, f"{ref}^{{}}", auth=auth)
        found: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            found[name] = sha
        return found.get(f"{ref}^{{}}") or found.get(ref)

    def readable_anonymously(self, url: str) -> bool:
        """Whether git reads `url` with no credential at all (it is public); raises when unreachable."""
        validate_url(url)
        with self._locked():
            self._ensure()
        try:
            self._git("ls-remote", "--", url, "HEAD")
        except CredentialsNeeded:
            return False
        return True


def failure_of_git(command: str, stderr: str, returncode: int, *, authenticated: bool) -> GitError:
    """What a failed git command in the mirror means, read from what git said (it has no error codes)."""
    detail = stderr.strip().splitlines()
    message = redact(f"git {command} failed in the mirror: {detail[-1] if detail else returncode}")
    if command not in NETWORK_COMMANDS:
        return GitError(message, GIT_FAILED_REMEDY, retryable=True)
    missing = NO_REMOTE_REF.search(stderr)
    if missing is not None:
        return GitError(
            message,
            f"check the branch name: the remote has no {missing.group(1)} (`git ls-remote URL` lists what it "
            f"has); fix `fork.branch` or `upstream.branch` in {CONFIG_PATH}",
        )
    if AUTH_REFUSED.search(stderr) is not None and authenticated:
        return GitAuthRejected(
            message,
            "a new token is minted for the next attempt; if this repeats while the App is installed on the "
            "repository, the git host's URL is wrong (SLUICE_GIT_URL) or the repository was renamed or moved",
        )
    if AUTH_REFUSED.search(stderr) is not None:
        return CredentialsNeeded(message, "make the repository public, or let Sluice read it with a token")
    return GitTransportError(message, "check that the remote is reachable; it is tried again later")


@dataclass(frozen=True)
class BranchUpdate:
    branch: str
    new: str
    old: str | None  # where we last saw it on the fork; None: it must not exist yet
