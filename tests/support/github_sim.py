"""A stateful GitHub simulator (aiohttp) backed by real bare git repositories, for the whole test suite."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextvars
import datetime as dt
import hashlib
import hmac
import io
import json
import os
import re
import secrets
import subprocess
import tempfile
import uuid
import zipfile
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
import jsonschema
import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ZERO_SHA = "0" * 40
API = "https://api.github.com"
WEB = "https://github.com"
DOCS = "https://docs.github.com/rest"
PULL_COMMITS_LISTED = 250  # GitHub's list of a PR's commits stops there (the PR's `commits` counts them all)
PULL_FILES_LISTED = 3000  # and its list of files there
PUSH_COMMITS_LISTED = 2048  # a push delivery's `commits`, the newest ones (20 in the events API, not here)
CONTENTS_MAX_BYTES = 1024 * 1024  # the contents API sends no larger file's content (`encoding: none`)
BASE_MODIFIED = "Base branch was modified. Review and try the merge again."
BODY_MAX_CHARS = 65536  # an issue's, a PR's or a comment's body
RATE_LIMIT = 5000  # an hour's REST requests for an installation's token or the App's JWT
ANONYMOUS_RATE_LIMIT = 60  # and for a request with no credentials (GitHub counts them per address)
DROPPED = 0  # a fault that answers nothing: the connection closes (as `requests` records it)
SECONDARY_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID."
)
REACTIONS = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})
PERMISSIONS = frozenset({"admin", "maintain", "write", "triage", "read", "none"})
SIM_IDENTITY = {
    "GIT_AUTHOR_NAME": "GitHub",
    "GIT_AUTHOR_EMAIL": "noreply@github.com",
    "GIT_COMMITTER_NAME": "GitHub",
    "GIT_COMMITTER_EMAIL": "noreply@github.com",
}

GIT_SERVICES = frozenset({"git-upload-pack", "git-receive-pack"})
# GitHub's server-side git settings that a client can observe: pushes to refs/pull/* are refused
# ("deny updating a hidden ref") and any commit can be fetched by its sha.
GIT_SERVER_CONFIG = {"receive.hideRefs": "refs/pull", "uploadpack.allowAnySHA1InWant": "true"}
PUSH_COMMAND = re.compile(r"^([0-9a-f]{40,64}) ([0-9a-f]{40,64}) (\S+)$")

OPENAPI = Path(__file__).parent.parent / "fixtures" / "openapi" / "operations.json"
PATH_PARAM = re.compile(r"\{[^}]*\}")
INSTALLATION_ID = web.RequestKey("installation_id", int)
ANONYMOUS = web.RequestKey("anonymous", bool)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HOOK_TIMEOUT_S = 10.0  # GitHub waits this long for a receiver's answer, then records "timed out"
HOOK_REDELIVERY_WINDOW = dt.timedelta(days=3)  # GitHub redelivers only deliveries of the past 3 days
HOOK_CURSOR = re.compile(r"^v1_(\d+)$")


class HookDelivery(NamedTuple):
    """A webhook waiting to be sent; a redelivery carries the event's GUID again."""

    url: str
    secret: str
    event: str
    payload: dict[str, Any]
    guid: str | None = None


# Webhooks raised while a request is handled wait here until its response is sent, as on GitHub.
HELD_HOOKS: contextvars.ContextVar[list[HookDelivery] | None] = contextvars.ContextVar(
    "held_hooks", default=None
)


class SimError(Exception):
    """An HTTP error with GitHub's JSON body shape."""

    def __init__(self, status: int, message: str, *, errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body: dict[str, Any] = {"message": message, "documentation_url": DOCS, "status": str(status)}
        if errors is not None:
            self.body["errors"] = errors


def validation_failed(*errors: dict[str, Any]) -> SimError:
    return SimError(422, "Validation Failed", errors=list(errors))


class GitDenied(Exception):
    """A refusal on the git smart-HTTP endpoints: plain text, as git prints it after `remote:`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def response(self) -> web.Response:
        headers = {"WWW-Authenticate": 'Basic realm="GitHub"'} if self.status == 401 else {}
        return web.Response(status=self.status, text=f"{self}\n", headers=headers)


class GitRequest(NamedTuple):
    """One git smart-HTTP request: which repository, which service, and whose credential it carried."""

    repo: str
    service: str
    installation: int | None  # the installation of the token sent; None: anonymous; -1: a dead token
    status: int


class RefUpdate(NamedTuple):
    ref: str
    before: str
    after: str


@dataclass
class Repo:
    id: int
    full_name: str
    path: Path
    default_branch: str
    private: bool = False

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.split("/", 1)[1]


@dataclass
class Issue:
    """An issue or a pull request: they share GitHub's number space and most fields."""

    number: int
    id: int
    title: str
    body: str | None
    user: str
    created_at: str
    state: str = "open"
    updated_at: str = ""
    closed_at: str | None = None
    is_pull: bool = False
    head_ref: str = ""
    base_ref: str = ""
    draft: bool = False
    merged: bool = False
    merged_at: str | None = None
    merged_by: str | None = None
    merge_commit_sha: str | None = None
    frozen_head_sha: str | None = None
    frozen_base_sha: str | None = None
    head_repo: str | None = None  # a PR from another repository (`owner:branch`): its full name


@dataclass
class Comment:
    id: int
    full_name: str
    number: int
    body: str
    user: str
    created_at: str
    updated_at: str


@dataclass
class Fault:
    method: str
    path_regex: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, str]
    body: Any
    after: bool = False  # the request is carried out first, then answered `status` (the answer is lost)


@dataclass
class Slow:
    path_regex: re.Pattern[str]
    seconds: float
    times: int | None


@dataclass
class HookAttempt:
    """One attempt to deliver a webhook, as GitHub logs it (`GET /app/hook/deliveries`)."""

    id: int
    guid: str  # X-GitHub-Delivery, shared by the redeliveries of the same event
    delivered_at: dt.datetime
    redelivery: bool
    duration: float
    status: str  # "OK", "Invalid HTTP Response: 503", "failed to connect to host", "timed out"
    status_code: int
    event: str
    action: str | None
    installation_id: int | None
    repository_id: int | None
    url: str
    secret: str
    request_headers: dict[str, str]
    payload: dict[str, Any]
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: str | None = None


@dataclass
class Installation:
    id: int
    account: str
    repos: set[str] = field(default_factory=set)
    suspended: bool = False


