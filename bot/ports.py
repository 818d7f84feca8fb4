"""The ports: what the core's callers need of git, the plan store, GitHub and the clock.

Each `Protocol` is as narrow as its users; the adapters (`bot.git`, `bot.db`, `bot.github`, `bot.app`) satisfy
them structurally, and mypy checks that wherever an adapter is passed for a port.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from bot.core.models import Disposition, Plan
from bot.core.tiers import Subject, TierRun

# The one time type: an injected clock returning an aware UTC datetime (tests freeze it). Durations measured
# with `time.monotonic()` (deadlines, timeouts) are not times of day and stay as they are.
Clock = Callable[[], dt.datetime]


class FileReader(Protocol):
    """Reading one file as a commit has it (a risk model kept in fork trunk's tree)."""

    def read_file(self, rev: str, path: str) -> bytes | None: ...


class PlanRecorder(Protocol):
    """Where a plan, and the emergency picks found with it, are recorded for the next run."""

    def record_plan(self, fork_key: str, plan: Plan, *, ingested: Iterable[str], at: dt.datetime) -> int: ...

    def set_disposition(
        self,
        fork_key: str,
        sha: str,
        disposition: Disposition,
        *,
        reason: str | None,
        approver: str | None,
        at: dt.datetime,
    ) -> None: ...


class Forge(Protocol):
    """What ingestion needs of GitHub for one fork: reading its ingestion PRs, sticky comments, check runs
    and tracking issues (`observe`), and one call per action `reconcile` decides (`apply`)."""

    repo: str

    async def open_pulls(self) -> list[dict[str, Any]]: ...

    async def find_comment(self, number: int, *, marker: str) -> dict[str, Any] | None: ...

    async def check_runs(self, sha: str) -> dict[str, dict[str, Any]]: ...

    async def open_issues(self, *, label: str) -> list[dict[str, Any]]: ...

    async def create_pull(self, *, title: str, body: str, head: str, base: str) -> dict[str, Any]: ...

    async def edit_pull(self, number: int, changes: Mapping[str, str]) -> None: ...

    async def close_pull(self, number: int, *, comment: str) -> None: ...

    async def replace_labels(self, number: int, labels: Sequence[str]) -> None: ...

    async def post_comment(self, number: int, body: str) -> int: ...

    async def edit_comment(self, comment_id: int, body: str) -> None: ...

    async def create_check_run(self, sha: str, name: str, *, title: str) -> None: ...

    async def create_issue(self, *, title: str, body: str, labels: Sequence[str]) -> int: ...

    async def edit_issue(self, number: int, *, title: str, body: str) -> None: ...

    async def close_issue(self, number: int, *, comment: str) -> None: ...


class TierForge(Protocol):
    """What tiered validation needs of GitHub for one fork: the PR under test, its check runs, and the tier
    workflows (dispatch, the dispatched runs, their artifacts)."""

    repo: str

    async def pull(self, number: int) -> dict[str, Any]: ...

    async def check_runs(self, sha: str) -> dict[str, dict[str, Any]]: ...

    async def new_check_run(self, sha: str, name: str, body: Mapping[str, Any]) -> int: ...

    async def update_check_run(self, check_run_id: int, body: Mapping[str, Any]) -> None: ...

    async def dispatch_workflow(
        self, workflow: str, *, ref: str, inputs: Mapping[str, str]
    ) -> int | None: ...

    async def dispatched_runs(self, *, created_since: str) -> list[dict[str, Any]]: ...

    async def run_artifact(self, run_id: int, name: str) -> bytes | None: ...


class TierBackend(Protocol):
    """Where a tier runs: GitHub Actions (a workflow dispatch) or the bot's own machine (`local`). `start`
    returns the workflow run's id when it is known; it raises DispatchRefused when GitHub refuses."""

    async def start(self, subject: Subject, run: TierRun, *, workflow: str) -> int | None: ...
