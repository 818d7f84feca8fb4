"""Errors: which ones a retry can help, a remedy on every raise, and what the worker does with each."""

from __future__ import annotations

import ast
import datetime as dt
import importlib
import importlib.metadata
import inspect
import pkgutil
import tomllib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import gidgethub
import pytest
from gidgethub import sansio
from gidgethub.abc import GitHubAPI as AbstractGitHubAPI
from gidgethub.aiohttp import GitHubAPI as PlainGitHubAPI
from packaging.requirements import Requirement
from sqlalchemy import select

import bot
import handlers
from bot.app.clock import utc_now
from bot.app.context import Context
from bot.app.intake import DatabaseBusy
from bot.app.worker import MAX_ATTEMPTS, Rejected, Worker, is_permanent
from bot.core.command_args import CommandRefused
from bot.core.config import ConfigError
from bot.core.errors import (
    BadInput,
    ConfigRefused,
    DispatchRefused,
    Forbidden,
    GitAuthRejected,
    GitError,
    GitTransportError,
    MergeRefused,
    NotFound,
    RateLimited,
    SluiceError,
    TooLarge,
    Unavailable,
    first_line,
    redact,
)
from bot.core.upstream_access import UpstreamRefused
from bot.core.webhooks import MalformedBody, RejectedPayload
from bot.db.jobs import Job, JobQueue, JobState, jobs
from bot.db.registry import Registry
from bot.db.store import Store
from bot.demo import SandboxError
from bot.git.mirror import CredentialsNeeded
from bot.git.repo import MissingObject
from bot.github.client import (
    GitHubClient,
    GitHubDown,
    GitHubError,
    GitHubForbidden,
    GitHubNotFound,
    GitHubRateLimited,
    GitHubUnreachable,
    InstallationGone,
    _PolicedAPI,
    github_failure,
)
from handlers import ROUTES
from handlers.commands.cherry_pick import NoSuchPull, Unmerged
from handlers.ingest import ModelUnusable
from tests.support.github_sim import GitHubSim
from tests.support.rig import serve_sim, sim_with_fork

UPSTREAM = "triton-lang/triton"
FORK = "meta/triton"
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
LEASE = dt.timedelta(minutes=5)
ROOT = Path(__file__).resolve().parent.parent

# Every SluiceError in bot/ and handlers/, and whether a job that failed with it is tried again.
TAXONOMY: list[tuple[type[SluiceError], bool]] = [
    (SluiceError, False),
    (BadInput, False),
    (ConfigRefused, False),
    (NotFound, False),
    (Forbidden, False),
    (Unavailable, True),
    (RateLimited, True),
    (GitError, False),
    (GitTransportError, True),
    (GitAuthRejected, True),
    (CredentialsNeeded, True),
    (MissingObject, False),
    (ConfigError, False),
    (UpstreamRefused, False),
    (RejectedPayload, False),
    (MalformedBody, False),
    (GitHubError, False),
    (GitHubUnreachable, True),
    (GitHubDown, True),
    (MergeRefused, False),
    (GitHubRateLimited, True),
    (GitHubNotFound, False),
    (GitHubForbidden, False),
    (InstallationGone, False),
    (DispatchRefused, False),  # a tier workflow GitHub will not start: shown on the check run, not retried
    (TooLarge, False),  # a tier artifact over the limit: the run fails, saying so; the same one stays too big
    (CommandRefused, False),  # a slash command refused (role, arguments): the reply says why, never retried
    (NoSuchPull, False),  # `/cherry-pick N`: upstream has no PR N (bare digits may then start a SHA)
    (Unmerged, False),  # `/cherry-pick N`: upstream's PR N is not merged
    (DatabaseBusy, True),
    (Rejected, False),
    (ModelUnusable, False),  # `risk.model` unusable at trunk: said on `sluice/config`, waits for a push
    (SandboxError, False),
]


# ---------------------------------------------------------------- the taxonomy


