"""An ingestion run whose plan went stale while it ran: a unit's PR merged meanwhile (fork trunk moved)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import aiohttp
import pytest

import handlers.ingest as ingest_handler
from bot.app.context import Context
from tests.test_handlers import FORK, ctx, dispatch, queued
from tests.test_slash_commands import OLD, a_fork, upstream_commit

__all__ = ["ctx"]  # the fixture, reused from the handlers' tests


async def test_a_pr_merged_while_the_run_planned_is_not_opened_again(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate merges a unit's PR while a long plan runs: the stale plan still has the unit. The run sees
    fork trunk moved and plans again instead of pushing the merged commits into a new PR."""
    sim, _ = a_fork(ctx)
    upstream_commit(sim, {"docs/guide.md": "guide\n"}, message="docs: a guide", at=OLD + dt.timedelta(days=1))
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "test"})
    (pr,) = [p for p in sim.pulls[FORK] if p["state"] == "open"]
    token = sim.installation_token(sim.install(FORK))
    observe = ingest_handler.observe

    async def merged_meanwhile(forge: Any, desired: Any, *, seen: Any) -> Any:
        merging = {"url": f"{ctx.web_url}/repos/{FORK}/pulls/{pr['number']}/merge", "json": {}}
        headers = {"Authorization": f"token {token}"}
        async with aiohttp.ClientSession() as http, http.put(**merging, headers=headers) as answer:
            assert answer.status == 200
        return await observe(forge, desired, seen=seen)

    upstream_commit(sim, {"docs/other.md": "other\n"}, message="docs: other", at=OLD + dt.timedelta(days=2))
    queued(ctx)  # what the test's pushes queued: not this run's
    monkeypatch.setattr(ingest_handler, "observe", merged_meanwhile)
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "upstream moved"})

    assert [p for p in sim.pulls[FORK] if p["state"] == "open"] == []
    assert ("ingest", FORK) in queued(ctx)  # it planned nothing on the old trunk and asked again
    monkeypatch.setattr(ingest_handler, "observe", observe)
    await dispatch(ctx, "ingest", {"fork": FORK, "reason": "trunk moved"})
    (again,) = [p for p in sim.pulls[FORK] if p["state"] == "open"]
    assert again["head"]["ref"] != pr["head"]["ref"]  # only what the merge did not bring
