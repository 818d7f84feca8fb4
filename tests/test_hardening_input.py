"""Bad input, stricter (issue 9): hostile JSON, refs, names and ids get a clear 4xx and change nothing, and an
installation or repository that GitHub does not confirm never reaches the registry.

Every case is a real signed request over loopback to `sluice serve`'s app; the registry cases run it with its
workers against the GitHub simulator.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import logging
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from bot.app.service import create_app
from bot.app.settings import Settings
from bot.core.errors import GitError
from bot.core.refs import ref_problem, validate_sha
from bot.core.webhooks import MAX_JSON_DEPTH
from bot.db.jobs import JobQueue
from bot.db.registry import Registry, installation_repos, installations
from bot.db.store import Store
from tests.support.github_sim import GitHubSim
from tests.support.rig import serve_bot, serve_settings, serve_sim
from tests.support.webhooks import signature, signed_headers

SECRET = "hardening-secret"
NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
HEAD = "c" * 40
INSTALLATION = 2311213
FORK = "triton-fork/triton"


# ---------------------------------------------------------------- payloads


def push() -> dict[str, Any]:
    return {
        "ref": "refs/heads/main",
        "before": "b" * 40,
        "after": HEAD,
        "repository": {"id": 186853002, "full_name": FORK, "default_branch": "main"},
        "installation": {"id": INSTALLATION},
        "sender": {"login": "dev"},
        "commits": [],
    }


def pull() -> dict[str, Any]:
    end = {"label": "triton-fork:x", "ref": "feature", "sha": HEAD, "repo": {"full_name": FORK}}
    return {
        "action": "opened",
        "number": 7,
        "pull_request": {"number": 7, "head": end, "base": {**end, "ref": "main"}, "user": {"login": "dev"}},
        "repository": {"full_name": FORK, "default_branch": "main"},
        "installation": {"id": INSTALLATION},
        "sender": {"login": "dev"},
    }


def installed(action: str = "created") -> dict[str, Any]:
    return {
        "action": action,
        "installation": {"id": INSTALLATION, "account": {"login": "triton-fork"}},
        "repositories": [{"id": 1, "full_name": FORK}],
    }


def repositories_added() -> dict[str, Any]:
    return {
        "action": "added",
        "installation": {"id": INSTALLATION},
        "repositories_added": [{"full_name": FORK}],
    }


PAYLOADS = {
    "push": push,
    "pull_request": pull,
    "installation": installed,
    "installation_repositories": repositories_added,
}


def changed(event: str, where: str, value: Any) -> bytes:
    """The event's payload with the field at the dotted path `where` set to `value`, as a JSON body."""
    payload = copy.deepcopy(PAYLOADS[event]())
    *parents, last = where.split(".")
    node = payload
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    return json.dumps(payload).encode()


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


# ------------------------------------------------------ hostile cases: (event, body, status, reasons)

DEEP = [
    pytest.param("push", b"[" * 100_000, 400, ("nested deeper than 64",), id="100k-open-brackets"),
    pytest.param("push", b'{"a":' * 100_000, 400, ("nested deeper than 64",), id="100k-open-objects"),
    pytest.param(
        "push",
        b"[" * 100_000 + b"]" * 100_000,
        400,
        ("nested deeper than 64",),
        id="100k-balanced-brackets",
    ),
    # valid JSON that json.loads reads fine, one level past the limit (the payload object is level 1)
    pytest.param(
        "push",
        changed("push", "extra", nested(MAX_JSON_DEPTH)),
        400,
        ("nested deeper than 64",),
        id="65-levels",
    ),
]

