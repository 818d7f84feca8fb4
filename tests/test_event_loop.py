"""The jobs never touch the database on the event loop: a round trip there would stall the intake too."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bot.app.context import Context
from handlers import poll, reconcile
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
        # installation → register → ingest; then an upstream push → push → ingest; then a fork PR
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
    assert len(rig.pulls()) >= 1  # the handlers did run their database work, somewhere
    where = sorted({"\n".join(frames) for frames in found})
    assert where == [], "database connections checked out on the event loop, from:\n" + "\n\n".join(where)


async def test_the_poll_and_the_resync_do_their_database_work_off_the_event_loop(ctx: Context) -> None:
    fork_record(ctx, upstream_repo=None)  # a polled upstream
    metrics = reconcile.ReconcileMetrics(CollectorRegistry())
    with checkouts_on_the_loop(ctx.store._engine) as found:
        # each in a task of its own, as the service runs them: the stack is then the loop's, not this test's
        assert await asyncio.create_task(poll.poll_once(ctx)) == [FORK]
        assert await asyncio.create_task(reconcile.resync_once(ctx, metrics)) == [FORK]
    assert found == []
