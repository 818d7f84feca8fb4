"""The jobs never touch the database on the event loop: a round trip there would stall the intake too."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import threading
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bot.app.context import Context
from handlers import poll, resync
from tests.test_handlers import ctx, fork_record
from tests.test_ingest_e2e import (
    CORE_PASS,
    FORK,
    SECRET,
    UPSTREAM,
    Rig,
    installation_event,
    rig,
    upstream_commits,
)

__all__ = ["ctx", "rig"]  # the fixtures, reused from the handlers' and the end-to-end tests
ROOT = Path(__file__).resolve().parent.parent
APP_DIRS = (ROOT / "bot", ROOT / "handlers")
DATABASE_HANDLES = frozenset({"store", "registry", "queue"})  # the Context's database adapters


def _app_frames(stack: traceback.StackSummary) -> list[str]:
    """The stack's frames in Sluice's own code; none when a test made the call (its own checks)."""
    files = [Path(frame.filename) for frame in stack]
    if any(ROOT / "tests" in f.parents for f in files):
        return []
    return [
        f"{Path(frame.filename).relative_to(ROOT)}:{frame.lineno} {frame.name}"
        for frame in stack
        if any(d in Path(frame.filename).parents for d in APP_DIRS)
    ]


@contextlib.contextmanager
def checkouts_on_the_loop(engine: Engine) -> Iterator[list[list[str]]]:
    """Record, with its stack, every connection Sluice's code checks out on this (the loop's) thread."""
    loop_thread = threading.get_ident()
    found: list[list[str]] = []

    def on_checkout(*_: Any) -> None:
        if threading.get_ident() == loop_thread:
            frames = _app_frames(traceback.extract_stack()[:-1])  # without this listener
            if frames:
                found.append(frames)

    event.listen(engine, "checkout", on_checkout)
    try:
        yield found
    finally:
        event.remove(engine, "checkout", on_checkout)


async def test_handlers_do_their_database_work_off_the_event_loop(rig: Rig) -> None:
    with checkouts_on_the_loop(rig.store._engine) as found:
        fork_installation = rig.sim.install(FORK)
        upstream_installation = rig.sim.install(UPSTREAM)
        await upstream_commits(rig, ("docs: clarify", {"docs/guide.md": "guide, clarified\n"}))
        # installation → register → ingest; an upstream push → push → ingest; a fork PR; a comment on it
        assert await installation_event(rig, FORK, fork_installation) == 202
        assert await installation_event(rig, UPSTREAM, upstream_installation) == 202
        await rig.settle()
        await upstream_commits(rig, ("[Pipeliner] tweak", {CORE_PASS: "void pipeline() {\n  tweak();\n}\n"}))
        await rig.settle()
        trunk = rig.sim.git(FORK, "rev-parse", "main").strip()
        rig.sim.commit(FORK, "feature", {"third_party/tlx/more.py": "y = 2\n"}, message="more", parent=trunk)
        pull = rig.sim.open_pull(FORK, head="feature", base="main", title="More")
        payload = rig.sim.pull_request_payload(FORK, pull["number"], "opened", sender="dev")
        assert await rig.sim.deliver(f"{rig.bot_url}/webhook", "pull_request", payload, secret=SECRET) == 202
        await rig.settle()
        # a slash command: issue_comment → the command registry → /help's reply
        comment = rig.sim.add_comment(FORK, pull["number"], "/help", user="dev")
        payload = rig.sim.issue_comment_payload(FORK, comment)
        assert await rig.sim.deliver(f"{rig.bot_url}/webhook", "issue_comment", payload, secret=SECRET) == 202
        await rig.settle()
    assert len(rig.pulls()) >= 1  # the handlers did run their database work, somewhere
    assert any("`/help`" in body for body in rig.sim.comments[(FORK, pull["number"])][1:])
    where = sorted({"\n".join(frames) for frames in found})
    assert where == [], "database connections checked out on the event loop, from:\n" + "\n\n".join(where)


async def test_the_poll_and_the_resync_do_their_database_work_off_the_event_loop(ctx: Context) -> None:
    fork_record(ctx, upstream_repo=None)  # a polled upstream
    metrics = resync.ReconcileMetrics(CollectorRegistry())
    with checkouts_on_the_loop(ctx.store._engine) as found:
        # each in a task of its own, as the service runs them: the stack is then the loop's, not this test's
        assert await asyncio.create_task(poll.poll_once(ctx)) == [FORK]
        assert await asyncio.create_task(resync.resync_once(ctx, metrics)) == [FORK]
    assert found == []


def _direct_database_calls(body: Iterable[ast.AST]) -> Iterator[ast.Call]:
    """Calls `….store.x(…)`, `….registry.x(…)`, `….queue.x(…)` made right here, not handed to a thread
    (`await ctx.db(ctx.registry.fork, repo)` passes the method; a nested def or lambda runs elsewhere)."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr in DATABASE_HANDLES
        ):
            yield node
        yield from _direct_database_calls(ast.iter_child_nodes(node))


def _blocking_calls_in_async_code(source: str) -> list[int]:
    return [
        call.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.AsyncFunctionDef)
        for call in _direct_database_calls(node.body)
    ]


def test_no_async_function_calls_the_database_directly() -> None:
    """Every async path, also those no test drives: handlers, commands, routing, worker, service."""
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for room in APP_DIRS
        for path in sorted(room.rglob("*.py"))
        for line in _blocking_calls_in_async_code(path.read_text())
    ]
    assert found == []


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ("async def f(ctx):\n    ctx.registry.fork('a')", [2]),
        ("async def f(self):\n    x = [self.ctx.queue.claim('w')]", [2]),
        ("async def f(ctx):\n    await ctx.db(ctx.registry.fork, 'a')", []),
        ("async def f(ctx):\n    await asyncio.to_thread(ctx.queue.fail, 1)", []),
        ("async def f(ctx):\n    def g():\n        ctx.store.resolutions()\n    return g", []),
        ("def f(ctx):\n    ctx.registry.fork('a')", []),  # a blocking function, run in a thread
    ],
)
def test_the_scan_finds_direct_calls(source: str, lines: list[int]) -> None:
    assert _blocking_calls_in_async_code(source) == lines