REFS = {
    "lock-component": "a.lock/b",
    "lock-suffix": "topic.lock",
    "dot-component": "a/.b",
    "dot-start": ".hidden",
    "dot-dot": "a..b",
    "reflog": "x@{1}",
    "at-sign": "@",
    "trailing-slash": "a/",
    "double-slash": "a//b",
    "trailing-dot": "a.",
    "tilde": "a~1",
    "caret": "a^",
    "colon": "a:b",
    "question-mark": "a?",
    "star": "a*",
    "open-bracket": "a[b",
    "backslash": "a\\b",
    "space": "a b",
    "tab": "a\tb",
    "newline": "a\nb",
    "nul": "a\x00b",
    "del": "a\x7fb",
    "option": "-x",
    "shell": "$(id)",
}

LOOKALIKES = {  # ref or name → the code point the reason must name
    "cyrillic-a": ("m\u0430in", "U+0430", "CYRILLIC SMALL LETTER A"),
    "right-to-left-override": ("main\u202ecod.exe", "U+202E", "RIGHT-TO-LEFT OVERRIDE"),
    "zero-width-space": ("ma\u200bin", "U+200B", "ZERO WIDTH SPACE"),
    "zero-width-joiner": ("ma\u200din", "U+200D", "ZERO WIDTH JOINER"),
    "byte-order-mark": ("\ufeffmain", "U+FEFF", "ZERO WIDTH NO-BREAK SPACE"),
    "fullwidth-solidus": ("a\uff0fb", "U+FF0F", "FULLWIDTH SOLIDUS"),
}


def _ref_cases() -> list[Any]:
    cases = []
    for name, ref in REFS.items():
        cases.append(
            pytest.param("push", changed("push", "ref", f"refs/heads/{ref}"), 422, ("ref",), id=name)
        )
        body = changed("pull_request", "pull_request.head.ref", ref)
        cases.append(pytest.param("pull_request", body, 422, ("head.ref",), id=f"pr-head-{name}"))
    for name, (text, code_point, char) in LOOKALIKES.items():
        reasons = ("at ref", code_point, char)
        body = changed("push", "ref", f"refs/heads/{text}")
        cases.append(pytest.param("push", body, 422, reasons, id=f"ref-{name}"))
        body = changed("pull_request", "pull_request.base.ref", text)
        cases.append(pytest.param("pull_request", body, 422, ("base.ref", code_point), id=f"pr-base-{name}"))
        owner = text.replace(".", "x")
        body = changed("push", "repository.full_name", f"{owner}/triton")
        cases.append(pytest.param("push", body, 422, ("full_name", code_point, char), id=f"repo-{name}"))
        body = changed("pull_request", "pull_request.head.repo.full_name", f"triton-fork/{owner}")
        cases.append(
            pytest.param("pull_request", body, 422, ("head.repo.full_name", code_point), id=f"pr-repo-{name}")
        )
    return cases


IDS = {
    "string": "123",
    "true": True,
    "float": 1.0,
    "zero": 0,
    "negative": -1,
    "2**63": 2**63,
    "2**80": 2**80,
    "null": None,
}
ID_FIELDS = [
    ("push", "installation.id"),
    ("pull_request", "installation.id"),
    ("pull_request", "number"),
    ("pull_request", "pull_request.number"),
    ("installation", "installation.id"),
    ("installation_repositories", "installation.id"),
]


def _id_cases() -> list[Any]:
    return [
        pytest.param(
            event, changed(event, where, value), 422, (f"rejected at {where}",), id=f"{event}-{where}-{name}"
        )
        for event, where in ID_FIELDS
        for name, value in IDS.items()
    ]


HOSTILE = [*DEEP, *_ref_cases(), *_id_cases()]


# ---------------------------------------------------------------- the intake


def sign(body: bytes) -> str:
    return signature(body, SECRET)


def headers(body: bytes, event: str) -> dict[str, str]:
    return signed_headers(body, secret=SECRET, event=event)


def registry_rows(store: Store) -> tuple[list[Any], list[Any]]:
    with store._engine.connect() as conn:
        return (
            [tuple(r) for r in conn.execute(select(installations).order_by(installations.c.id))],
            [tuple(r) for r in conn.execute(select(installation_repos).order_by(installation_repos.c.repo))],
        )