def _user(login: str) -> dict[str, Any]:
    kind = "Bot" if login.endswith("[bot]") else "User"
    uid = int(hashlib.sha1(login.encode()).hexdigest()[:7], 16)
    return {"login": login, "id": uid, "type": kind, "html_url": f"{WEB}/{login}"}


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_iso(text: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _created_range(query: str) -> Callable[[dt.datetime], bool]:
    """GitHub's `created` filter (its search syntax for dates): `>=T`, `>T`, `<=T`, `<T`, `A..B` (either end
    `*`), or one date, which stands for that whole day (UTC); T a date or an ISO 8601 time. A value it
    cannot read gets a 422 here (Sluice never sends one; GitHub documents no answer for it)."""

    def bound(text: str, *, end: bool) -> dt.datetime:
        moment = _parse_iso(text)
        if end and len(text) == 10:  # a bare date as an upper bound: the whole day counts
            moment += dt.timedelta(days=1) - dt.timedelta(microseconds=1)
        return moment

    try:
        for op, test in ((">=", lambda t, b: t >= b), ("<=", lambda t, b: t <= b)):
            if query.startswith(op):
                at = bound(query[2:], end=op == "<=")
                return lambda t: test(t, at)
        if query and query[0] in "<>":
            at = bound(query[1:], end=query[0] == ">")
            return (lambda t: t > at) if query[0] == ">" else (lambda t: t < at)
        low, dots, high = query.partition("..")
        if not dots:
            low = high = query
        first = None if low == "*" else bound(low, end=False)
        last = None if high == "*" else bound(high, end=True)
    except ValueError:
        raise SimError(422, f"Invalid value for created: {query}") from None
    return lambda t: (first is None or t >= first) and (last is None or t <= last)


def _git_token(authorization: str) -> str | None:
    """The token a git client sent: Basic with any user and the token as password, Bearer or token.

    None when there is no Authorization header; "" when there is one that holds no token.
    """
    scheme, _, credential = authorization.strip().partition(" ")
    if not scheme:
        return None
    if scheme.lower() in ("bearer", "token"):
        return credential.strip()
    if scheme.lower() != "basic":
        return ""
    try:
        decoded = base64.b64decode(credential.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return decoded.partition(":")[2]


def _push_commands(body: bytes) -> list[RefUpdate]:
    """The updates a receive-pack request asks for: pkt-lines `old new ref` up to the flush, then the pack."""
    updates: dict[str, RefUpdate] = {}
    pos = 0
    while pos + 4 <= len(body):
        try:
            size = int(body[pos : pos + 4], 16)
        except ValueError:
            break
        if size < 4:
            break
        line = body[pos + 4 : pos + size].split(b"\0", 1)[0].decode(errors="replace").strip()
        if match := PUSH_COMMAND.match(line):
            updates[match[3]] = RefUpdate(match[3], match[1], match[2])
        pos += size
    return list(updates.values())


def _cgi_response(out: bytes, returncode: int | None) -> web.Response:
    """A CGI program's output (headers, a blank line, the body) as a response."""
    split = re.search(rb"\r?\n\r?\n", out)
    if split is None:
        return web.Response(status=500, text=f"git http-backend failed (exit {returncode})\n")
    status, headers = 200, {}
    for line in out[: split.start()].decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name.lower() != "content-length":  # aiohttp sets it from the body
            headers[name.strip()] = value.strip()
    return web.Response(status=status, body=out[split.end() :], headers=headers)


class GitHubSim:
    """GitHub's REST API and git smart HTTP (`<base>/<owner>/<name>.git`) as a bot sees them.

    `app` is the aiohttp application to serve. With `hook(url, secret)` set, the sim's own changes
    send GitHub's webhooks from a background task; `await drain_hooks()` waits for them.
    """

    def __init__(
        self,
        *,
        app_id: int = 4242,
        public_key_pem: str | bytes | None = None,
        root: str | os.PathLike[str] | None = None,
        bot_login: str = "sluice[bot]",
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.app_id = app_id
        self.private_key_pem: str | None = None
        if public_key_pem is None:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.private_key_pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ).decode()
            public_key_pem = key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        self.public_key_pem = public_key_pem.decode() if isinstance(public_key_pem, bytes) else public_key_pem
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="github-sim-"))
        self.bot_login = bot_login
        self.now = clock or (lambda: dt.datetime.now(dt.UTC))
        self._ids = 1000
        self.repos: dict[str, Repo] = {}
        self.installations: dict[int, Installation] = {}
        self.tokens: dict[str, tuple[int, dt.datetime]] = {}
        self.issues: dict[str, dict[int, Issue]] = defaultdict(dict)
        self._comments: dict[int, Comment] = {}
        self.labels: dict[tuple[str, int], list[str]] = defaultdict(list)
        self.check_runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.permissions: dict[tuple[str, str], str] = {}
        self.reactions: dict[int, list[dict[str, Any]]] = defaultdict(list)
        self.dispatches: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.workflow_runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.artifacts: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.run_details = True  # False: a GitHub (Enterprise Server) from before `return_run_details` (204)
        # GitHub's published request schemas and statuses (tests/fixtures/openapi), checked on every call
        self.operations: dict[str, Any] = json.loads(OPENAPI.read_text())["operations"]
        self.schema_violations: list[str] = []
        self.undocumented_statuses: list[str] = []
        self._artifact_zips: dict[int, tuple[bytes, str]] = {}
        self.requests: list[tuple[str, str, int]] = []
        self.deliveries: list[dict[str, Any]] = []
        self.hook_log: list[HookAttempt] = []  # the App's webhook delivery log, as GitHub keeps it
        self.hook_timeout_s = HOOK_TIMEOUT_S
        self.pushes: list[dict[str, Any]] = []
        self.git_requests: list[GitRequest] = []
        self._hook: tuple[str, str] | None = None
        self._outbox: asyncio.Queue[HookDelivery] = asyncio.Queue()
        self._hook_worker: asyncio.Task[None] | None = None
        self.rate_used: dict[str, int] = defaultdict(int)
        self.rate_reset = int(self.now().timestamp()) + 3600
        self._faults: list[Fault] = []
        self._slows: list[Slow] = []
        self._init_reviews()
        self.app = web.Application(middlewares=[self._middleware])
        self._routes()

    def _init_reviews(self) -> None:
        """What the gate reads: reviews per PR, team members, and races staged with `before_next`."""
        self.reviews: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        self.teams: dict[str, set[str]] = defaultdict(set)  # "org/slug" (lower case) -> member logins
        self._before: list[tuple[str, re.Pattern[str], Callable[[], None]]] = []

    # ---------------------------------------------------------------- setup and recording

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def create_repo(self, full_name: str, *, default_branch: str = "main", private: bool = False) -> Path:
        """A bare repository with no commits; push to `repo_path(full_name)` or seed it with `commit()`.

        Public repositories can be read over git HTTP without credentials; private ones need a token
        whose installation includes them.
        """
        path = self.root / "repos" / f"{full_name}.git"
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "init", "--quiet", "--bare", f"--initial-branch={default_branch}", str(path)], check=True
        )
        self.repos[full_name] = Repo(self._next_id(), full_name, path, default_branch, private)
        return path

    def repo_path(self, full_name: str) -> Path:
        return self.repos[full_name].path

    def install(self, full_name: str) -> int:
        """Install the App on a repository; one installation per account, as on GitHub."""
        account = full_name.split("/", 1)[0]
        for inst in self.installations.values():
            if inst.account == account:
                inst.repos.add(full_name)
                return inst.id
        inst = Installation(self._next_id(), account, {full_name})
        self.installations[inst.id] = inst
        return inst.id

    def uninstall(self, full_name: str) -> None:
        """Remove a repository from its installation (the installation stays, as on GitHub)."""
        for inst in self.installations.values():
            inst.repos.discard(full_name)

    def delete_installation(self, installation_id: int) -> None:
        """Uninstall the App from an account: GitHub answers 404 for the installation from then on, and
        401 for its tokens."""
        del self.installations[installation_id]
        self.revoke_tokens(installation_id)

    def installation_token(self, installation_id: int) -> str:
        """Mint a token without the HTTP round trip (for tests that call repo endpoints directly)."""
        token = "ghs_" + secrets.token_hex(18)
        self.tokens[token] = (installation_id, self.now() + dt.timedelta(hours=1))
        return token

    def revoke_tokens(self, installation_id: int) -> None:
        """GitHub forgets the installation's tokens (a rotation): the next request with one gets 401."""
        self.tokens = {t: grant for t, grant in self.tokens.items() if grant[0] != installation_id}

    def suspend(self, installation_id: int) -> None:
        """Suspend the installation: its tokens die (401) and minting one answers 403."""
        self.installations[installation_id].suspended = True
        self.revoke_tokens(installation_id)

    def expire_tokens(self) -> None:
        past = self.now() - dt.timedelta(seconds=1)
        self.tokens = {t: (i, past) for t, (i, _) in self.tokens.items()}

    def hook(self, url: str, secret: str) -> None:
        """Send GitHub's webhooks (`push`, `pull_request`) for the sim's own state changes to `url`."""
        self._hook = (url, secret)

    async def drain_hooks(self) -> None:
        """Wait until every webhook queued so far (and any queued meanwhile) was delivered."""
        self._start_hook_worker()
        await self._outbox.join()

    def set_permission(self, full_name: str, user: str, permission: str) -> None:
        assert permission in PERMISSIONS, permission
        self.permissions[(full_name, user)] = permission

    @property
    def comments(self) -> defaultdict[tuple[str, int], list[str]]:
        """Current comment bodies per (repository, issue or PR number), oldest first."""
        out: defaultdict[tuple[str, int], list[str]] = defaultdict(list)
        for c in sorted(self._comments.values(), key=lambda c: c.id):
            out[(c.full_name, c.number)].append(c.body)
        return out

    def comment_objects(self, full_name: str, number: int) -> list[dict[str, Any]]:
        return [
            self._comment_json(c)
            for c in self._comments.values()
            if (c.full_name, c.number) == (full_name, number)
        ]

    @property
    def pulls(self) -> defaultdict[str, list[dict[str, Any]]]:
        """Pull requests per repository, in the REST shape, oldest first."""
        out: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        for full_name, issues in self.issues.items():
            out[full_name] = [self._pull_json(self.repos[full_name], i) for i in issues.values() if i.is_pull]
        return out

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        body: Any = None,
    ) -> None:
        """The next `times` requests matching method (or "*") and path answer `status` instead."""
        if body is None:
            body = {"message": SECONDARY_LIMIT_MESSAGE if status in (403, 429) else "Server Error"}
            body["documentation_url"] = DOCS
        self._faults.append(Fault(method.upper(), re.compile(path_regex), status, times, headers or {}, body))

    def fail_after_next(self, method: str, path_regex: str, status: int = 502) -> None:
        """The next matching request is carried out, then answered `status`: GitHub did the work but its
        answer was lost (a gateway timing out behind it)."""
        body = {"message": "Server Error", "documentation_url": DOCS}
        self._faults.append(Fault(method.upper(), re.compile(path_regex), status, 1, {}, body, after=True))

    def drop_next(self, method: str, path_regex: str, *, times: int = 1) -> None:
        """The next `times` matching requests get no answer: the connection closes (a network failure)."""
        self._faults.append(Fault(method.upper(), re.compile(path_regex), DROPPED, times, {}, None))

    def secondary_rate_limit(self, method: str, path_regex: str, *, retry_after: int | None = None) -> None:
        headers = {} if retry_after is None else {"retry-after": str(retry_after)}
        self.fail_next(method, path_regex, 403, headers=headers)

    def exhaust_rate_limit(self, method: str, path_regex: str, *, reset_in: int = 60, times: int = 1) -> None:
        reset = int(self.now().timestamp()) + reset_in
        headers = {
            "x-ratelimit-remaining": "0",
            "x-ratelimit-used": str(RATE_LIMIT),
            "x-ratelimit-reset": str(reset),
        }
        body = {"message": "API rate limit exceeded for installation.", "documentation_url": DOCS}
        self.fail_next(method, path_regex, 403, times=times, headers=headers, body=body)

    def slow(self, path_regex: str, seconds: float, *, times: int | None = None) -> None:
        self._slows.append(Slow(re.compile(path_regex), seconds, times))

    def before_next(self, method: str, path_regex: str, action: Callable[[], None]) -> None:
        """Run `action` (someone else's change: a push, say) just before the next matching request is
        handled: a race with another actor, made deterministic."""
        self._before.append((method, re.compile(path_regex), action))

    def _run_before(self, request: web.Request) -> None:
        for entry in list(self._before):
            method, regex, action = entry
            if method in ("*", request.method) and regex.search(request.path):
                self._before.remove(entry)
                action()
                return

    # ---------------------------------------------------------------- git

    def git(self, full_name: str, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
        proc = self._git(self.repos[full_name], *args, env=env)
        if check and proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout.strip()

    def _git(
        self, repo: Repo, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **SIM_IDENTITY, **(env or {})}
        return subprocess.run(["git", *args], cwd=repo.path, env=full_env, capture_output=True, text=True)

    def _resolve(self, repo: Repo, rev: str) -> str | None:
        proc = self._git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        return proc.stdout.strip() if proc.returncode == 0 else None

    def _branch_sha(self, repo: Repo, branch: str) -> str | None:
        return self._resolve(repo, f"refs/heads/{branch}")

    def _is_ancestor(self, repo: Repo, old: str, new: str) -> bool:
        return self._git(repo, "merge-base", "--is-ancestor", old, new).returncode == 0

    def commit(
        self,
        full_name: str,
        branch: str,
        files: Mapping[str, str | bytes | None],
        *,
        message: str = "commit",
        parent: str | None = None,
        pusher: str = "octocat",
    ) -> str:
        """Commit `files` (None deletes) on `parent` or the branch tip, move the branch, return the sha.

        Moving the branch is a push by `pusher` as far as webhooks and `refs/pull/N/head` go.
        """
        repo = self.repos[full_name]
        old = self._branch_sha(repo, branch)
        base = parent or old
        with tempfile.TemporaryDirectory() as tmp:
            env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
            if base:
                self.git(full_name, "read-tree", base, env=env)
            for path, content in files.items():
                if content is None:
                    self.git(full_name, "update-index", "--force-remove", path, env=env)
                    continue
                blob = (
                    subprocess.run(
                        ["git", "hash-object", "-w", "--stdin"],
                        cwd=repo.path,
                        input=content.encode() if isinstance(content, str) else content,  # bytes: as they are
                        capture_output=True,
                        check=True,
                    )
                    .stdout.decode()
                    .strip()
                )
                self.git(full_name, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            tree = self.git(full_name, "write-tree", env=env)
        parents = ["-p", base] if base else []
        sha = self.git(full_name, "commit-tree", tree, *parents, "-m", message)
        self.git(full_name, "update-ref", f"refs/heads/{branch}", sha)
        if sha != old:
            self._refs_moved(repo, [RefUpdate(f"refs/heads/{branch}", old or ZERO_SHA, sha)], pusher=pusher)
        return sha

    def push(self, full_name: str, branch: str, sha: str, *, pusher: str = "octocat") -> None:
        """A person's `git push` of `sha` (a commit the repository already holds) to `branch`: the branch
        moves and GitHub's `push` (and `synchronize`) webhooks go out."""
        repo = self.repos[full_name]
        if self._resolve(repo, sha) != sha:
            raise ValueError(f"{full_name} has no commit {sha}: fetch its objects into repo_path() first")
        old = self._branch_sha(repo, branch)
        self.git(full_name, "update-ref", f"refs/heads/{branch}", sha)
        if sha != old:
            self._refs_moved(repo, [RefUpdate(f"refs/heads/{branch}", old or ZERO_SHA, sha)], pusher=pusher)

    def _commit_json(self, repo: Repo, sha: str) -> dict[str, Any]:
        fmt = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
        out = self._git(repo, "show", "-s", f"--format={fmt}", sha).stdout
        h, tree, parents, an, ae, ad, cn, ce, cd, msg = out.split("\0", 9)
        return {
            "sha": h,
            "node_id": f"C_{h[:12]}",
            "url": f"{API}/repos/{repo.full_name}/commits/{h}",
            "html_url": f"{WEB}/{repo.full_name}/commit/{h}",
            "commit": {
                "message": msg.rstrip("\n"),
                "tree": {"sha": tree},
                "author": {"name": an, "email": ae, "date": ad},
                "committer": {"name": cn, "email": ce, "date": cd},
            },
            "author": None,
            "committer": None,
            "parents": [{"sha": p} for p in parents.split()],
        }

    def _log(self, repo: Repo, rev_range: list[str]) -> list[str]:
        out = self._git(repo, "rev-list", "--reverse", "--topo-order", *rev_range).stdout
        return out.split()

    def _refs(self, repo: Repo) -> dict[str, str]:
        out = self._git(repo, "for-each-ref", "--format=%(refname) %(objectname)").stdout
        return dict(line.split(" ", 1) for line in out.splitlines())

    def _open_pulls(self, repo: Repo) -> list[Issue]:
        issues = self.issues.get(repo.full_name, {})  # not self.issues[...]: that would add the repo
        return [i for i in issues.values() if i.is_pull and i.state == "open"]

    def _sync_pull_refs(self, repo: Repo) -> None:
        """Point `refs/pull/N/head` at each open PR's head, as GitHub does (closed PRs keep theirs)."""
        pulls = self._open_pulls(repo)
        if not pulls:
            return
        refs = self._refs(repo)
        for issue in pulls:
            if issue.head_repo is not None:
                continue  # follows its own repository's pushes (`_outside_heads_moved`)
            head = refs.get(f"refs/heads/{issue.head_ref}")
            pull_ref = f"refs/pull/{issue.number}/head"
            if head is not None and refs.get(pull_ref) != head:
                self._git(repo, "update-ref", pull_ref, head)

    def _refs_moved(self, repo: Repo, updates: list[RefUpdate], *, pusher: str) -> None:
        """Everything GitHub does after refs move: PR refs follow, `push` and `synchronize` hooks go out."""
        self._sync_pull_refs(repo)
        self._outside_heads_moved(repo, updates, pusher=pusher)
        if self._hook is None:
            return
        for update in updates:
            if update.ref.startswith(("refs/heads/", "refs/tags/")):
                self._emit("push", self.push_payload(repo.full_name, *update, pusher=pusher))
            if update.after == ZERO_SHA:
                continue
            for issue in self._open_pulls(repo):
                if issue.head_repo is None and f"refs/heads/{issue.head_ref}" == update.ref:
                    moved = {"before": update.before, "after": update.after}
                    self._notify_pull(repo, issue, "synchronize", sender=pusher, **moved)

    def _outside_heads_moved(self, repo: Repo, updates: list[RefUpdate], *, pusher: str) -> None:
        """A push to a branch another repository's open PR comes from: that PR's head follows (its objects
        fetched into the base repository, as GitHub keeps them); the base repository hears `synchronize`."""
        for base_name, issues in list(self.issues.items()):
            for issue in list(issues.values()):
                if not (issue.is_pull and issue.state == "open" and issue.head_repo == repo.full_name):
                    continue
                for update in updates:
                    if update.ref != f"refs/heads/{issue.head_ref}" or update.after == ZERO_SHA:
                        continue
                    base = self.repos[base_name]
                    self._git(
                        base,
                        "fetch",
                        "--quiet",
                        str(repo.path),
                        f"+{update.ref}:refs/pull/{issue.number}/head",
                    )
                    moved = {"before": update.before, "after": update.after}
                    self._notify_pull(base, issue, "synchronize", sender=pusher, **moved)

    # ---------------------------------------------------------------- HTTP plumbing

    def _routes(self) -> None:
        for method, path, handler in [*self._app_routes(), *self._repo_routes(), *self._git_routes()]:
            self.app.router.add_route(method, path, handler)

    def _app_routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("GET", "/app", self._get_app),
            ("GET", "/app/installations", self._list_installations),
            ("GET", "/app/installations/{id:\\d+}", self._get_installation),
            ("POST", "/app/installations/{id:\\d+}/access_tokens", self._create_token),
            ("GET", "/repos/{owner}/{repo}/installation", self._repo_installation),
            ("GET", "/installation/repositories", self._installation_repos),
            ("GET", "/app/hook/deliveries", self._list_hook_deliveries),
            ("GET", "/app/hook/deliveries/{id:\\d+}", self._get_hook_delivery),
            ("POST", "/app/hook/deliveries/{id:\\d+}/attempts", self._redeliver_hook),
            ("GET", "/rate_limit", self._rate_limit),
            ("GET", "/orgs/{org}/teams/{team}/memberships/{user}", self._team_membership),
        ]

    def _repo_routes(self) -> list[tuple[str, str, Handler]]:
        r = "/repos/{owner}/{repo}"
        return [
            ("GET", r, self._get_repo),
            ("GET", f"{r}/git/ref/{{ref:.+}}", self._get_ref),
            ("GET", f"{r}/git/refs/{{ref:.+}}", self._get_ref),
            ("POST", f"{r}/git/refs", self._create_ref),
            ("PATCH", f"{r}/git/refs/{{ref:.+}}", self._update_ref),
            ("DELETE", f"{r}/git/refs/{{ref:.+}}", self._delete_ref),
            ("GET", f"{r}/branches/{{branch:.+}}", self._get_branch),
            ("GET", f"{r}/commits/{{ref:[^/]+}}/check-runs", self._list_check_runs),
            ("GET", f"{r}/commits/{{ref:[^/]+}}", self._get_commit),
            ("GET", f"{r}/contents/{{path:.+}}", self._get_content),
            ("POST", f"{r}/pulls", self._create_pull),
            ("GET", f"{r}/pulls", self._list_pulls),
            ("GET", f"{r}/pulls/{{number:\\d+}}", self._get_pull),
            ("PATCH", f"{r}/pulls/{{number:\\d+}}", self._update_pull),
            ("GET", f"{r}/pulls/{{number:\\d+}}/commits", self._pull_commits),
            ("GET", f"{r}/pulls/{{number:\\d+}}/files", self._pull_files),
            ("GET", f"{r}/pulls/{{number:\\d+}}/merge", self._pull_merged),
            ("PUT", f"{r}/pulls/{{number:\\d+}}/merge", self._merge_pull),
            ("GET", f"{r}/pulls/{{number:\\d+}}/reviews", self._list_reviews),
            ("POST", f"{r}/pulls/{{number:\\d+}}/reviews", self._create_review),
            ("POST", f"{r}/issues", self._create_issue),
            ("GET", f"{r}/issues", self._list_issues),
            ("GET", f"{r}/issues/{{number:\\d+}}", self._get_issue),
            ("PATCH", f"{r}/issues/{{number:\\d+}}", self._update_issue),
            ("POST", f"{r}/issues/{{number:\\d+}}/comments", self._create_comment),
            ("GET", f"{r}/issues/{{number:\\d+}}/comments", self._list_comments),
            ("GET", f"{r}/issues/comments/{{id:\\d+}}", self._get_comment),
            ("PATCH", f"{r}/issues/comments/{{id:\\d+}}", self._update_comment),
            ("DELETE", f"{r}/issues/comments/{{id:\\d+}}", self._delete_comment),
            ("POST", f"{r}/issues/comments/{{id:\\d+}}/reactions", self._create_reaction),
            ("POST", f"{r}/issues/{{number:\\d+}}/labels", self._add_labels),
            ("PUT", f"{r}/issues/{{number:\\d+}}/labels", self._set_labels),
            ("GET", f"{r}/issues/{{number:\\d+}}/labels", self._list_labels),
            ("DELETE", f"{r}/issues/{{number:\\d+}}/labels/{{name:.+}}", self._remove_label),
            ("POST", f"{r}/check-runs", self._create_check_run),
            ("GET", f"{r}/check-runs/{{id:\\d+}}", self._get_check_run),
            ("PATCH", f"{r}/check-runs/{{id:\\d+}}", self._update_check_run),
            ("GET", f"{r}/collaborators/{{user}}/permission", self._permission),
            ("POST", f"{r}/actions/workflows/{{workflow}}/dispatches", self._dispatch),
            ("GET", f"{r}/actions/runs", self._list_runs),
            ("GET", f"{r}/actions/runs/{{id:\\d+}}", self._get_run),
            ("GET", f"{r}/actions/runs/{{id:\\d+}}/artifacts", self._list_artifacts),
            ("GET", f"{r}/actions/artifacts/{{id:\\d+}}", self._get_artifact),
            ("GET", f"{r}/actions/artifacts/{{id:\\d+}}/zip", self._download_artifact),
        ]

    def _git_routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("GET", "/_blobs/artifacts/{id:\\d+}", self._artifact_blob),
            ("GET", "/{owner}/{repo}.git/info/refs", self._git_http),
            ("POST", "/{owner}/{repo}.git/{service:git-upload-pack|git-receive-pack}", self._git_http),
        ]

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        held: list[HookDelivery] = []
        reset = HELD_HOOKS.set(held)
        try:
            response, identity = await self._respond(request, handler)
        finally:
            HELD_HOOKS.reset(reset)
        if identity is not None:  # git smart HTTP is not the REST API: no rate limit there
            response = self._conditional(request, response)
            if response.status != 304:  # GitHub does not count an answer of "not modified"
                self._rate_limit_headers(response, identity)
        self.requests.append((request.method, request.path, response.status))
        if held:
            try:
                await response.prepare(request)
                await response.write_eof()
            finally:
                self._queue_hooks(held)
        return response

    @staticmethod
    def _conditional(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
        """GitHub's ETag on a REST answer to a GET, and 304 with no body when the request's If-None-Match
        names it (the client then reads its cached copy)."""
        if request.method != "GET" or response.status != 200 or not isinstance(response, web.Response):
            return response
        body = response.body if isinstance(response.body, bytes) else None
        if body is None:
            return response
        etag = f'W/"{hashlib.sha256(body).hexdigest()[:40]}"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        response.headers["ETag"] = etag
        return response

    async def _respond(self, request: web.Request, handler: Handler) -> tuple[web.StreamResponse, str | None]:
        """The response and the rate-limit identity (None for git, which authenticates itself)."""
        # git authenticates itself; a blob URL is signed (GitHub redirects downloads to such URLs)
        git = request.match_info.handler in (self._git_http, self._artifact_blob)
        identity: str | None = None if git else "anonymous"
        try:
            await self._maybe_sleep(request.path)
            self._run_before(request)
            fault = self._take_fault(request)
            if fault is not None and fault.status == DROPPED:
                assert request.transport is not None
                request.transport.abort()  # the client sees the connection go, with no answer at all
                return web.Response(status=DROPPED), None
            if fault is not None and fault.after:
                identity = self._authenticate(request)
                await self._check_request(request)
                await handler(request)  # done, but the client never sees its answer
                response: web.StreamResponse = web.json_response(fault.body, status=fault.status)
            elif fault is not None:
                response = web.json_response(fault.body, status=fault.status)
                response.headers.update(fault.headers)
            else:
                if not git:
                    identity = self._authenticate(request)
                    self._check_rate(identity)
                    await self._check_request(request)
                response = await handler(request)
        except SimError as exc:
            response = web.json_response(exc.body, status=exc.status)
        except web.HTTPException as exc:
            response = web.json_response(
                {"message": exc.reason, "documentation_url": DOCS}, status=exc.status
            )
        self._check_status(request, response.status)
        return response, identity

    def _operation(self, request: web.Request) -> dict[str, Any] | None:
        resource = request.match_info.route.resource
        if resource is None:
            return None
        key = f"{request.method} {PATH_PARAM.sub('{}', resource.canonical)}"
        operation: dict[str, Any] | None = self.operations.get(key)
        return operation

    async def _check_request(self, request: web.Request) -> None:
        """Refuse a body GitHub's published schema refuses, as GitHub does (422), and remember it."""
        operation = self._operation(request)
        if operation is None or operation["request"] is None or not request.body_exists:
            return
        try:
            body = await request.json()
        except ValueError:
            return  # the handler answers 400 "Problems parsing JSON"
        problem = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(operation["request"]).iter_errors(body)
        )
        if problem is not None:
            where = "/".join(str(p) for p in problem.absolute_path) or "body"
            self.schema_violations.append(f"{operation['operationId']}: {where}: {problem.message}")
            raise SimError(422, f"Invalid request.\n\n{where}: {problem.message}")

    def _check_status(self, request: web.Request, status: int) -> None:
        """Record a success status the operation does not document (the sim drifting from GitHub)."""
        operation = self._operation(request)
        if operation is not None and status < 400 and str(status) not in operation["statuses"]:
            self.undocumented_statuses.append(f"{operation['operationId']}: {status}")

    @staticmethod
    def rate_limit(identity: str) -> int:
        return ANONYMOUS_RATE_LIMIT if identity == "anonymous" else RATE_LIMIT

    def _check_rate(self, identity: str) -> None:
        """GitHub's primary rate limit: an identity's requests in the hour past its limit are refused (403,
        `x-ratelimit-remaining: 0` and the reset time, which the headers say) until the hour resets."""
        now = int(self.now().timestamp())
        if now >= self.rate_reset:  # a new hour: every identity starts again
            self.rate_used.clear()
            self.rate_reset = now + 3600
        if self.rate_used[identity] < self.rate_limit(identity):
            return
        who = "127.0.0.1" if identity == "anonymous" else identity.replace(":", " ID ")
        raise SimError(403, f"API rate limit exceeded for {who}.")

    def _rate_limit_headers(self, response: web.StreamResponse, identity: str) -> None:
        limit = self.rate_limit(identity)
        if response.status != 403 or self.rate_used[identity] < limit:  # a refusal for the limit: not counted
            self.rate_used[identity] += 1
        defaults = {
            "x-ratelimit-limit": str(limit),
            "x-ratelimit-remaining": str(max(0, limit - self.rate_used[identity])),
            "x-ratelimit-reset": str(self.rate_reset),
            "x-ratelimit-used": str(self.rate_used[identity]),
            "x-ratelimit-resource": "core",
            "x-github-request-id": uuid.uuid4().hex[:16].upper(),
        }
        for name, value in defaults.items():
            response.headers.setdefault(name, value)

    async def _maybe_sleep(self, path: str) -> None:
        for slow in self._slows:
            if slow.path_regex.search(path) and (slow.times is None or slow.times > 0):
                if slow.times is not None:
                    slow.times -= 1
                await asyncio.sleep(slow.seconds)
                return

    def _take_fault(self, request: web.Request) -> Fault | None:
        for fault in self._faults:
            if fault.method in ("*", request.method) and fault.path_regex.search(request.path):
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _authenticate(self, request: web.Request) -> str:
        """Check credentials; returns the rate-limit identity. The repo check happens in `_repo()`."""
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        if not request.headers.get("Authorization") and self._public_read(request):
            request[ANONYMOUS] = True  # GitHub shows anyone a public repository (`_repo` checks it is public)
            return "anonymous"
        if not credential:
            raise SimError(401, "Requires authentication")
        if self._wants_jwt(request):
            if scheme.lower() != "bearer":
                raise SimError(401, "A JSON web token could not be decoded")
            self._verify_jwt(credential)
            return "app"
        if scheme.lower() not in ("token", "bearer"):
            raise SimError(401, "Bad credentials")
        installation = self.tokens.get(credential)
        if installation is None or installation[1] <= self.now() or installation[0] not in self.installations:
            raise SimError(401, "Bad credentials")
        request[INSTALLATION_ID] = installation[0]
        return f"installation:{installation[0]}"

    @staticmethod
    def _wants_jwt(request: web.Request) -> bool:
        return (
            request.path == "/app"
            or request.path.startswith("/app/")
            or request.path.endswith("/installation")
        )

    def _verify_jwt(self, token: str) -> None:
        try:
            claims = jwt.decode(
                token,
                self.public_key_pem,
                algorithms=["RS256"],
                options={"verify_exp": False, "verify_iat": False, "require": ["exp", "iat", "iss"]},
            )
        except jwt.PyJWTError as exc:
            raise SimError(401, "A JSON web token could not be decoded") from exc
        now = self.now().timestamp()
        if str(claims["iss"]) != str(self.app_id):
            raise SimError(401, f"'Issuer' claim ('iss') must be an Integer; unknown app {claims['iss']}")
        if claims["exp"] <= now:
            raise SimError(
                401, "'Expiration time' claim ('exp') must be a numeric value representing the future time"
            )
        if claims["exp"] - now > 600 + 60 or claims["iat"] > now + 60:
            raise SimError(401, "'Expiration time' claim ('exp') is too far in the future")

    @staticmethod
    def _public_read(request: web.Request) -> bool:
        """A read GitHub answers without credentials for a public repository (not its Actions artifacts)."""
        path = request.path
        return (
            request.method == "GET"
            and path.startswith("/repos/")
            and "/actions/" not in path
            and not GitHubSim._wants_jwt(request)
        )

    def _repo(self, request: web.Request) -> Repo:
        full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
        repo = self.repos.get(full_name)
        if request.get(ANONYMOUS) and repo is not None and not repo.private:
            return repo  # an anonymous read of a public repository
        inst = self.installations.get(request.get(INSTALLATION_ID, -1))
        if repo is None or inst is None or full_name not in inst.repos:
            raise SimError(404, "Not Found")
        return repo

    @staticmethod
    async def _json(request: web.Request) -> Any:
        if not request.body_exists:
            return {}
        try:
            return await request.json()
        except ValueError as exc:
            raise SimError(400, "Problems parsing JSON") from exc

    @staticmethod
    def _paginate(
        request: web.Request,
        items: list[Any],
        *,
        wrap: str | None = None,
        render: Callable[[Any], Any] | None = None,
    ) -> web.Response:
        """One page of `items` with GitHub's Link header; `wrap` names the list key of a counted envelope."""
        try:
            per_page = max(1, min(100, int(request.query.get("per_page", "30"))))
            page = max(1, int(request.query.get("page", "1")))
        except ValueError as exc:
            raise validation_failed({"resource": "Search", "field": "per_page", "code": "invalid"}) from exc
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        if render is not None:
            chunk = [render(x) for x in chunk]
        body: Any = {"total_count": len(items), wrap: chunk} if wrap else chunk
        response = web.json_response(body)

        def url(n: int) -> str:
            query = {**request.query, "per_page": str(per_page), "page": str(n)}
            return str(request.url.with_query(query))

        links = []
        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(1)}>; rel="first"', f'<{url(min(page - 1, last))}>; rel="prev"']
        if links:
            response.headers["Link"] = ", ".join(links)
        return response

    # ---------------------------------------------------------------- JSON shapes

    def _repo_json(self, repo: Repo) -> dict[str, Any]:
        return {
            "id": repo.id,
            "node_id": f"R_{repo.id}",
            "name": repo.name,
            "full_name": repo.full_name,
            "private": repo.private,
            "owner": _user(repo.owner),
            "html_url": f"{WEB}/{repo.full_name}",
            "url": f"{API}/repos/{repo.full_name}",
            "clone_url": f"{WEB}/{repo.full_name}.git",
            "default_branch": repo.default_branch,
            "fork": False,
        }

    def _installation_json(self, inst: Installation) -> dict[str, Any]:
        return {
            "id": inst.id,
            "app_id": self.app_id,
            "account": _user(inst.account),
            "repository_selection": "selected",
            "access_tokens_url": f"{API}/app/installations/{inst.id}/access_tokens",
            "target_type": "Organization",
            "suspended_at": _iso(self.now()) if inst.suspended else None,
            "permissions": {
                "contents": "write",
                "pull_requests": "write",
                "issues": "write",
                "checks": "write",
            },
        }

    def _labels_json(self, full_name: str, number: int) -> list[dict[str, Any]]:
        return [
            {
                "id": int(hashlib.sha1(n.encode()).hexdigest()[:7], 16),
                "name": n,
                "color": "ededed",
                "default": False,
            }
            for n in self.labels.get((full_name, number), [])
        ]

    def _issue_json(self, repo: Repo, issue: Issue) -> dict[str, Any]:
        kind = "pull" if issue.is_pull else "issues"
        out = {
            "id": issue.id,
            "node_id": f"I_{issue.id}",
            "number": issue.number,
            "title": issue.title,
            "body": issue.body,
            "state": issue.state,
            "state_reason": None,
            "user": _user(issue.user),
            "labels": self._labels_json(repo.full_name, issue.number),
            "comments": sum(
                1
                for c in self._comments.values()
                if (c.full_name, c.number) == (repo.full_name, issue.number)
            ),
            "created_at": issue.created_at,
            "updated_at": issue.updated_at or issue.created_at,
            "closed_at": issue.closed_at,
            "html_url": f"{WEB}/{repo.full_name}/{kind}/{issue.number}",
            "url": f"{API}/repos/{repo.full_name}/issues/{issue.number}",
        }
        if issue.is_pull:
            out["pull_request"] = {"url": f"{API}/repos/{repo.full_name}/pulls/{issue.number}"}
        return out

    def _pull_shas(self, repo: Repo, issue: Issue) -> tuple[str | None, str | None]:
        if issue.state != "open":
            return issue.frozen_head_sha, issue.frozen_base_sha
        if issue.head_repo is not None:
            return self._resolve(repo, f"refs/pull/{issue.number}/head"), self._branch_sha(
                repo, issue.base_ref
            )
        return self._branch_sha(repo, issue.head_ref), self._branch_sha(repo, issue.base_ref)

    def _mergeable(self, repo: Repo, head: str | None, base: str | None) -> bool:
        return self._test_merge(repo, head, base) is not None

    def _test_merge(self, repo: Repo, head: str | None, base: str | None) -> str | None:
        """The test merge commit GitHub reports as an open PR's `merge_commit_sha` (None: it conflicts).
        It is on no branch: only `merged` says whether a PR was merged."""
        if head is None or base is None:
            return None
        merged = self._git(repo, "merge-tree", "--write-tree", base, head)
        if merged.returncode != 0:
            return None
        tree, message = merged.stdout.split()[0], f"Merge {head} into {base}"
        when = {"GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}
        return self._git(
            repo, "commit-tree", tree, "-p", base, "-p", head, "-m", message, env=when
        ).stdout.strip()

    def _pull_json(self, repo: Repo, issue: Issue, *, listed: bool = False) -> dict[str, Any]:
        """A PR as GitHub shows it; one PR's own answer (not a list's) also counts its commits and files."""
        head, base = self._pull_shas(repo, issue)
        out = self._issue_json(repo, issue)
        if not listed and head is not None and base is not None:
            start, end = self._pull_range(repo, issue)
            out["commits"] = int(self._git(repo, "rev-list", "--count", end, f"^{start}").stdout)
            out["changed_files"] = (
                len(self._git(repo, "diff", "--name-only", "-z", start, end).stdout.split("\0")) - 1
            )
        out.pop("pull_request")
        test_merge = self._test_merge(repo, head, base) if issue.state == "open" else None
        mergeable = (test_merge is not None) if issue.state == "open" else None
        out.update(
            {
                "html_url": f"{WEB}/{repo.full_name}/pull/{issue.number}",
                "url": f"{API}/repos/{repo.full_name}/pulls/{issue.number}",
                "issue_url": f"{API}/repos/{repo.full_name}/issues/{issue.number}",
                "head": self._pull_end(self.repos[issue.head_repo or repo.full_name], issue.head_ref, head),
                "base": self._pull_end(repo, issue.base_ref, base),
                "draft": issue.draft,
                "merged": issue.merged,
                "merged_at": issue.merged_at,
                "merged_by": _user(issue.merged_by) if issue.merged_by else None,
                "merge_commit_sha": issue.merge_commit_sha or test_merge,
                "mergeable": mergeable,
                "mergeable_state": {True: "clean", False: "dirty", None: "unknown"}[mergeable],
            }
        )
        return out

    def _pull_end(self, repo: Repo, ref: str, sha: str | None) -> dict[str, Any]:
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": _user(repo.owner),
            "repo": self._repo_json(repo),
        }

    def _comment_json(self, c: Comment) -> dict[str, Any]:
        return {
            "id": c.id,
            "node_id": f"IC_{c.id}",
            "body": c.body,
            "user": _user(c.user),
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "html_url": f"{WEB}/{c.full_name}/issues/{c.number}#issuecomment-{c.id}",
            "issue_url": f"{API}/repos/{c.full_name}/issues/{c.number}",
            "url": f"{API}/repos/{c.full_name}/issues/comments/{c.id}",
            "author_association": "NONE" if c.user.endswith("[bot]") else "MEMBER",
        }

    # ---------------------------------------------------------------- app endpoints

    async def _get_app(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"id": self.app_id, "slug": "sluice", "name": "Sluice", "owner": _user("sluice")}
        )

    async def _list_installations(self, request: web.Request) -> web.Response:
        return self._paginate(request, [self._installation_json(i) for i in self.installations.values()])

    def _installation(self, request: web.Request) -> Installation:
        inst = self.installations.get(int(request.match_info["id"]))
        if inst is None:
            raise SimError(404, "Not Found")
        return inst

    async def _get_installation(self, request: web.Request) -> web.Response:
        return web.json_response(self._installation_json(self._installation(request)))

    async def _create_token(self, request: web.Request) -> web.Response:
        inst = self._installation(request)
        if inst.suspended:
            raise SimError(403, "This installation has been suspended")
        token = self.installation_token(inst.id)
        body = {
            "token": token,
            "expires_at": _iso(self.tokens[token][1]),
            "permissions": self._installation_json(inst)["permissions"],
            "repository_selection": "selected",
        }
        return web.json_response(body, status=201)

    async def _repo_installation(self, request: web.Request) -> web.Response:
        full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
        for inst in self.installations.values():
            if full_name in inst.repos:
                return web.json_response(self._installation_json(inst))
        raise SimError(404, "Not Found")

    async def _installation_repos(self, request: web.Request) -> web.Response:
        inst = self.installations[request[INSTALLATION_ID]]
        repos = [self._repo_json(self.repos[n]) for n in sorted(inst.repos) if n in self.repos]
        return self._paginate(request, repos, wrap="repositories")

    async def _rate_limit(self, request: web.Request) -> web.Response:
        core = {"limit": RATE_LIMIT, "remaining": RATE_LIMIT, "reset": self.rate_reset, "used": 0}
        return web.json_response({"resources": {"core": core}, "rate": core})

    async def _get_repo(self, request: web.Request) -> web.Response:
        return web.json_response(self._repo_json(self._repo(request)))

    # ---------------------------------------------------------------- refs and commits

    def _ref_json(self, repo: Repo, ref: str, sha: str) -> dict[str, Any]:
        return {
            "ref": ref,
            "node_id": f"REF_{hashlib.sha1(ref.encode()).hexdigest()[:10]}",
            "url": f"{API}/repos/{repo.full_name}/git/{ref}",
            "object": {
                "sha": sha,
                "type": "commit",
                "url": f"{API}/repos/{repo.full_name}/git/commits/{sha}",
            },
        }

    async def _get_ref(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        ref = "refs/" + request.match_info["ref"]
        sha = self._resolve(repo, ref) if ref.count("/") >= 2 else None
        if sha is None:
            raise SimError(404, "Not Found")
        return web.json_response(self._ref_json(repo, ref, sha))

    async def _create_ref(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        data = await self._json(request)
        ref, sha = data.get("ref"), data.get("sha")
        if not isinstance(ref, str) or not isinstance(sha, str):
            raise validation_failed(
                {"resource": "Reference", "field": "ref" if not ref else "sha", "code": "missing"}
            )
        if not ref.startswith("refs/") or ref.count("/") < 2:
            raise SimError(422, f"{ref} is not a valid ref name.")
        if self._resolve(repo, ref) is not None:
            raise SimError(422, "Reference already exists")
        if len(sha) != 40 or self._resolve(repo, sha) is None:
            raise SimError(422, "Object does not exist")
        self._git(repo, "update-ref", ref, sha, ZERO_SHA)
        self._refs_moved(repo, [RefUpdate(ref, ZERO_SHA, sha)], pusher=self.bot_login)
        return web.json_response(self._ref_json(repo, ref, sha), status=201)

    async def _update_ref(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        ref = "refs/" + request.match_info["ref"]
        data = await self._json(request)
        sha = data.get("sha")
        old = self._resolve(repo, ref)
        if old is None:
            raise SimError(422, "Reference does not exist")
        if not isinstance(sha, str) or len(sha) != 40 or self._resolve(repo, sha) is None:
            raise SimError(422, "Object does not exist")
        if not data.get("force") and not self._is_ancestor(repo, old, sha):
            raise SimError(422, "Update is not a fast forward")
        if self._git(repo, "update-ref", ref, sha, old).returncode != 0:
            raise SimError(409, "Reference cannot be updated")
        if sha != old:
            self._refs_moved(repo, [RefUpdate(ref, old, sha)], pusher=self.bot_login)
        return web.json_response(self._ref_json(repo, ref, sha))

    async def _delete_ref(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        ref = "refs/" + request.match_info["ref"]
        old = self._resolve(repo, ref)
        if old is None:
            raise SimError(422, "Reference does not exist")
        self._git(repo, "update-ref", "-d", ref)
        self._refs_moved(repo, [RefUpdate(ref, old, ZERO_SHA)], pusher=self.bot_login)
        return web.Response(status=204)

    async def _get_branch(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        name = request.match_info["branch"]
        sha = self._branch_sha(repo, name)
        if sha is None:
            raise SimError(404, "Branch not found")
        body = {
            "name": name,
            "commit": self._commit_json(repo, sha),
            "protected": False,
            "_links": {"html": f"{WEB}/{repo.full_name}/tree/{name}"},
        }
        return web.json_response(body)

    async def _get_commit(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        sha = self._resolve(repo, request.match_info["ref"])
        if sha is None:
            raise SimError(422, f"No commit found for SHA: {request.match_info['ref']}")
        return web.json_response(self._commit_json(repo, sha))

    async def _get_content(self, request: web.Request) -> web.Response:
        """A file's content (base64, as GitHub sends it) at `ref` or the default branch; a directory lists."""
        repo = self._repo(request)
        ref = request.query.get("ref") or repo.default_branch
        path = request.match_info["path"].strip("/")
        sha = self._resolve(repo, ref)
        kind = self._git(repo, "cat-file", "-t", f"{sha}:{path}").stdout.strip() if sha else ""
        if kind == "blob":
            blob = subprocess.run(
                ["git", "cat-file", "blob", f"{sha}:{path}"], cwd=repo.path, capture_output=True, check=True
            ).stdout
            return web.json_response(self._content_json(repo, path, "file", len(blob), blob))
        if kind == "tree":
            listing = self._git(repo, "ls-tree", "-l", f"{sha}:{path}").stdout.splitlines()
            entries = [line.split(None, 4) for line in listing]
            return web.json_response(
                [
                    self._content_json(
                        repo,
                        f"{path}/{name}",
                        "dir" if typ == "tree" else "file",
                        int(size) if size != "-" else 0,
                    )
                    for _, typ, _, size, name in entries
                ]
            )
        raise SimError(404, "Not Found")

    def _content_json(
        self, repo: Repo, path: str, kind: str, size: int, blob: bytes | None = None
    ) -> dict[str, Any]:
        found: dict[str, Any] = {
            "type": kind,
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "size": size,
            "url": f"{API}/repos/{repo.full_name}/contents/{path}",
            "html_url": f"{WEB}/{repo.full_name}/blob/{repo.default_branch}/{path}",
        }
        if blob is not None and len(blob) > CONTENTS_MAX_BYTES:  # GitHub's: the raw media type serves it
            found |= {"encoding": "none", "content": ""}
        elif blob is not None:
            encoded = base64.b64encode(blob).decode()
            found |= {
                "encoding": "base64",
                "content": "\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60)) + "\n",
            }
        return found

    # ---------------------------------------------------------------- git smart HTTP

    async def _git_http(self, request: web.Request) -> web.Response:
        """Fetch and push over smart HTTP: `git http-backend` as a CGI, behind GitHub's access rules."""
        repo = self.repos.get(f"{request.match_info['owner']}/{request.match_info['repo']}")
        service = request.match_info.get("service") or request.query.get("service", "")
        push = service == "git-receive-pack"
        try:
            if repo is None:
                raise GitDenied(404, "Repository not found.")
            if service not in GIT_SERVICES:
                raise GitDenied(403, "Please upgrade your git client: only smart HTTP is served.")
            user = self._git_user(request, repo, push=push)
        except GitDenied as exc:
            self._record_git(request, repo.full_name if repo else "", service, exc.status)
            return exc.response()
        body = await request.content.read()
        if not push:
            self._sync_pull_refs(repo)  # also after pushes that bypassed the sim (to `repo_path()`)
        response = await self._http_backend(request, repo, body, user=user, push=push)
        self._record_git(request, repo.full_name, service, response.status)
        if push and user is not None and request.method == "POST":
            self._record_push(repo, _push_commands(body), pusher=user)
        return response

    def _record_git(self, request: web.Request, repo: str, service: str, status: int) -> None:
        token = _git_token(request.headers.get("Authorization", ""))
        grant = self.tokens.get(token) if token is not None else None
        installation = None if token is None else grant[0] if grant is not None else -1
        self.git_requests.append(GitRequest(repo, service, installation, status))

    def _git_user(self, request: web.Request, repo: Repo, *, push: bool) -> str | None:
        """The bot for a token whose installation has the repo, None for an anonymous read; or refuse."""
        token = _git_token(request.headers.get("Authorization", ""))
        if token is None:
            if push or repo.private:
                raise GitDenied(401, "Authentication required.")
            return None
        grant = self.tokens.get(token)
        if grant is None or grant[1] <= self.now():
            raise GitDenied(401, "Invalid username or token.")
        inst = self.installations.get(grant[0])
        if inst is not None and repo.full_name in inst.repos:
            return self.bot_login
        if push:
            raise GitDenied(403, f"Permission to {repo.full_name}.git denied to {self.bot_login}.")
        if repo.private:
            raise GitDenied(404, "Repository not found.")
        return None

    async def _http_backend(
        self, request: web.Request, repo: Repo, body: bytes, *, user: str | None, push: bool
    ) -> web.Response:
        """Run `git http-backend` as a CGI; the Authorization header (the token) never reaches it."""
        config = {**GIT_SERVER_CONFIG, "http.receivepack": "true" if push else "false"}
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env |= {
            "GIT_PROJECT_ROOT": str(self.root / "repos"),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": f"/{repo.full_name}.git/{request.match_info.get('service', 'info/refs')}",
            "REQUEST_METHOD": request.method,
            "QUERY_STRING": request.query_string,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": request.remote or "127.0.0.1",
            "GIT_CONFIG_COUNT": str(len(config)),
        }
        for i, (key, value) in enumerate(config.items()):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
        if user is not None:
            env["REMOTE_USER"] = user
        if "Git-Protocol" in request.headers:
            env["HTTP_GIT_PROTOCOL"] = request.headers["Git-Protocol"]
        if body[:2] == b"\x1f\x8b":  # still gzip: a server that does not inflate request bodies itself
            env["HTTP_CONTENT_ENCODING"] = "gzip"
        with open(self.root / "git-http-backend.log", "ab") as log:
            proc = await asyncio.create_subprocess_exec(
                "git", "http-backend", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env
            )
            out, _ = await proc.communicate(body)
        return _cgi_response(out, proc.returncode)

    def _record_push(self, repo: Repo, requested: list[RefUpdate], *, pusher: str) -> None:
        """Record the updates receive-pack made (it refuses a stale lease or a hidden ref) and react."""
        refs = self._refs(repo)
        done = [u for u in requested if refs.get(u.ref, ZERO_SHA) == u.after]
        self.pushes.extend({"repo": repo.full_name, **u._asdict(), "pusher": pusher} for u in done)
        self._refs_moved(repo, done, pusher=pusher)

    # ---------------------------------------------------------------- issues and pulls

    def _new_number(self, full_name: str) -> int:
        return max(self.issues[full_name], default=0) + 1

    def _issue(self, request: web.Request, repo: Repo, *, pull: bool = False) -> Issue:
        issue = self.issues[repo.full_name].get(int(request.match_info["number"]))
        if issue is None or (pull and not issue.is_pull):
            raise SimError(404, "Not Found")
        return issue

    def open_pull(
        self,
        full_name: str,
        *,
        head: str,
        base: str,
        title: str,
        body: str | None = None,
        user: str | None = None,
        draft: bool = False,
        number: int | None = None,
    ) -> dict[str, Any]:
        """Open a pull request as GitHub would (same validation as the endpoint); returns its REST shape.
        `number` stands for a repository with a longer history (PR #1872); by default the next one."""
        repo = self.repos[full_name]
        owner, _, head_ref = head.rpartition(":")
        outside = self.repos.get(f"{owner}/{repo.name}") if owner and owner != repo.owner else None
        if owner and owner != repo.owner and outside is None:  # `owner:branch` names owner's fork of it
            raise validation_failed({"resource": "PullRequest", "field": "head", "code": "invalid"})
        head_sha, base_sha = self._branch_sha(outside or repo, head_ref), self._branch_sha(repo, base)
        if number is None:
            number = self._new_number(full_name)
        if outside is not None and head_sha is not None:  # GitHub keeps the head's objects in the base repo
            self._git(
                repo, "fetch", "--quiet", str(outside.path), f"+refs/heads/{head_ref}:refs/pull/{number}/head"
            )
        if base_sha is None:
            raise validation_failed({"resource": "PullRequest", "field": "base", "code": "invalid"})
        if head_sha is None:
            raise validation_failed({"resource": "PullRequest", "field": "head", "code": "invalid"})
        for other in self.issues[full_name].values():
            if (
                other.is_pull
                and other.state == "open"
                and (other.head_repo, other.head_ref, other.base_ref)
                == (outside and outside.full_name, head_ref, base)
            ):
                message = f"A pull request already exists for {repo.owner}:{head_ref}."
                raise validation_failed({"resource": "PullRequest", "code": "custom", "message": message})
        if self._is_ancestor(repo, head_sha, base_sha):
            message = f"No commits between {base} and {head_ref}"
            raise validation_failed({"resource": "PullRequest", "code": "custom", "message": message})
        now = _iso(self.now())
        assert number not in self.issues[full_name], f"#{number} exists"
        issue = Issue(number, self._next_id(), title, body, user or self.bot_login, now, is_pull=True)
        issue.head_ref, issue.base_ref, issue.draft = head_ref, base, draft
        issue.head_repo = outside.full_name if outside is not None else None
        self.issues[full_name][number] = issue
        self._sync_pull_refs(repo)
        self._notify_pull(repo, issue, "opened", sender=issue.user)
        return self._pull_json(repo, issue)

    def set_draft(self, full_name: str, number: int, draft: bool, *, user: str) -> None:
        """A person converts the PR to a draft, or marks it ready for review (GitHub does it through GraphQL
        and the web page; REST cannot), with GitHub's `converted_to_draft` / `ready_for_review` event."""
        repo, issue = self.repos[full_name], self.issues[full_name][number]
        issue.draft = draft
        self._notify_pull(repo, issue, "converted_to_draft" if draft else "ready_for_review", sender=user)

    async def _create_pull(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        data = await self._json(request)
        for name in ("head", "base", "title"):
            if not isinstance(data.get(name), str) or not data[name]:
                raise validation_failed({"resource": "PullRequest", "field": name, "code": "missing_field"})
        self._fits("PullRequest", data)
        pull = self.open_pull(
            repo.full_name,
            head=data["head"],
            base=data["base"],
            title=data["title"],
            body=data.get("body"),
            draft=bool(data.get("draft", False)),
        )
        return web.json_response(pull, status=201)

    async def _list_pulls(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        state = request.query.get("state", "open")
        head = request.query.get("head")
        base = request.query.get("base")
        chosen = []
        for issue in sorted(self.issues[repo.full_name].values(), key=lambda i: -i.number):
            if not issue.is_pull or state not in ("all", issue.state):
                continue
            if head is not None and head != f"{repo.owner}:{issue.head_ref}":
                continue
            if base is not None and base != issue.base_ref:
                continue
            chosen.append(issue)
        return self._paginate(request, chosen, render=lambda issue: self._pull_json(repo, issue, listed=True))

    async def _get_pull(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        return web.json_response(self._pull_json(repo, self._issue(request, repo, pull=True)))

    def _set_state(self, repo: Repo, issue: Issue, state: Any) -> None:
        if state not in ("open", "closed"):
            raise validation_failed({"resource": "Issue", "field": "state", "code": "invalid"})
        if issue.merged and state == "open":
            raise SimError(422, "Cannot reopen a merged pull request")
        if state == "closed" and issue.state == "open":
            issue.frozen_head_sha, issue.frozen_base_sha = self._pull_shas(repo, issue)
            issue.closed_at = _iso(self.now())
        elif state == "open":
            issue.closed_at = None
        issue.state = state

    @staticmethod
    def _fits(resource: str, data: dict[str, Any]) -> None:
        """GitHub's 422 for a body over 65,536 characters (issues, PRs, comments; created or edited)."""
        if isinstance(data.get("body"), str) and len(data["body"]) > BODY_MAX_CHARS:
            message = f"body is too long (maximum is {BODY_MAX_CHARS} characters)"
            raise validation_failed(
                {"resource": resource, "field": "body", "code": "custom", "message": message}
            )

    def _edit(self, repo: Repo, issue: Issue, data: dict[str, Any], *, sender: str | None = None) -> None:
        """A PATCH of an issue or PR, by `sender` (default: the App, whose token made the request)."""
        sender = sender or self.bot_login
        self._fits("PullRequest" if issue.is_pull else "Issue", data)
        was = issue.state
        changes = self._pull_changes(repo, issue, data) if issue.is_pull else {}
        if "title" in data:
            issue.title = data["title"]
        if "body" in data:
            issue.body = data["body"]
        if "state" in data:
            self._set_state(repo, issue, data["state"])
        if "labels" in data:
            self.labels[(repo.full_name, issue.number)] = [self._label_name(x) for x in data["labels"]]
        if issue.is_pull and "base" in data:
            if self._branch_sha(repo, data["base"]) is None:
                raise validation_failed({"resource": "PullRequest", "field": "base", "code": "invalid"})
            issue.base_ref = data["base"]
        issue.updated_at = _iso(self.now())
        if changes:  # GitHub: `edited`, with each changed field's value before the edit
            self._notify_pull(repo, issue, "edited", sender=sender, changes=changes)
        if issue.is_pull and issue.state != was:
            self._sync_pull_refs(repo)
            self._notify_pull(repo, issue, "reopened" if issue.state == "open" else "closed", sender=sender)

    def _pull_changes(self, repo: Repo, issue: Issue, data: dict[str, Any]) -> dict[str, Any]:
        """What a PATCH of a PR changes of its title, body and base, as `pull_request` `edited` names it."""
        changes: dict[str, Any] = {
            field: {"from": getattr(issue, field)}
            for field in ("title", "body")
            if field in data and data[field] != getattr(issue, field)
        }
        if "base" in data and data["base"] != issue.base_ref:
            _, base_sha = self._pull_shas(repo, issue)
            changes["base"] = {"ref": {"from": issue.base_ref}, "sha": {"from": base_sha}}
        return changes

    async def _update_pull(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        issue = self._issue(request, repo, pull=True)
        self._edit(repo, issue, await self._json(request))
        return web.json_response(self._pull_json(repo, issue))

    def _pull_range(self, repo: Repo, issue: Issue) -> tuple[str, str]:
        head, base = self._pull_shas(repo, issue)
        if head is None or base is None:
            raise SimError(404, "Not Found")
        if issue.merged and issue.frozen_base_sha:
            return issue.frozen_base_sha, head
        merge_base = self._git(repo, "merge-base", base, head).stdout.strip() or base
        return merge_base, head

    async def _pull_commits(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        base, head = self._pull_range(repo, self._issue(request, repo, pull=True))
        shas = self._log(repo, [head, f"^{base}"])[:PULL_COMMITS_LISTED]  # GitHub lists the first 250 only
        return self._paginate(request, [self._commit_json(repo, sha) for sha in shas])

    async def _pull_files(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        base, head = self._pull_range(repo, self._issue(request, repo, pull=True))
        statuses = {
            "A": "added",
            "D": "removed",
            "M": "modified",
            "R": "renamed",
            "C": "copied",
            "T": "changed",
        }
        numstat = self._git(repo, "diff", "--numstat", "-M", "-z", base, head).stdout
        status_out = self._git(repo, "diff", "--name-status", "-M", "-z", base, head).stdout.split("\0")
        files = []
        i = 0
        counts = self._parse_numstat(numstat)
        while i < len(status_out) - 1:
            code = status_out[i]
            if code[0] in "RC":
                old, new = status_out[i + 1], status_out[i + 2]
                i += 3
            else:
                old = new = status_out[i + 1]
                i += 2
            adds, dels = counts.get(new, (0, 0))
            patch = self._git(repo, "diff", "-M", base, head, "--", *{old, new}).stdout
            entry = {
                "filename": new,
                "status": statuses.get(code[0], "modified"),
                "additions": adds,
                "deletions": dels,
                "changes": adds + dels,
                "patch": "@@" + patch.split("\n@@", 1)[1] if "\n@@" in patch else None,
                "sha": self._git(repo, "rev-parse", f"{head}:{new}").stdout.strip() or None,
            }
            if old != new:
                entry["previous_filename"] = old
            files.append(entry)
        return self._paginate(request, files[:PULL_FILES_LISTED])  # GitHub lists the first 3,000 only

    @staticmethod
    def _parse_numstat(out: str) -> dict[str, tuple[int, int]]:
        parts = out.split("\0")
        counts: dict[str, tuple[int, int]] = {}
        i = 0
        while i < len(parts) - 1:
            adds, dels, path = parts[i].split("\t", 2)
            i += 1
            if path == "":  # rename: the old and new names follow as separate fields
                path = parts[i + 1]
                i += 2
            counts[path] = (int(adds) if adds != "-" else 0, int(dels) if dels != "-" else 0)
        return counts

    async def _pull_merged(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        merged = self._issue(request, repo, pull=True).merged
        return web.Response(status=204 if merged else 404)

    async def _merge_pull(self, request: web.Request) -> web.Response:
        """GitHub's merge button: `sha` pins the head (409 when it moved), 405 when it cannot merge; `merge`
        makes a merge commit, `squash` one commit, `rebase` replays each commit onto the base."""
        repo = self._repo(request)
        issue = self._issue(request, repo, pull=True)
        data = await self._json(request)
        head, base = self._pull_shas(repo, issue)
        if issue.state != "open" or head is None or base is None:
            raise SimError(405, "Pull Request is not mergeable")
        if issue.draft:
            raise SimError(405, "Pull Request is still a draft")
        if data.get("sha") not in (None, head):
            raise SimError(409, "Head branch was modified. Review and try the merge again.")
        method = data.get("merge_method", "merge")
        if method == "rebase":
            new = self._rebase_onto(repo, base, head)
        else:
            new = self._merge_commit(repo, issue, data, base=base, head=head, squash=method == "squash")
        if self._git(repo, "update-ref", f"refs/heads/{issue.base_ref}", new, base).returncode != 0:
            raise SimError(405, BASE_MODIFIED)  # GitHub's answer while the PR's base moves under it
        issue.frozen_head_sha, issue.frozen_base_sha = head, base
        issue.state, issue.merged, issue.merge_commit_sha = "closed", True, new
        issue.merged_at = issue.closed_at = _iso(self.now())
        issue.merged_by = self.bot_login
        self._refs_moved(repo, [RefUpdate(f"refs/heads/{issue.base_ref}", base, new)], pusher=issue.merged_by)
        self._notify_pull(repo, issue, "closed", sender=issue.merged_by)
        return web.json_response({"sha": new, "merged": True, "message": "Pull Request successfully merged"})

    def _merge_commit(
        self, repo: Repo, issue: Issue, data: dict[str, Any], *, base: str, head: str, squash: bool
    ) -> str:
        tree = self._git(repo, "merge-tree", "--write-tree", base, head)
        if tree.returncode != 0:
            raise SimError(405, "Pull Request is not mergeable")
        title = data.get("commit_title") or (
            f"{issue.title} (#{issue.number})"
            if squash
            else f"Merge pull request #{issue.number} from {repo.owner}/{issue.head_ref}"
        )
        message = title + (f"\n\n{data['commit_message']}" if data.get("commit_message") else "")
        parents = ["-p", base] if squash else ["-p", base, "-p", head]
        when = {"GIT_AUTHOR_DATE": _iso(self.now()), "GIT_COMMITTER_DATE": _iso(self.now())}
        sha = self._git(repo, "commit-tree", tree.stdout.split()[0], *parents, "-m", message, env=when)
        return sha.stdout.strip()

    def _rebase_onto(self, repo: Repo, base: str, head: str) -> str:
        """Each commit of base..head replayed onto base, keeping its author and message (GitHub becomes the
        committer); 405 when the PR has a merge commit or a commit does not apply."""
        merge_base = self._git(repo, "merge-base", base, head).stdout.strip()
        onto = base
        for sha in self._log(repo, [head, f"^{merge_base}"]):
            parents = self._git(repo, "rev-list", "--parents", "-n", "1", sha).stdout.split()[1:]
            if len(parents) != 1:
                raise SimError(405, "This branch can't be rebased")
            tree = self._replay_tree(repo, sha, parents[0], onto)
            fmt = self._git(repo, "show", "-s", "--format=%an%x00%ae%x00%aI%x00%B", sha).stdout
            name, email, date, message = fmt.split("\0", 3)
            author = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
            when = {"GIT_COMMITTER_DATE": _iso(self.now())}
            made = self._git(repo, "commit-tree", tree, "-p", onto, "-m", message, env=author | when)
            onto = made.stdout.strip()
        return onto

    def _replay_tree(self, repo: Repo, sha: str, parent: str, onto: str) -> str:
        """The tree of `sha`'s change applied onto `onto`: a three-way merge with `parent` as the base (git
        2.39's merge-tree has no --merge-base, so the base is made the only common ancestor)."""
        root = self._git(repo, "commit-tree", f"{parent}^{{tree}}", "-m", "base").stdout.strip()
        ours = self._git(repo, "commit-tree", f"{onto}^{{tree}}", "-p", root, "-m", "ours").stdout.strip()
        theirs = self._git(repo, "commit-tree", f"{sha}^{{tree}}", "-p", root, "-m", "theirs").stdout.strip()
        merged = self._git(repo, "merge-tree", "--write-tree", ours, theirs)
        if merged.returncode != 0:
            raise SimError(405, "This branch can't be rebased")
        return merged.stdout.split()[0]

    # ---------------------------------------------------------------- reviews and teams

    def review(
        self,
        full_name: str,
        number: int,
        *,
        user: str,
        state: str,
        commit_id: str | None = None,
        body: str = "",
    ) -> dict[str, Any]:
        """A person's submitted review (APPROVED, CHANGES_REQUESTED, COMMENTED) as GitHub records it, with
        its `pull_request_review` webhook; `commit_id` defaults to the PR's head."""
        repo = self.repos[full_name]
        issue = self.issues[full_name][number]
        if state in ("APPROVED", "CHANGES_REQUESTED") and user == issue.user:
            verb = "approve" if state == "APPROVED" else "request changes on"
            raise validation_failed(
                {
                    "resource": "PullRequestReview",
                    "code": "custom",
                    "message": f"Can not {verb} your own pull request",
                }
            )
        head, _ = self._pull_shas(repo, issue)
        review_id = self._next_id()
        review = {
            "id": review_id,
            "node_id": f"PRR_{review_id}",
            "user": _user(user),
            "body": body,
            "state": state,
            "commit_id": commit_id or head,
            "submitted_at": _iso(self.now()) if state != "PENDING" else None,
            "author_association": "MEMBER",
            "html_url": f"{WEB}/{full_name}/pull/{number}#pullrequestreview-{review_id}",
            "pull_request_url": f"{API}/repos/{full_name}/pulls/{number}",
        }
        self.reviews[(full_name, number)].append(review)
        if state != "PENDING" and self._hook is not None:
            self._emit("pull_request_review", self.review_payload(full_name, number, review))
        return review

    def review_payload(self, full_name: str, number: int, review: dict[str, Any]) -> dict[str, Any]:
        """`pull_request_review` `submitted` as GitHub sends it (for rigs that route events themselves)."""
        repo, issue = self.repos[full_name], self.issues[full_name][number]
        return {
            "action": "submitted",
            "review": review | {"state": str(review["state"]).lower()},  # webhooks spell it in lower case
            "pull_request": self._pull_json(repo, issue),
            **self._envelope(full_name, str(review["user"]["login"])),
        }

    async def _list_reviews(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        issue = self._issue(request, repo, pull=True)
        return self._paginate(request, list(self.reviews[(repo.full_name, issue.number)]))

    async def _create_review(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        issue = self._issue(request, repo, pull=True)
        data = await self._json(request)
        states = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}
        event = data.get("event")
        if event is not None and event not in states:
            raise validation_failed({"resource": "PullRequestReview", "field": "event", "code": "invalid"})
        commit_id = data.get("commit_id")
        if commit_id is not None and self._resolve(repo, str(commit_id)) is None:
            raise SimError(422, "Unprocessable Entity: commit_id is not part of the pull request")
        state = states.get(event, "PENDING") if event else "PENDING"
        review = self.review(
            repo.full_name,
            issue.number,
            user=self.bot_login,
            state=state,
            commit_id=commit_id,
            body=data.get("body") or "",
        )
        return web.json_response(review)

    def add_team_member(self, team: str, login: str) -> None:
        """Make `login` an active member of `org/slug` (or `@org/slug`)."""
        self.teams[team.removeprefix("@").lower()].add(login)

    async def _team_membership(self, request: web.Request) -> web.Response:
        org, slug, user = (request.match_info[k] for k in ("org", "team", "user"))
        inst = self.installations.get(request.get(INSTALLATION_ID, -1))
        if inst is None or inst.account.lower() != org.lower():
            raise SimError(404, "Not Found")
        members = {m.lower() for m in self.teams.get(f"{org}/{slug}".lower(), set())}
        if user.lower() not in members:
            raise SimError(404, "Not Found")
        url = f"{API}/orgs/{org}/teams/{slug}/memberships/{user}"
        return web.json_response({"url": url, "role": "member", "state": "active"})

    def open_issue(
        self, full_name: str, *, title: str, body: str | None = None, user: str | None = None
    ) -> int:
        number = self._new_number(full_name)
        issue = Issue(number, self._next_id(), title, body, user or self.bot_login, _iso(self.now()))
        self.issues[full_name][number] = issue
        return number

    async def _create_issue(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        data = await self._json(request)
        if not isinstance(data.get("title"), str) or not data["title"]:
            raise validation_failed({"resource": "Issue", "field": "title", "code": "missing_field"})
        self._fits("Issue", data)
        number = self.open_issue(repo.full_name, title=data["title"], body=data.get("body"))
        if data.get("labels"):
            self.labels[(repo.full_name, number)] = [self._label_name(x) for x in data["labels"]]
        return web.json_response(self._issue_json(repo, self.issues[repo.full_name][number]), status=201)

    async def _list_issues(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        state = request.query.get("state", "open")
        wanted = [x for x in request.query.get("labels", "").split(",") if x]
        creator = request.query.get("creator")
        chosen = [
            self._issue_json(repo, i)
            for i in sorted(self.issues[repo.full_name].values(), key=lambda i: -i.number)
            if state in ("all", i.state)
            and all(w in self.labels.get((repo.full_name, i.number), []) for w in wanted)
            and creator in (None, i.user)
        ]
        return self._paginate(request, chosen)

    async def _get_issue(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        return web.json_response(self._issue_json(repo, self._issue(request, repo)))

    async def _update_issue(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        issue = self._issue(request, repo)
        data = await self._json(request)
        before = {"title": issue.title, "body": issue.body, "state": issue.state}
        self._edit(repo, issue, data)
        if not issue.is_pull:  # an App's own edits come back as webhooks too, as on GitHub
            self._notify_issue(repo, issue, before, sender=self.bot_login)
        return web.json_response(self._issue_json(repo, issue))

    def edit_issue(self, full_name: str, number: int, *, body: str, user: str) -> None:
        """`user` edits the issue's body in the web UI: GitHub stores it and sends `issues` `edited`."""
        repo, issue = self.repos[full_name], self.issues[full_name][number]
        before = {"title": issue.title, "body": issue.body, "state": issue.state}
        issue.body, issue.updated_at = body, _iso(self.now())
        self._notify_issue(repo, issue, before, sender=user)

    def retarget_pull(self, full_name: str, number: int, *, base: str, user: str) -> None:
        """`user` moves the PR onto another base branch in the web UI (GitHub sends `pull_request` `edited`
        with `changes.base`)."""
        self._edit(self.repos[full_name], self.issues[full_name][number], {"base": base}, sender=user)

    def close_issue(self, full_name: str, number: int, *, user: str) -> None:
        """`user` closes the issue in the web UI (GitHub sends `issues` `closed`)."""
        repo, issue = self.repos[full_name], self.issues[full_name][number]
        before = {"title": issue.title, "body": issue.body, "state": issue.state}
        self._set_state(repo, issue, "closed")
        self._notify_issue(repo, issue, before, sender=user)

    def set_labels(self, full_name: str, number: int, labels: list[str]) -> None:
        """A person sets the issue's labels in the web UI. (GitHub sends `issues` `labeled` and `unlabeled`,
        which Sluice does not act on: the sim sends none.)"""
        self.labels[(full_name, number)] = list(labels)

    def _notify_issue(self, repo: Repo, issue: Issue, before: dict[str, Any], *, sender: str) -> None:
        changes = {k: {"from": before[k]} for k in ("title", "body") if before[k] != getattr(issue, k)}
        if changes:
            self._emit(
                "issues",
                self.issues_payload(repo.full_name, issue.number, "edited", sender=sender)
                | {"changes": changes},
            )
        if before["state"] != issue.state:
            action = "reopened" if issue.state == "open" else "closed"
            self._emit("issues", self.issues_payload(repo.full_name, issue.number, action, sender=sender))

    def issues_payload(self, full_name: str, number: int, action: str, *, sender: str) -> dict[str, Any]:
        """An `issues` event payload for a stored issue."""
        issue = self._issue_json(self.repos[full_name], self.issues[full_name][number])
        return {"action": action, "issue": issue, **self._envelope(full_name, sender)}

    # ---------------------------------------------------------------- comments, labels, reactions

    def add_comment(self, full_name: str, number: int, body: str, *, user: str | None = None) -> int:
        """Record a comment as if `user` (default: the bot) posted it; returns its id."""
        now = _iso(self.now())
        comment = Comment(self._next_id(), full_name, number, body, user or self.bot_login, now, now)
        self._comments[comment.id] = comment
        return comment.id

    async def _create_comment(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        issue = self._issue(request, repo)
        data = await self._json(request)
        if not isinstance(data.get("body"), str) or not data["body"]:
            raise validation_failed({"resource": "IssueComment", "field": "body", "code": "missing_field"})
        self._fits("IssueComment", data)
        cid = self.add_comment(repo.full_name, issue.number, data["body"])
        return web.json_response(self._comment_json(self._comments[cid]), status=201)

    async def _list_comments(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        issue = self._issue(request, repo)
        return self._paginate(request, self.comment_objects(repo.full_name, issue.number))

    def _comment(self, request: web.Request) -> Comment:
        repo = self._repo(request)
        comment = self._comments.get(int(request.match_info["id"]))
        if comment is None or comment.full_name != repo.full_name:
            raise SimError(404, "Not Found")
        return comment

    async def _get_comment(self, request: web.Request) -> web.Response:
        return web.json_response(self._comment_json(self._comment(request)))

    async def _update_comment(self, request: web.Request) -> web.Response:
        comment = self._comment(request)
        data = await self._json(request)
        if not isinstance(data.get("body"), str) or not data["body"]:
            raise validation_failed({"resource": "IssueComment", "field": "body", "code": "missing_field"})
        self._fits("IssueComment", data)
        comment.body, comment.updated_at = data["body"], _iso(self.now())
        return web.json_response(self._comment_json(comment))

    async def _delete_comment(self, request: web.Request) -> web.Response:
        del self._comments[self._comment(request).id]
        return web.Response(status=204)

    async def _create_reaction(self, request: web.Request) -> web.Response:
        comment = self._comment(request)
        content = (await self._json(request)).get("content")
        if content not in REACTIONS:
            raise validation_failed({"resource": "Reaction", "field": "content", "code": "invalid"})
        for existing in self.reactions[comment.id]:
            if existing["content"] == content and existing["user"]["login"] == self.bot_login:
                return web.json_response(existing)
        reaction = {"id": self._next_id(), "content": content, "user": _user(self.bot_login)}
        reaction["created_at"] = _iso(self.now())
        self.reactions[comment.id].append(reaction)
        return web.json_response(reaction, status=201)

    @staticmethod
    def _label_name(label: Any) -> str:
        return label["name"] if isinstance(label, dict) else str(label)

    async def _label_input(self, request: web.Request) -> list[str]:
        data = await self._json(request)
        labels = data.get("labels") if isinstance(data, dict) else data
        if not isinstance(labels, list):
            raise validation_failed({"resource": "Label", "field": "labels", "code": "invalid"})
        return [self._label_name(x) for x in labels]

    async def _add_labels(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        issue = self._issue(request, repo)
        current = self.labels[(repo.full_name, issue.number)]
        current.extend(n for n in await self._label_input(request) if n not in current)
        return web.json_response(self._labels_json(repo.full_name, issue.number))

    async def _set_labels(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        issue = self._issue(request, repo)
        self.labels[(repo.full_name, issue.number)] = list(dict.fromkeys(await self._label_input(request)))
        return web.json_response(self._labels_json(repo.full_name, issue.number))

    async def _list_labels(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        issue = self._issue(request, repo)
        return self._paginate(request, self._labels_json(repo.full_name, issue.number))

    async def _remove_label(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        issue = self._issue(request, repo)
        current = self.labels[(repo.full_name, issue.number)]
        name = request.match_info["name"]
        if name not in current:
            raise SimError(404, "Label does not exist")
        current.remove(name)
        return web.json_response(self._labels_json(repo.full_name, issue.number))

    # ---------------------------------------------------------------- check runs

    def _check_run(self, request: web.Request) -> dict[str, Any]:
        repo = self._repo(request)
        wanted = int(request.match_info["id"])
        for run in self.check_runs[repo.full_name]:
            if run["id"] == wanted:
                return run
        raise SimError(404, "Not Found")

    def _apply_check_fields(self, run: dict[str, Any], data: dict[str, Any]) -> None:
        for key in ("name", "details_url", "external_id", "started_at", "completed_at", "actions"):
            if key in data:
                run[key] = data[key]
        if "output" in data:
            run["output"] = {**run.get("output", {}), **data["output"]}
            run["output"]["annotations_count"] = len(data["output"].get("annotations", []))
        if "status" in data:
            if data["status"] not in (
                "queued",
                "in_progress",
                "completed",
                "waiting",
                "requested",
                "pending",
            ):
                raise validation_failed({"resource": "CheckRun", "field": "status", "code": "invalid"})
            if run["status"] != "completed":  # GitHub never takes a completed run back (its conclusion stays)
                run["status"] = data["status"]
        if data.get("conclusion") is not None:
            run["conclusion"], run["status"] = data["conclusion"], "completed"
        if run["status"] == "completed":
            if run.get("conclusion") is None:
                message = "conclusion is required when status is completed"
                raise validation_failed({"resource": "CheckRun", "code": "custom", "message": message})
            run["completed_at"] = run.get("completed_at") or _iso(self.now())

    async def _create_check_run(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        data = await self._json(request)
        if not data.get("name") or not data.get("head_sha"):
            field_name = "name" if not data.get("name") else "head_sha"
            raise validation_failed({"resource": "CheckRun", "field": field_name, "code": "missing_field"})
        if self._resolve(repo, data["head_sha"]) is None:
            raise SimError(422, "No commit found for SHA: " + data["head_sha"])
        run_id = self._next_id()
        run: dict[str, Any] = {
            "id": run_id,
            "node_id": f"CR_{run_id}",
            "head_sha": data["head_sha"],
            "status": "queued",
            "conclusion": None,
            "started_at": _iso(self.now()),
            "completed_at": None,
            "output": {"title": None, "summary": None, "text": None, "annotations_count": 0},
            "app": {"id": self.app_id, "slug": "sluice"},
            "html_url": f"{WEB}/{repo.full_name}/runs/{run_id}",
            "url": f"{API}/repos/{repo.full_name}/check-runs/{run_id}",
            "details_url": None,
            "external_id": "",
        }
        self._apply_check_fields(run, data)
        self.check_runs[repo.full_name].append(run)
        if run["status"] == "completed":
            self._check_run_completed(repo, run)
        return web.json_response(run, status=201)

    async def _get_check_run(self, request: web.Request) -> web.Response:
        return web.json_response(self._check_run(request))

    async def _update_check_run(self, request: web.Request) -> web.Response:
        run = self._check_run(request)
        updated = json.loads(json.dumps(run))
        self._apply_check_fields(updated, await self._json(request))
        was = run["status"]
        run.update(updated)
        if run["status"] == "completed" and was != "completed":
            self._check_run_completed(self._repo(request), run)
        return web.json_response(run)

    def finish_check(self, full_name: str, sha: str, name: str, conclusion: str) -> dict[str, Any]:
        """Complete the latest check run `name` on `sha` (a new one when there is none), as a tier's runner
        does through the API, with the `check_run` webhook."""
        repo = self.repos[full_name]
        runs = [r for r in self.check_runs[full_name] if r["head_sha"] == sha and r["name"] == name]
        if runs:
            run = runs[-1]
        else:
            run = {
                "id": self._next_id(),
                "name": name,
                "head_sha": sha,
                "output": {},
                "started_at": _iso(self.now()),
            }
            run |= {"app": {"id": self.app_id, "slug": "sluice"}, "details_url": None, "external_id": ""}
            run |= {"html_url": f"{WEB}/{full_name}/runs/{run['id']}", "node_id": f"CR_{run['id']}"}
            self.check_runs[full_name].append(run)
        run |= {"status": "completed", "conclusion": conclusion, "completed_at": _iso(self.now())}
        self._check_run_completed(repo, run)
        self._start_hook_worker()
        return run

    def _check_run_completed(self, repo: Repo, run: dict[str, Any]) -> None:
        """The `check_run` `completed` webhook, naming the open PRs whose head is the run's commit (only the
        `completed` action is sent: Sluice acts on no other)."""
        if self._hook is not None:
            self._emit("check_run", self.check_run_completed_payload(repo.full_name, run))

    def check_run_completed_payload(self, full_name: str, run: dict[str, Any]) -> dict[str, Any]:
        """`check_run` `completed` as GitHub sends it (for rigs that route events themselves): its
        `pull_requests` name the open PRs on its head from branches of the repository itself (GitHub leaves
        out a PR whose head is in another repository)."""
        repo = self.repos[full_name]
        pulls = []
        for issue in self._open_pulls(repo):
            head, base = self._pull_shas(repo, issue)
            if head == run["head_sha"] and issue.head_repo is None:
                pulls.append(
                    {
                        "number": issue.number,
                        "id": issue.id,
                        "url": f"{API}/repos/{repo.full_name}/pulls/{issue.number}",
                        "head": {"ref": issue.head_ref, "sha": head},
                        "base": {"ref": issue.base_ref, "sha": base},
                    }
                )
        payload = {"action": "completed", "check_run": run | {"pull_requests": pulls}}
        return payload | self._envelope(repo.full_name, self.bot_login)

    async def _list_check_runs(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        sha = self._resolve(repo, request.match_info["ref"])
        if sha is None:
            raise SimError(422, f"No commit found for SHA: {request.match_info['ref']}")
        runs = [r for r in reversed(self.check_runs[repo.full_name]) if r["head_sha"] == sha]
        if "check_name" in request.query:
            runs = [r for r in runs if r["name"] == request.query["check_name"]]
        if "status" in request.query:
            runs = [r for r in runs if r["status"] == request.query["status"]]
        if "app_id" in request.query:  # as GitHub: only the check runs that App created
            runs = [r for r in runs if str((r.get("app") or {}).get("id")) == request.query["app_id"]]
        if request.query.get("filter", "latest") == "latest":
            latest: dict[str, dict[str, Any]] = {}
            for run in runs:  # newest first, so the first run per name wins
                latest.setdefault(run["name"], run)
            runs = list(latest.values())
        return self._paginate(request, runs, wrap="check_runs")

    # ---------------------------------------------------------------- collaborators and actions

    async def _permission(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        user = request.match_info["user"]
        # As GitHub: anyone may read a public repository, so a user with no grant there has "read".
        permission = self.permissions.get((repo.full_name, user), "none" if repo.private else "read")
        legacy = {"maintain": "write", "triage": "read"}.get(permission, permission)
        body = {"permission": legacy, "role_name": permission, "user": _user(user)}
        return web.json_response(body)

    async def _dispatch(self, request: web.Request) -> web.Response:
        """As GitHub: 404 when the workflow file is not on `ref`; 422 for an undeclared input, a missing
        required one or a non-numeric `number`; 200 with the run's id for `return_run_details`, else 204."""
        repo = self._repo(request)
        data = await self._json(request)
        ref = data.get("ref")
        sha = self._resolve(repo, ref) if isinstance(ref, str) else None
        if sha is None:
            raise SimError(422, f"No ref found for: {ref}")
        inputs = data.get("inputs") or {}
        if not isinstance(inputs, dict) or len(inputs) > 25:
            raise SimError(422, "inputs must be an object with at most 25 properties")
        workflow = request.match_info["workflow"]
        declared = self._workflow_file(repo, sha, workflow)
        self._check_inputs(declared, inputs)
        self.dispatches[repo.full_name].append({"workflow": workflow, "ref": ref, "inputs": inputs})
        run = self._new_run(repo, workflow, ref, sha, title=self._run_name(declared, workflow, inputs))
        run["inputs"] = inputs  # not in GitHub's run JSON: what a test acting as the runner reads
        self.workflow_runs[repo.full_name].append(run)
        if data.get("return_run_details") and self.run_details:
            api_url = f"{API}/repos/{repo.full_name}/actions/runs/{run['id']}"
            details = {"workflow_run_id": run["id"], "run_url": api_url, "html_url": run["html_url"]}
            return web.json_response(details, status=200)
        return web.Response(status=204)

    def _workflow_file(self, repo: Repo, sha: str, workflow: str) -> dict[str, Any]:
        import yaml

        path = f".github/workflows/{workflow}"
        shown = self._git(repo, "show", f"{sha}:{path}")
        if shown.returncode != 0:
            raise SimError(404, "Not Found")
        parsed = yaml.safe_load(shown.stdout) or {}
        triggers = parsed.get("on", parsed.get(True)) or {}  # YAML 1.1 reads a bare `on` as True
        if not isinstance(triggers, dict) or "workflow_dispatch" not in triggers:
            raise SimError(422, "Workflow does not have 'workflow_dispatch' trigger")
        return {
            "run-name": parsed.get("run-name"),
            "inputs": (triggers["workflow_dispatch"] or {}).get("inputs") or {},
        }

    @staticmethod
    def _check_inputs(declared: dict[str, Any], inputs: dict[str, Any]) -> None:
        known = declared["inputs"]
        unexpected = sorted(set(inputs) - set(known))
        if unexpected:
            raise SimError(422, f"Unexpected inputs provided: {json.dumps(unexpected)}")
        for name, spec in known.items():
            if (spec or {}).get("required") and name not in inputs:
                raise SimError(422, f"Required input '{name}' not provided")
            if name in inputs and (spec or {}).get("type") == "number":
                try:
                    float(str(inputs[name]))
                except ValueError:
                    raise SimError(
                        422, f"Provided value '{inputs[name]}' for input '{name}' not a number"
                    ) from None

    @staticmethod
    def _run_name(declared: dict[str, Any], workflow: str, inputs: dict[str, Any]) -> str:
        template = declared["run-name"]
        if not isinstance(template, str):
            return workflow
        return re.sub(
            r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}", lambda m: str(inputs.get(m[1], "")), template
        )

    def _new_run(self, repo: Repo, workflow: str, ref: str, sha: str, *, title: str) -> dict[str, Any]:
        run_id = self._next_id()
        return {
            "id": run_id,
            "name": workflow,
            "display_title": title,
            "path": f".github/workflows/{workflow}",
            "event": "workflow_dispatch",
            "head_branch": ref.removeprefix("refs/heads/"),
            "head_sha": sha,
            "status": "queued",
            "conclusion": None,
            "run_attempt": 1,
            "created_at": _iso(self.now()),
            "updated_at": _iso(self.now()),
            "html_url": f"{WEB}/{repo.full_name}/actions/runs/{run_id}",
            "artifacts_url": f"{API}/repos/{repo.full_name}/actions/runs/{run_id}/artifacts",
        }

    def finish_run(
        self,
        full_name: str,
        run_id: int,
        conclusion: str,
        *,
        artifact: tuple[str, dict[str, str | bytes]] | None = None,
    ) -> None:
        """Complete a workflow run (with the artifact it uploaded, if any) and send `workflow_run` completed,
        as GitHub does when the last job ends."""
        run = next(r for r in self.workflow_runs[full_name] if r["id"] == run_id)
        if artifact is not None:
            self.add_artifact(full_name, run_id, artifact[0], artifact[1])
        run["status"], run["conclusion"], run["updated_at"] = "completed", conclusion, _iso(self.now())
        self._emit("workflow_run", self.workflow_run_payload(full_name, run_id, "completed"))

    def rerun_workflow(self, full_name: str, run_id: int) -> dict[str, Any]:
        """A person's "Re-run jobs" in the Actions UI: the same run again, as its next attempt."""
        run = next(r for r in self.workflow_runs[full_name] if r["id"] == run_id)
        run["run_attempt"] += 1
        run["status"], run["conclusion"], run["updated_at"] = "queued", None, _iso(self.now())
        return run

    def workflow_run_payload(self, full_name: str, run_id: int, action: str) -> dict[str, Any]:
        run = next(r for r in self.workflow_runs[full_name] if r["id"] == run_id)
        shown = {k: v for k, v in run.items() if k != "inputs"}
        workflow = {
            "id": abs(hash(run["path"])) % 10**8,
            "name": run["name"],
            "path": run["path"],
            "state": "active",
        }
        return {
            "action": action,
            "workflow_run": shown,
            "workflow": workflow,
            **self._envelope(full_name, None),
        }

    def check_run_payload(
        self, full_name: str, check_run_id: int, *, identifier: str, sender: str
    ) -> dict[str, Any]:
        """`check_run` `requested_action`: a person pressed one of the check run's buttons."""
        run = next(r for r in self.check_runs[full_name] if r["id"] == check_run_id)
        return {
            "action": "requested_action",
            "check_run": run,
            "requested_action": {"identifier": identifier},
            **self._envelope(full_name, sender),
        }

    def rerequest_payload(self, full_name: str, check_run_id: int, *, sender: str) -> dict[str, Any]:
        """`check_run` `rerequested`: a person pressed GitHub's own Re-run on the App's check run."""
        run = next(r for r in self.check_runs[full_name] if r["id"] == check_run_id)
        completed = self.check_run_completed_payload(full_name, run)  # with the PRs it names
        return {
            "action": "rerequested",
            "check_run": completed["check_run"],
            **self._envelope(full_name, sender),
        }

    def suite_rerequest_payload(self, full_name: str, head_sha: str, *, sender: str) -> dict[str, Any]:
        """`check_suite` `rerequested`: "Re-run all checks" on the App's suite of `head_sha`."""
        runs = [r for r in self.check_runs[full_name] if r["head_sha"] == head_sha]
        suite = {
            "id": 5_000_000 + (runs[0]["id"] if runs else 0),
            "head_sha": head_sha,
            "status": "completed",
            "latest_check_runs_count": len(runs),
            "pull_requests": self.check_run_completed_payload(full_name, runs[-1])["check_run"][
                "pull_requests"
            ]
            if runs
            else [],
            "app": {"id": self.app_id},
        }
        return {"action": "rerequested", "check_suite": suite, **self._envelope(full_name, sender)}

    async def _list_runs(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        runs = list(reversed(self.workflow_runs[repo.full_name]))
        for key in ("event", "status", "head_sha", "branch"):
            if key in request.query:
                field_name = "head_branch" if key == "branch" else key
                runs = [r for r in runs if r[field_name] == request.query[key]]
        if "created" in request.query:
            within = _created_range(request.query["created"])
            runs = [r for r in runs if within(_parse_iso(r["created_at"]))]
        return self._paginate(request, runs, wrap="workflow_runs")

    async def _get_run(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        for run in self.workflow_runs[repo.full_name]:
            if run["id"] == int(request.match_info["id"]):
                return web.json_response(run)
        raise SimError(404, "Not Found")

    def add_artifact(
        self, full_name: str, run_id: int, name: str, files: dict[str, str | bytes], *, expired: bool = False
    ) -> int:
        """Attach an artifact (a zip of `files`) to a workflow run, as `actions/upload-artifact` does."""
        run = next(r for r in self.workflow_runs[full_name] if r["id"] == run_id)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path, content in files.items():
                archive.writestr(path, content)
        artifact_id = self._next_id()
        self.artifacts[full_name].append(
            {
                "id": artifact_id,
                "node_id": f"MDg6QXJ0aWZhY3Q{artifact_id}",
                "name": name,
                "size_in_bytes": len(buffer.getvalue()),
                "url": f"{API}/repos/{full_name}/actions/artifacts/{artifact_id}",
                "archive_download_url": f"{API}/repos/{full_name}/actions/artifacts/{artifact_id}/zip",
                "expired": expired,
                "created_at": _iso(self.now()),
                "expires_at": _iso(self.now() + dt.timedelta(days=90)),
                "updated_at": _iso(self.now()),
                "workflow_run": {
                    "id": run_id,
                    "head_sha": run["head_sha"],
                    "head_branch": run["head_branch"],
                },
            }
        )
        self._artifact_zips[artifact_id] = (buffer.getvalue(), secrets.token_hex(16))
        return artifact_id

    def _artifact(self, request: web.Request) -> dict[str, Any]:
        repo = self._repo(request)
        wanted = int(request.match_info["id"])
        for artifact in self.artifacts[repo.full_name]:
            if artifact["id"] == wanted:
                return artifact
        raise SimError(404, "Not Found")

    async def _list_artifacts(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        run_id = int(request.match_info["id"])
        if not any(r["id"] == run_id for r in self.workflow_runs[repo.full_name]):
            raise SimError(404, "Not Found")
        chosen = [a for a in self.artifacts[repo.full_name] if a["workflow_run"]["id"] == run_id]
        if "name" in request.query:
            chosen = [a for a in chosen if a["name"] == request.query["name"]]
        return self._paginate(request, chosen, wrap="artifacts")

    async def _get_artifact(self, request: web.Request) -> web.Response:
        return web.json_response(self._artifact(request))

    async def _download_artifact(self, request: web.Request) -> web.Response:
        """302 to a short-lived signed URL, as GitHub answers; an expired artifact is 410 Gone."""
        artifact = self._artifact(request)
        if artifact["expired"]:
            raise SimError(410, "Artifact has expired")
        _, signature = self._artifact_zips[artifact["id"]]
        location = str(request.url.with_path(f"/_blobs/artifacts/{artifact['id']}").with_query(sig=signature))
        return web.Response(status=302, headers={"Location": location})

    async def _artifact_blob(self, request: web.Request) -> web.Response:
        stored = self._artifact_zips.get(int(request.match_info["id"]))
        if stored is None or not hmac.compare_digest(request.query.get("sig", ""), stored[1]):
            return web.Response(status=403, text="AuthenticationFailed: the signature does not match")
        return web.Response(body=stored[0], content_type="application/zip")

    # ---------------------------------------------------------------- the App's webhook delivery log

    def hook_attempts(self, guid: str | None = None) -> list[HookAttempt]:
        """The delivery log, oldest first; only the attempts of event `guid` when given."""
        return [a for a in self.hook_log if guid is None or a.guid == guid]

    def _hook_attempt(
        self,
        url: str,
        secret: str | bytes,
        event: str,
        payload: dict[str, Any],
        headers: dict[str, str],
        *,
        redelivery: bool,
    ) -> HookAttempt:
        installation, repository = payload.get("installation") or {}, payload.get("repository") or {}
        return HookAttempt(
            id=0,  # numbered when logged, in the order attempts end
            guid=headers["X-GitHub-Delivery"],
            delivered_at=self.now(),
            redelivery=redelivery,
            duration=0.0,
            status="",
            status_code=0,
            event=event,
            action=payload.get("action"),
            installation_id=installation.get("id"),
            repository_id=repository.get("id"),
            url=url,
            secret=secret.decode() if isinstance(secret, bytes) else secret,
            request_headers=dict(headers),
            payload=payload,
        )

    def _log_hook_attempt(
        self, attempt: HookAttempt, *, status: int | None = None, error: BaseException | None = None
    ) -> None:
        # GitHub's texts; a receiver that could not be reached is logged as the schema's example shows it
        if isinstance(error, TimeoutError):
            attempt.status, attempt.status_code = "timed out", 504
        elif error is not None:
            attempt.status, attempt.status_code = "failed to connect to host", 502
        else:
            assert status is not None
            attempt.status = "OK" if 200 <= status < 300 else f"Invalid HTTP Response: {status}"
            attempt.status_code = status
        attempt.duration = round((self.now() - attempt.delivered_at).total_seconds(), 2)
        attempt.id = 12_000_000_000 + len(self.hook_log) + 1
        self.hook_log.append(attempt)

    def _hook_attempt_json(self, attempt: HookAttempt, *, full: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": attempt.id,
            "guid": attempt.guid,
            "delivered_at": _iso(attempt.delivered_at),
            "redelivery": attempt.redelivery,
            "duration": attempt.duration,
            "status": attempt.status,
            "status_code": attempt.status_code,
            "event": attempt.event,
            "action": attempt.action,
            "installation_id": attempt.installation_id,
            "repository_id": attempt.repository_id,
            "throttled_at": None,
        }
        if full:
            out["url"] = attempt.url
            out["request"] = {"headers": attempt.request_headers, "payload": attempt.payload}
            out["response"] = {"headers": attempt.response_headers, "payload": attempt.response_body}
        return out

    def _hook_log_entry(self, request: web.Request) -> HookAttempt:
        wanted = int(request.match_info["id"])
        for attempt in self.hook_log:
            if attempt.id == wanted:
                return attempt
        raise SimError(404, "Not Found")

    async def _list_hook_deliveries(self, request: web.Request) -> web.Response:
        """Newest first, paged by an opaque cursor (Link: rel="next"), as GitHub pages this log."""
        try:
            per_page = max(1, min(100, int(request.query.get("per_page", "30"))))
        except ValueError as exc:
            raise SimError(400, "Bad Request") from exc
        cursor = request.query.get("cursor")
        match = HOOK_CURSOR.match(cursor) if cursor is not None else None
        if cursor is not None and match is None:
            raise SimError(400, "Bad Request")
        entries = sorted(self.hook_log, key=lambda a: a.id, reverse=True)
        if match is not None:
            entries = [a for a in entries if a.id <= int(match[1])]
        wanted = request.query.get("status")
        if wanted in ("success", "failure"):
            ok = range(200, 400) if wanted == "success" else range(400, 600)
            entries = [a for a in entries if a.status_code in ok]
        response = web.json_response([self._hook_attempt_json(a) for a in entries[:per_page]])
        if len(entries) > per_page:
            query = {**request.query, "per_page": str(per_page), "cursor": f"v1_{entries[per_page].id}"}
            response.headers["Link"] = f'<{request.url.with_query(query)}>; rel="next"'
        return response

    async def _get_hook_delivery(self, request: web.Request) -> web.Response:
        return web.json_response(self._hook_attempt_json(self._hook_log_entry(request), full=True))

    async def _redeliver_hook(self, request: web.Request) -> web.Response:
        """Send the attempt's payload again under its GUID (after answering 202), to the hook's URL now."""
        attempt = self._hook_log_entry(request)
        if self.now() - attempt.delivered_at > HOOK_REDELIVERY_WINDOW:
            message = "Deliveries older than 3 days cannot be redelivered"
            raise validation_failed({"resource": "HookDelivery", "code": "custom", "message": message})
        url, secret = self._hook or (attempt.url, attempt.secret)
        delivery = HookDelivery(url, secret, attempt.event, attempt.payload, attempt.guid)
        held = HELD_HOOKS.get()
        if held is not None:
            held.append(delivery)
        else:
            self._queue_hooks([delivery])
        return web.json_response({}, status=202)

    # ---------------------------------------------------------------- webhooks

    async def deliver(
        self,
        url: str,
        event: str,
        payload: dict[str, Any],
        *,
        secret: str | bytes,
        delivery_id: str | None = None,
        redelivery: bool = False,
    ) -> int:
        """POST a webhook exactly as GitHub does and log the attempt; returns the receiver's status."""
        body = json.dumps(payload, separators=(",", ":")).encode()
        key = secret.encode() if isinstance(secret, str) else secret
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/a1b2c3d",
            "Accept": "*/*",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
            "X-GitHub-Hook-ID": "424242",
            "X-GitHub-Hook-Installation-Target-ID": str(self.app_id),
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-Hub-Signature": "sha1=" + hmac.new(key, body, hashlib.sha1).hexdigest(),
            "X-Hub-Signature-256": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest(),
        }
        attempt = self._hook_attempt(url, secret, event, payload, headers, redelivery=redelivery)
        timeout = aiohttp.ClientTimeout(total=self.hook_timeout_s)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(url, data=body, headers=headers) as resp,
            ):
                status = resp.status
                attempt.response_headers, attempt.response_body = dict(resp.headers), await resp.text()
        except (aiohttp.ClientError, OSError) as exc:
            self._log_hook_attempt(attempt, error=exc)
            raise
        self._log_hook_attempt(attempt, status=status)
        self.deliveries.append(
            {"event": event, "delivery_id": headers["X-GitHub-Delivery"], "status": status}
        )
        return status

    def _emit(self, event: str, payload: dict[str, Any]) -> None:
        """Queue a webhook for the `hook()` target; raised inside a request, it waits for the response."""
        if self._hook is None:
            return
        delivery = HookDelivery(*self._hook, event, payload)
        held = HELD_HOOKS.get()
        if held is not None:
            held.append(delivery)
        else:
            self._queue_hooks([delivery])

    def _notify_pull(self, repo: Repo, issue: Issue, action: str, *, sender: str, **extra: Any) -> None:
        if self._hook is not None:
            payload = self.pull_request_payload(repo.full_name, issue.number, action, sender=sender)
            self._emit("pull_request", payload | extra)

    def _queue_hooks(self, deliveries: list[HookDelivery]) -> None:
        for delivery in deliveries:
            self._outbox.put_nowait(delivery)
        self._start_hook_worker()

    def _start_hook_worker(self) -> None:
        if self._outbox.empty() or (self._hook_worker is not None and not self._hook_worker.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # queued by synchronous code: the next event in a loop, or drain_hooks(), sends it
        self._hook_worker = loop.create_task(self._deliver_hooks())

    async def _deliver_hooks(self) -> None:
        """Deliver the queued webhooks one at a time, in order; ends when the queue is empty."""
        while not self._outbox.empty():
            url, secret, event, payload, guid = self._outbox.get_nowait()
            delivery_id = guid or str(uuid.uuid4())
            try:
                await self.deliver(
                    url, event, payload, secret=secret, delivery_id=delivery_id, redelivery=guid is not None
                )
            except (aiohttp.ClientError, OSError):  # GitHub records a failed delivery and goes on
                self.deliveries.append({"event": event, "delivery_id": delivery_id, "status": 0})
            finally:
                self._outbox.task_done()

    def _installation_stub(self, full_name: str) -> dict[str, Any] | None:
        for inst in self.installations.values():
            if full_name in inst.repos:
                return {"id": inst.id, "node_id": f"MDIz_{inst.id}"}
        return None

    def _envelope(self, full_name: str, sender: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "repository": self._repo_json(self.repos[full_name]),
            "sender": _user(sender or self.bot_login),
        }
        installation = self._installation_stub(full_name)
        if installation:
            out["installation"] = installation
        return out

    def push_payload(
        self, full_name: str, ref: str, before: str, after: str, *, pusher: str = "octocat"
    ) -> dict[str, Any]:
        """A `push` event payload whose commits come from the real repository."""
        repo = self.repos[full_name]
        deleted = after == ZERO_SHA
        if deleted:
            shas: list[str] = []
        elif before == ZERO_SHA:
            others = [
                b for b in self._git(repo, "for-each-ref", "--format=%(refname)", "refs/heads").stdout.split()
            ]
            shas = self._log(repo, [after, *(f"^{o}" for o in others if o != ref)])[-PUSH_COMMITS_LISTED:]
        else:
            shas = self._log(repo, [after, f"^{before}"])[-PUSH_COMMITS_LISTED:]
        commits = [self._push_commit(repo, sha) for sha in shas]
        forced = not deleted and before != ZERO_SHA and not self._is_ancestor(repo, before, after)
        peeled = None if deleted else self._resolve(repo, after) or after  # an annotated tag names its commit
        head_commit = (
            commits[-1] if commits else (None if peeled is None else self._push_commit(repo, peeled))
        )
        return {
            "ref": ref,
            "before": before,
            "after": after,
            "created": before == ZERO_SHA,
            "deleted": deleted,
            "forced": forced,
            "base_ref": None,
            "compare": f"{WEB}/{full_name}/compare/{before[:12]}...{after[:12]}",
            "commits": commits,
            "head_commit": head_commit,
            "pusher": {"name": pusher, "email": f"{pusher}@users.noreply.github.com"},
            **self._envelope(full_name, pusher),
        }

    def _push_commit(self, repo: Repo, sha: str) -> dict[str, Any]:
        c = self._commit_json(repo, sha)["commit"]
        changes = self._git(repo, "diff-tree", "--root", "--no-commit-id", "--name-status", "-r", sha).stdout
        files: dict[str, list[str]] = {"A": [], "D": [], "M": []}
        for line in changes.splitlines():
            code, _, path = line.partition("\t")
            files.setdefault(code[:1], []).append(path)
        return {
            "id": sha,
            "tree_id": c["tree"]["sha"],
            "distinct": True,
            "message": c["message"],
            "timestamp": c["committer"]["date"],
            "url": f"{WEB}/{repo.full_name}/commit/{sha}",
            "author": {**c["author"], "username": None},
            "committer": {**c["committer"], "username": None},
            "added": files["A"],
            "removed": files["D"],
            "modified": files["M"],
        }

    def pull_request_payload(
        self,
        full_name: str,
        number: int,
        action: str,
        *,
        sender: str | None = None,
        label: str | None = None,
    ) -> dict[str, Any]:
        repo = self.repos[full_name]
        out: dict[str, Any] = {
            "action": action,
            "number": number,
            "pull_request": self._pull_json(repo, self.issues[full_name][number]),
            **self._envelope(full_name, sender),
        }
        if label is not None:
            out["label"] = {"name": label, "color": "ededed"}
        return out

    def issue_comment_payload(
        self, full_name: str, comment_id: int, *, action: str = "created"
    ) -> dict[str, Any]:
        """An `issue_comment` payload for a stored comment (see `add_comment`)."""
        comment = self._comments[comment_id]
        repo = self.repos[full_name]
        issue = self._issue_json(repo, self.issues[full_name][comment.number])
        return {
            "action": action,
            "issue": issue,
            "comment": self._comment_json(comment),
            **self._envelope(full_name, comment.user),
        }

    def app_jwt(self, *, now: dt.datetime | None = None) -> str:
        """A valid App JWT (only when the sim generated its own key)."""
        assert self.private_key_pem is not None, "the sim was given a public key; sign with your private key"
        issued = int((now or self.now()).timestamp()) - 30
        claims = {"iat": issued, "exp": issued + 540, "iss": str(self.app_id)}
        return jwt.encode(claims, self.private_key_pem, algorithm="RS256")