def _modules() -> Iterator[Any]:
    for package in (bot, handlers):
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            if not info.name.startswith("bot.db.migrations"):  # Alembic's env runs when imported
                yield importlib.import_module(info.name)


def _subclasses(cls: type[SluiceError]) -> set[type[SluiceError]]:
    found = set(cls.__subclasses__())
    return found.union(*(_subclasses(sub) for sub in found))


def sluice_errors() -> set[type[SluiceError]]:
    """SluiceError and every subclass defined in bot/ or handlers/ (tests may define their own)."""
    list(_modules())
    owned = {c for c in _subclasses(SluiceError) if c.__module__.split(".")[0] in ("bot", "handlers")}
    return owned | {SluiceError}


@pytest.mark.parametrize(("cls", "retryable"), TAXONOMY, ids=[cls.__name__ for cls, _ in TAXONOMY])
def test_each_error_says_whether_trying_again_can_help(cls: type[SluiceError], retryable: bool) -> None:
    assert cls.retryable is retryable


def test_the_table_names_every_sluice_error_so_each_new_one_gets_a_decision() -> None:
    assert {cls for cls, _ in TAXONOMY} == sluice_errors()


def test_every_sluice_error_says_in_its_docstring_what_it_means() -> None:
    undocumented = [
        cls.__qualname__ for cls in sluice_errors() if not (vars(cls).get("__doc__") or "").strip()
    ]
    assert undocumented == []


def test_a_raise_may_mark_its_one_case_and_leaves_the_family_as_it_is() -> None:
    lock = GitError("git update-ref failed: cannot lock ref", "run it again", retryable=True)
    assert lock.retryable and not GitError.retryable
    assert str(lock) == "git update-ref failed: cannot lock ref\n  → run it again"


def _constructions(
    names: dict[str, type[SluiceError]],
) -> Iterator[tuple[str, int, ast.Call, type[SluiceError]]]:
    for path in sorted([*(ROOT / "bot").rglob("*.py"), *(ROOT / "handlers").rglob("*.py")]):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = (
                    node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                )
                if name in names:
                    yield str(path.relative_to(ROOT)), node.lineno, node, names[name]


def _missing_remedy(call: ast.Call, cls: type[SluiceError]) -> str | None:
    """Why this construction carries no remedy, or None when it does (or its class supplies one)."""
    if "remedy" not in inspect.signature(cls).parameters:
        return None  # the class's own __init__ writes the remedy
    given = {kw.arg: kw.value for kw in call.keywords}
    if any(isinstance(arg, ast.Starred) for arg in call.args) or None in given:
        return None  # *args / **kwargs: passed on from elsewhere
    remedy = call.args[1] if len(call.args) > 1 else given.get("remedy")
    if remedy is None:
        return "no remedy"
    if isinstance(remedy, ast.Constant) and not str(remedy.value).strip():
        return "an empty remedy"
    return None


def test_every_sluice_error_raised_in_bot_and_handlers_carries_a_remedy() -> None:
    names = {cls.__name__: cls for cls in sluice_errors()}
    found = [
        f"{path}:{line}: {cls.__name__} with {why}"
        for path, line, call, cls in _constructions(names)
        if (why := _missing_remedy(call, cls)) is not None
    ]
    checked = sum(1 for _ in _constructions(names))
    assert checked > 60 and found == []  # the scan sees the raises it is about


def test_the_scan_would_see_a_raise_without_a_remedy() -> None:
    call = ast.parse('raise GitError("unknown ref")').body[0].exc  # type: ignore[attr-defined]
    empty = ast.parse('raise BadInput("no", "")').body[0].exc  # type: ignore[attr-defined]
    assert _missing_remedy(call, GitError) == "no remedy"
    assert _missing_remedy(empty, BadInput) == "an empty remedy"
    assert _missing_remedy(ast.parse('DatabaseBusy("slow")').body[0].value, DatabaseBusy) is None  # type: ignore[attr-defined]