async def _intake(aiohttp_client: Any, store: Store) -> Any:
    settings = Settings(app_id=1, private_key=SecretStr("pem"), webhook_secret=SecretStr(SECRET))
    Registry(store).record_installation(INSTALLATION, "triton-fork", [FORK], at=NOW)
    return await aiohttp_client(create_app(settings, store=store, clock=lambda: NOW))


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    opened = Store.open(sqlite_url)
    yield opened
    opened.close()


@pytest.fixture
async def intake(aiohttp_client: Any, sqlite_store: Store) -> Any:
    """The intake on SQLite: each case fails before the store is written; PostgreSQL gets them all below."""
    return await _intake(aiohttp_client, sqlite_store)


async def _refused(
    client: Any, store: Store, event: str, body: bytes, status: int, reasons: tuple[str, ...]
) -> None:
    before = registry_rows(store)
    response = await client.post("/webhook", data=body, headers=headers(body, event))
    assert response.status == status
    error = (await response.json())["error"]
    for reason in reasons:
        assert reason in error
    assert error.isascii()  # a look-alike is shown escaped (`m\u0430in`), never as text that reads "main"
    queue = JobQueue(store)
    assert queue.deliveries() == 0 and sum(queue.counts().values()) == 0
    assert registry_rows(store) == before


@pytest.mark.parametrize(("event", "body", "status", "reasons"), HOSTILE)
async def test_hostile_input_gets_a_clear_4xx_and_records_nothing(
    intake: Any, sqlite_store: Store, event: str, body: bytes, status: int, reasons: tuple[str, ...]
) -> None:
    await _refused(intake, sqlite_store, event, body, status, reasons)


@pytest.mark.postgres
async def test_hostile_input_records_nothing_on_postgresql(aiohttp_client: Any, postgres_url: str) -> None:
    store = Store.open(postgres_url)
    try:
        client = await _intake(aiohttp_client, store)
        for case in HOSTILE:
            await _refused(client, store, *case.values)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("event", "body"),
    [
        pytest.param("push", changed("push", "extra", nested(MAX_JSON_DEPTH - 1)), id="64-levels"),
        pytest.param(
            "push", changed("push", "extra", "[" * 100_000 + '{\\"' * 1000), id="brackets-in-a-string"
        ),
        pytest.param("push", changed("push", "installation.id", 2**63 - 1), id="largest-63-bit-id"),
        pytest.param("push", changed("push", "ref", "refs/heads/a.lock.b/c@d{e}"), id="ref-git-allows"),
        pytest.param(
            "pull_request",
            changed("pull_request", "pull_request.head.ref", "fix(parser)"),
            id="pr-head-with-a-scope",
        ),
        pytest.param("pull_request", changed("pull_request", "pull_request.number", 1), id="pr-number-1"),
    ],
)
async def test_what_github_may_send_is_still_accepted(
    intake: Any, sqlite_store: Store, event: str, body: bytes
) -> None:
    response = await intake.post("/webhook", data=body, headers=headers(body, event))
    assert response.status == 202, await response.text()
    assert JobQueue(sqlite_store).counts()["queued"] == 1


REFS_GIT_ALLOWS = [
    *("main", "a/b/c", "a@b", "a.lock.b", "HEAD", "a{b}", "x/@", "release/3.4", "v1.0.0-rc.1"),
    *("fix(parser)", "feat(amd)/ws-pipeline"),  # a conventional-commit scope in a branch name
]


@pytest.mark.parametrize("ref", [*REFS.values(), *REFS_GIT_ALLOWS, "a/b.lock", "/a", "a/..", ".", "a/./b"])
def test_sluice_refuses_every_ref_git_refuses(ref: str) -> None:
    """`git check-ref-format` is the authority; Sluice is as strict or stricter, without shelling out."""
    if "\x00" in ref:
        return  # no argv can carry a NUL; Sluice refuses it (test above)
    git_ok = (
        subprocess.run(["git", "check-ref-format", "--allow-onelevel", ref], capture_output=True).returncode
        == 0
    )
    assert git_ok or ref_problem(ref) is not None
    if ref in REFS_GIT_ALLOWS:
        assert git_ok and ref_problem(ref) is None


