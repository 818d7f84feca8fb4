"""A tier dispatch that fails for now (the network, GitHub's 5xx): the run is recorded as undispatched, with
the failure's first line, and the failure is raised for the job's retry. GitHub faked, the store real
(SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.core.config import SluiceConfig
from bot.core.tiers import Level, RunState, Subject, TierRun
from bot.core.webhooks import CheckRun, Pull
from bot.db.store import Store
from bot.db.tier_runs import TierRuns
from bot.flows import tiers
from bot.flows.tiers import Tiering

FORK = "meta/triton"
AT = datetime(2026, 11, 2, tzinfo=UTC)
HEAD, BASE = "a" * 40, "b" * 40


class Forge:
    """One open ingestion PR and the check runs shown on its head."""

    repo = FORK

    def __init__(self) -> None:
        self.checks: dict[str, dict[str, Any]] = {}

    async def get_pull(self, number: int) -> Pull:
        head = {"ref": "sluice/ingest/bundle-1", "sha": HEAD, "repo": {"full_name": FORK}}
        base = {"ref": "main", "sha": BASE}
        return Pull.model_validate({"number": number, "state": "open", "head": head, "base": base})

    async def check_runs(self, sha: str) -> dict[str, CheckRun]:
        return {name: CheckRun.model_validate(check) for name, check in self.checks.items()}

    async def new_check_run(self, sha: str, name: str, body: Mapping[str, Any]) -> int:
        self.checks[name] = {"id": len(self.checks) + 1, "name": name, "head_sha": sha, **body}
        return len(self.checks)

    async def update_check_run(self, check_run_id: int, body: Mapping[str, Any]) -> None:
        (check,) = [c for c in self.checks.values() if c["id"] == check_run_id]
        check.update(body)


class Failing:
    """A backend whose every start fails with `exc`."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def start(
        self, subject: Subject, run: TierRun, *, workflow: str, earlier: datetime | None = None
    ) -> int | None:
        raise self.exc


async def run_db(call: Any, *args: Any, **kwargs: Any) -> Any:
    return call(*args, **kwargs)


@pytest.mark.parametrize(
    ("exc", "detail"),
    [
        (
            ConnectionResetError("reset by peer\nat 10.0.0.1"),
            "the dispatch failed (ConnectionResetError: reset by peer)",
        ),
        (ConnectionResetError(), "the dispatch failed (ConnectionResetError)"),
        (
            OSError("https://x-access-token:ghs_secret123@github.com refused"),
            "the dispatch failed (OSError: https://github.com refused)",
        ),
    ],
)
async def test_a_failed_dispatch_is_marked_undispatched_with_its_first_line_and_raised(
    store: Store, exc: BaseException, detail: str
) -> None:
    t = Tiering(Forge(), TierRuns(store), run_db, Failing(exc), SluiceConfig(), lambda: AT)  # type: ignore[arg-type]
    with pytest.raises(type(exc)):
        await tiers.advance(t, 7)
    (run,) = TierRuns(store).for_pull(FORK, 7)
    assert (run.level, run.state, run.detail) == (Level.L1, RunState.UNDISPATCHED, detail)