# ---------------------------------------------------------------- GitHub's answers


def _answer(
    status: int, headers: dict[str, str] | None = None, message: str = "nope"
) -> gidgethub.HTTPException:
    """The exception gidgethub raises for this answer (through its own response decoding)."""
    body = f'{{"message": "{message}"}}'.encode()
    with pytest.raises(gidgethub.HTTPException) as raised:
        sansio.decipher_response(status, {"content-type": "application/json", **(headers or {})}, body)
    return raised.value


SPENT = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1900000000", "x-ratelimit-limit": "5000"}


@pytest.mark.parametrize(
    ("status", "headers", "message", "kind", "retryable"),
    [
        (500, None, "Server Error", GitHubDown, True),
        (502, None, "Bad Gateway", GitHubDown, True),
        (503, None, "Unavailable", GitHubDown, True),
        (429, None, "slow down", GitHubRateLimited, True),
        (403, {"retry-after": "30"}, "wait", GitHubRateLimited, True),
        (403, None, "You have exceeded a secondary rate limit", GitHubRateLimited, True),
        (403, SPENT, "API rate limit exceeded", GitHubRateLimited, True),
        (403, None, "Resource not accessible by integration", GitHubForbidden, False),
        (401, None, "Bad credentials", GitHubForbidden, False),
        (404, None, "Not Found", GitHubNotFound, False),
        (410, None, "Gone", GitHubNotFound, False),
        (422, None, "Validation Failed", GitHubNotFound, False),
    ],
)
def test_github_answers_become_sluice_failures_that_say_whether_to_retry(
    status: int, headers: dict[str, str] | None, message: str, kind: type[GitHubError], retryable: bool
) -> None:
    exc = _answer(status, headers, message)
    failure = github_failure(exc)

    assert type(failure) is kind and failure.retryable is retryable
    assert f"GitHub answered {status}" in failure.message and failure.remedy
    assert is_permanent(exc) is not retryable  # the worker reads the same flag


def test_an_unknown_failure_is_retried() -> None:
    assert not is_permanent(ConnectionResetError("peer went away"))
    assert is_permanent(Rejected("no handler", "deploy a Sluice that knows it"))


@pytest.mark.parametrize(
    ("said", "redacted"),
    [
        ("url 'bot:s3cret@github.com/a/b.git' refused", "url 'github.com/a/b.git' refused"),
        ("url https:/bot:s3cret@github.com/a/b.git refused", "url https:/github.com/a/b.git refused"),
        ("url https//bot:s3cret@github.com/a refused", "url https//github.com/a refused"),
        ("oauth2:glpat-s3cret@gitlab.example.com:a/b.git", "gitlab.example.com:a/b.git"),
        ("write to alice@example.com, or git@host:x.git", "write to alice@example.com, or git@host:x.git"),
    ],
)
def test_credentials_before_a_host_are_redacted_with_or_without_a_scheme(said: str, redacted: str) -> None:
    assert redact(said) == redacted


def test_a_log_line_gets_the_first_line_of_an_error_redacted_and_cut() -> None:
    said = OSError("connection to https://sluice:ghs_abc123@db.example failed\nDETAIL: the rest")
    assert first_line(said) == "connection to https://db.example failed"
    assert first_line(TimeoutError()) == "TimeoutError"  # it said nothing: its name
    assert first_line(ValueError("x" * 500)) == "x" * 300


# ---------------------------------------------------------------- the worker, against the simulator