# ---------------------------------------------------------------- the registry: only what GitHub confirms

VICTIM = "victim/secret"
OTHER = "stranger/repo"
UNKNOWN_INSTALLATION = 987654321


@dataclass
class Rig:
    sim: GitHubSim
    bot_url: str
    store: Store
    fork_installation: int
    victim_installation: int

    async def deliver(self, event: str, payload: dict[str, Any]) -> int:
        return await self.sim.deliver(f"{self.bot_url}/webhook", event, payload, secret=SECRET)

    async def settle(self, timeout: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            counts = JobQueue(self.store).counts()
            if counts["queued"] == 0 and counts["running"] == 0:
                assert counts["failed"] == 0, counts
                assert self.sim.schema_violations == [] and self.sim.undocumented_statuses == []
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"jobs did not settle: {JobQueue(self.store).counts()}")

    def registry(self) -> dict[str, int]:
        return {
            repo: Registry(self.store).installation_of(repo) or 0
            for repo in (FORK, VICTIM, OTHER, "triton-fork/new")
        }


@pytest.fixture
async def rig(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[Rig]:
    sim, sim_url = await serve_sim(aiohttp_server, tmp_path / "sim")
    for repo in (FORK, VICTIM, OTHER, "triton-fork/new"):
        sim.create_repo(repo, private=repo == VICTIM)
        sim.commit(repo, "main", {"README.md": f"{repo}\n"}, message="initial")  # no sluice.yml: not a fork
    fork_installation, victim_installation = sim.install(FORK), sim.install(VICTIM)
    store = Store.open(database_url)
    # What earlier, confirmed deliveries recorded: the fork's and the victim's installations.
    registry = Registry(store)
    registry.record_installation(fork_installation, "triton-fork", [FORK], at=NOW)
    registry.record_installation(victim_installation, "victim", [VICTIM], at=NOW)
    settings = serve_settings(sim, sim_url, secret=SECRET, data_dir=tmp_path / "data")
    bot, bot_url = await serve_bot(aiohttp_server, settings, store)
    yield Rig(sim, bot_url, store, fork_installation, victim_installation)
    await bot.close()
    store.close()


def _installation_event(
    action: str, installation_id: int, repos: list[str], account: str = "triton-fork"
) -> dict[str, Any]:
    return {
        "action": action,
        "installation": {"id": installation_id, "account": {"login": account}},
        "repositories": [{"full_name": r} for r in repos],
        "sender": {"login": "mallory"},
    }


def _repositories_event(action: str, installation_id: int, repos: list[str]) -> dict[str, Any]:
    return {
        "action": action,
        "installation": {"id": installation_id},
        f"repositories_{action}": [{"full_name": r} for r in repos],
        "sender": {"login": "mallory"},
    }


def _push_event(repo: str, installation_id: int) -> dict[str, Any]:
    return {
        **push(),
        "repository": {"full_name": repo, "default_branch": "main"},
        "installation": {"id": installation_id},
    }


FORGED = [
    pytest.param(
        "installation",
        lambda rig: _installation_event("created", UNKNOWN_INSTALLATION, [VICTIM]),
        "unknown to GitHub",
        id="created-unknown-installation",
    ),
    pytest.param(
        "installation",
        lambda rig: _installation_event("created", rig.fork_installation, [VICTIM]),
        "does not hold victim/secret",
        id="created-naming-another-installations-repo",
    ),
    pytest.param(
        "installation",
        lambda rig: _installation_event("deleted", rig.victim_installation, [VICTIM]),
        "GitHub still has it",
        id="deleted-but-still-installed",
    ),
    pytest.param(
        "installation_repositories",
        lambda rig: _repositories_event("added", UNKNOWN_INSTALLATION, [VICTIM]),
        "unknown to GitHub",
        id="added-to-unknown-installation",
    ),
    pytest.param(
        "installation_repositories",
        lambda rig: _repositories_event("added", rig.fork_installation, [VICTIM, OTHER]),
        "does not hold victim/secret, stranger/repo",
        id="added-repos-not-in-the-installation",
    ),
    pytest.param(
        "installation_repositories",
        lambda rig: _repositories_event("removed", rig.victim_installation, [VICTIM]),
        "still holds victim/secret",
        id="removed-but-still-installed",
    ),
    pytest.param(
        "push",
        lambda rig: _push_event(VICTIM, rig.fork_installation),
        "victim/secret is not in installation",
        id="push-naming-another-installation",
    ),
    pytest.param(
        "push",
        lambda rig: _push_event(OTHER, rig.fork_installation),
        "stranger/repo is not in installation",
        id="push-from-a-repo-not-installed",
    ),
]


@pytest.mark.parametrize(("event", "payload", "reason"), FORGED)
async def test_a_forged_but_signed_delivery_leaves_the_registry_as_it_was(
    rig: Rig, caplog: pytest.LogCaptureFixture, event: str, payload: Any, reason: str
) -> None:
    before = registry_rows(rig.store)
    with caplog.at_level(logging.INFO):
        assert await rig.deliver(event, payload(rig)) == 202
        await rig.settle()
    assert registry_rows(rig.store) == before
    queue = JobQueue(rig.store)
    assert queue.deliveries() == 1 and queue.counts()["done"] == 1  # kept, done, and the log says why
    dropped = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(reason in message for message in dropped), dropped


async def test_real_installation_events_are_recorded_and_forgotten(rig: Rig) -> None:
    sim, fork_inst = rig.sim, rig.fork_installation
    Registry(rig.store).forget_installation(fork_inst)  # the App was just installed: Sluice knows nothing yet
    assert await rig.deliver("installation", _installation_event("created", fork_inst, [FORK])) == 202
    await rig.settle()
    assert rig.registry()[FORK] == fork_inst
    sim.install("triton-fork/new")
    assert (
        await rig.deliver(
            "installation_repositories", _repositories_event("added", fork_inst, ["triton-fork/new"])
        )
        == 202
    )
    await rig.settle()
    assert rig.registry()["triton-fork/new"] == fork_inst
    sim.uninstall("triton-fork/new")
    assert (
        await rig.deliver(
            "installation_repositories", _repositories_event("removed", fork_inst, ["triton-fork/new"])
        )
        == 202
    )
    await rig.settle()
    assert rig.registry()["triton-fork/new"] == 0
    sim.install("triton-fork/new")
    assert await rig.deliver("push", _push_event("triton-fork/new", fork_inst)) == 202  # first seen in a push
    await rig.settle()
    assert rig.registry()["triton-fork/new"] == fork_inst
    sim.delete_installation(fork_inst)
    assert await rig.deliver("installation", _installation_event("deleted", fork_inst, [])) == 202
    await rig.settle()
    assert rig.registry() == {FORK: 0, VICTIM: rig.victim_installation, OTHER: 0, "triton-fork/new": 0}
    assert JobQueue(rig.store).counts()["failed"] == 0


@pytest.mark.parametrize(
    "sha",
    ["a" * 40 + "x", "a" * 40 + "\n", "a" * 39, "A" * 40, "a" * 40 + "; rm -rf /", "", "-" + "a" * 39],
    ids=["trailing-char", "trailing-newline", "39-hex", "uppercase", "shell", "empty", "option"],
)
def test_only_a_full_lowercase_sha_passes_as_a_commit_sha(sha: str) -> None:
    """`$` matches before a final newline: the check must hold to the end of the text."""
    with pytest.raises(GitError, match="not a full commit SHA"):
        validate_sha(sha)
    assert validate_sha("0123456789abcdef" * 2 + "01234567") == "0123456789abcdef" * 2 + "01234567"
