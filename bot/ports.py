"""The ports: what the core's callers need of git, the database, the job queue, GitHub and the clock.

Each `Protocol` is as narrow as its users; the adapters (`bot.git`, `bot.db`, `bot.github`, `bot.app`) satisfy
them structurally, and mypy checks that wherever an adapter is passed for a port.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from bot.core.models import CommitInfo, Disposition, FileChange, Plan, StoredChain

# The one time type: an injected clock returning an aware UTC datetime (tests freeze it). Durations measured
# with `time.monotonic()` (deadlines, timeouts) are not times of day and stay as they are.
Clock = Callable[[], dt.datetime]


class HistoryReader(Protocol):
    """Reading a repository's history: refs, commits, patches, blobs."""

    def resolve(self, ref: str, *, default_for: str | None = None) -> str: ...

    def resolve_optional(self, ref: str) -> str | None: ...

    def commits(
        self, *revs: str, first_parent: bool = False, no_merges: bool = False
    ) -> list[CommitInfo]: ...

    def first_parent_times(self, head: str) -> list[tuple[str, int]]: ...

    def range_patches(self, *revs: str, no_merges: bool = False) -> dict[str, tuple[FileChange, ...]]: ...

    def read_file(self, rev: str, path: str) -> bytes | None: ...

    def blobs(self, shas: Iterable[str]) -> dict[str, bytes]: ...


class CommitWriter(Protocol):
    """The plumbing a pick writes with: blobs, trees and commits; a branch moved by compare-and-swap."""

    def tree_of(self, commit: str) -> str: ...

    def write_blob(self, data: bytes) -> str: ...

    def commit(
        self, tree: str, parents: Sequence[str], message: str, *, author: CommitInfo, at: int
    ) -> str: ...

    def update_branch(self, branch: str, new: str, *, old: str | None) -> None: ...


class PlanStore(Protocol):
    """Where plans, open chains and people's dispositions are kept between runs."""

    def open_chains(self, fork_key: str) -> tuple[StoredChain, ...]: ...

    def dispositions(self, fork_key: str) -> Mapping[str, DispositionView]: ...

    def latest_plan(self, fork_key: str) -> Plan | None: ...

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


class DispositionView(Protocol):
    @property
    def disposition(self) -> Disposition: ...


class JobRequests(Protocol):
    """Asking for work: what a handler needs of the durable job queue."""

    def enqueue(self, kind: str, payload: dict[str, Any], *, key: str | None, now: dt.datetime) -> int: ...

    def enqueue_once(
        self, kind: str, payload: dict[str, Any], *, key: str, now: dt.datetime
    ) -> int | None: ...


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