class Clock:
    """The app's clock, moved by the test: the worker schedules retries by it."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> dt.datetime:
        return self.now


@dataclass
class Rig:
    ctx: Context
    sim: GitHubSim
    clock: Clock
    worker: Worker

    def jobs(self) -> list[tuple[str, str, int, str | None, dt.datetime | None]]:
        query = select(jobs.c.kind, jobs.c.state, jobs.c.attempts, jobs.c.error, jobs.c.not_before)
        with self.ctx.store._engine.connect() as conn:
            return [tuple(row) for row in conn.execute(query.order_by(jobs.c.id))]  # type: ignore[misc]

    async def run_due(self) -> str | None:
        """Run the job due now, if any; its kind."""
        claimed = self.ctx.queue.claim("w", lease=LEASE, now=self.clock(), max_attempts=MAX_ATTEMPTS)
        if claimed is None:
            return None
        await self.worker.run_job(claimed)
        return claimed.kind


@pytest.fixture
async def rig(aiohttp_server: Any, tmp_path: Path, store: Store) -> AsyncIterator[Rig]:
    sim, settings = await sim_with_fork(aiohttp_server, tmp_path, upstream=UPSTREAM, fork=FORK)
    clock = Clock()
    async with aiohttp.ClientSession() as session:
        # The simulator checks JWTs against the time of day, as GitHub does: the client reads that clock.
        github = GitHubClient(
            session,
            app_id=sim.app_id,
            private_key=settings.private_key_pem(),
            base_url=settings.github_url,
            clock=utc_now,
        )
        ctx = Context(settings, store, JobQueue(store), Registry(store), github, "sluice[bot]", clock)
        yield Rig(ctx, sim, clock, Worker(ctx, ROUTES, name="w"))


def register_fork(rig: Rig, *, upstream_branch: str = "main") -> None:
    """The fork's config on its trunk and a `register` job for it, as an installation event leaves them."""
    installation_id = rig.sim.install(FORK)
    config = f"upstream:\n  url: {rig.ctx.web_url}/{UPSTREAM}.git\n  branch: {upstream_branch}\n"
    rig.sim.commit(FORK, "main", {".github/sluice.yml": config}, message="sluice config")
    rig.ctx.registry.add_repos(installation_id, [FORK])
    rig.ctx.queue.enqueue("register", {"repo": FORK, "installation_id": installation_id}, key=FORK, now=NOW)


@pytest.mark.parametrize(
    ("outage", "failure"),
    [("503", "GitHubDown: GitHub answered 503"), ("connection dropped", "GitHubUnreachable: POST")],
)
async def test_a_github_outage_fails_the_job_for_now_and_the_retry_succeeds(
    rig: Rig, outage: str, failure: str
) -> None:
    register_fork(rig)
    if outage == "503":  # a POST is never repeated inside one request: the job's retry does it
        rig.sim.fail_next("POST", r"/access_tokens$", 503)
    else:
        rig.sim.drop_next("POST", r"/access_tokens$")

    assert await rig.run_due() == "register"

    ((kind, state, attempts, error, not_before),) = rig.jobs()
    assert (kind, state, attempts) == ("register", JobState.QUEUED.value, 1)
    assert error is not None and error.startswith(failure) and "tried again later" in error
    assert not_before is not None and not_before.replace(tzinfo=dt.UTC) == NOW + dt.timedelta(seconds=5)
    assert rig.ctx.registry.fork(FORK) is None
    assert await rig.run_due() is None  # the retry waits its back-off

    rig.clock.now = NOW + dt.timedelta(seconds=5)
    assert await rig.run_due() == "register"

    assert rig.jobs()[0][:3] == ("register", JobState.DONE.value, 2)
    assert rig.ctx.registry.fork(FORK) is not None
    assert [row[0] for row in rig.jobs()] == ["register", "ingest"]  # it goes on to the first ingestion


async def test_an_upstream_branch_that_does_not_exist_fails_the_job_at_once_with_the_remedy(rig: Rig) -> None:
    register_fork(rig, upstream_branch="mian")
    assert await rig.run_due() == "register"  # the config is valid: the branch is a name like any other

    assert await rig.run_due() == "ingest"

    register_row, (kind, state, attempts, error, _) = rig.jobs()
    assert register_row[1] == JobState.DONE.value
    assert (kind, state, attempts) == ("ingest", JobState.FAILED.value, 1)
    assert error is not None and error.startswith("GitError: git fetch failed in the mirror")
    assert "the remote has no refs/heads/mian" in error and "upstream.branch" in error
    rig.clock.now = NOW + dt.timedelta(hours=1)
    assert await rig.run_due() is None  # nothing is tried again


async def test_an_unknown_failure_is_logged_with_its_delivery_and_tried_up_to_the_limit(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        """Routes whose one callback has a bug: nothing says whether trying again helps."""

        async def dispatch(self, job: Job, *, ctx: Context) -> None:
            raise KeyError("head_commit")

    rig.worker.routes = Broken()
    rig.ctx.queue.accept_delivery("d-7", event="push", body=b"{}", kind="push", key=None, payload={}, now=NOW)

    ran = 0
    while await rig.run_due() == "push":
        ran += 1
        rig.clock.now += dt.timedelta(hours=1)  # past every back-off

    ((_, state, attempts, error, _),) = rig.jobs()
    assert ran == attempts == MAX_ATTEMPTS and state == JobState.FAILED.value
    assert error == "KeyError: 'head_commit'"
    logged = [r for r in caplog.records if r.name == "sluice.worker" and "delivery d-7" in r.getMessage()]
    assert len([r for r in logged if r.exc_info]) == MAX_ATTEMPTS  # with its traceback, for the operator


# ---------------------------------------------------------------- the rate-limit policy runs inside gidgethub


@pytest.mark.parametrize(
    ("status", "headers"),
    [(403, {"retry-after": "7"}), (429, {"retry-after": "7"})],
    ids=["403-secondary", "429"],
)
async def test_a_secondary_rate_limit_is_waited_out_by_gidgethub_calling_sluices_hook(
    aiohttp_server: Any, tmp_path: Path, status: int, headers: dict[str, str]
) -> None:
    sim, url = await serve_sim(aiohttp_server, tmp_path / "sim")
    sim.create_repo(FORK)
    installation_id = sim.install(FORK)
    slept: list[float] = []
    waits: list[tuple[str, float]] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async with aiohttp.ClientSession() as session:
        sluice = GitHubClient(
            session,
            app_id=sim.app_id,
            private_key=sim.private_key_pem or "",
            base_url=url,
            clock=utc_now,
            sleep=sleep,
            on_wait=lambda reason, seconds: waits.append((reason, seconds)),
        )
        sim.fail_next("GET", rf"^/repos/{FORK}$", status, headers=headers)
        assert (await sluice.for_installation(installation_id).get(f"/repos/{FORK}"))["full_name"] == FORK
        # gidgethub's own request loop asked Sluice's hook, which waited, and then sent the request again.
        assert [s for m, p, s in sim.requests if p == f"/repos/{FORK}"] == [status, 200]
        assert waits == [("secondary_rate_limit", 7.0)] and slept == [7.0]

        # Without the override (gidgethub's default hook), the same answer is the caller's exception.
        plain = PlainGitHubAPI(
            session, "plain", oauth_token=sim.installation_token(installation_id), base_url=url
        )
        sim.fail_next("GET", rf"^/repos/{FORK}$", status, headers=headers)
        with pytest.raises(gidgethub.BadRequest):
            await plain.getitem(f"/repos/{FORK}")
        assert [s for m, p, s in sim.requests if p == f"/repos/{FORK}"] == [status, 200, status]


def test_the_gidgethub_sluice_requires_has_the_hooks_it_overrides() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (requirement,) = [Requirement(d) for d in declared if Requirement(d).name == "gidgethub"]
    assert not requirement.specifier.contains("5.3") and requirement.specifier.contains("6.0")
    assert requirement.specifier.contains(importlib.metadata.version("gidgethub"))
    for hook in ("manage_rate_limit", "handle_rate_limit_error"):  # gidgethub calls it; Sluice has its own
        assert hook in vars(AbstractGitHubAPI) and hook in vars(_PolicedAPI)
