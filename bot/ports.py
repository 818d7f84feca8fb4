"""The ports: what the core's callers need of git, the plan store, the job queue, the registry, GitHub and
the clock.

Each `Protocol` is as narrow as its users; the adapters (`bot.git`, `bot.db`, `bot.github`, `bot.app`) satisfy
them structurally, and mypy checks that wherever an adapter is passed for a port.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self

from bot.core.audit import AuditRecord
from bot.core.bisect_pr import BisectionRecord
from bot.core.gate import Approval, Hold, Pause, Waiver
from bot.core.ingestion import IngestionRecord
from bot.core.l3_metrics import L3Metrics, Regression, Signoff
from bot.core.lag import LagPoint
from bot.core.models import CommitInfo, Disposition, FileChange, Plan
from bot.core.tiers import Level, Subject, TierRun
from bot.core.trunk_watch import Tracked
from bot.core.webhooks import CheckRun, Comment, FullIssue, Pull, PullReview, RepoCommit, WorkflowRun

# The one time type: an injected clock returning an aware UTC datetime (tests freeze it). Durations measured
# with `time.monotonic()` (deadlines, timeouts) are not times of day and stay as they are.
Clock = Callable[[], dt.datetime]


class FileReader(Protocol):
    """Reading one file as a commit has it (a risk model kept in fork trunk's tree)."""

    def read_file(self, rev: str, path: str) -> bytes | None: ...


class HistoryReader(FileReader, Protocol):
    """Reading a repository's history beyond one file: refs, commit walks, diffs, patch-ids, blobs, and the
    read-only `git` commands (`rev-list`, `log`, `merge-base`, `cat-file`) the flows run themselves."""

    @property
    def path(self) -> Path: ...

    @property
    def unreadable(self) -> dict[str, str]:
        """Commits whose diff needs an object the repository lacks: SHA -> what git could not read (readers
        add to it)."""
        ...

    def run(self, *args: str, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> str: ...

    def resolve(self, ref: str, *, default_for: str | None = None) -> str: ...

    def first_parent_times(self, head: str) -> list[tuple[str, int]]: ...

    def commits(
        self, *revs: str, first_parent: bool = False, no_merges: bool = False
    ) -> list[CommitInfo]: ...

    def range_patches(self, *revs: str, no_merges: bool = False) -> dict[str, tuple[FileChange, ...]]: ...

    def patch_ids(self, *revs: str, stdin_shas: Sequence[str] = ()) -> dict[str, str]: ...

    def log_each(self, options: Sequence[str], shas: Sequence[str], *, mark: bytes) -> bytes: ...

    def patches_of(
        self, shas: Sequence[str], *, paths: Sequence[str] = ()
    ) -> dict[str, tuple[FileChange, ...]]: ...

    def changed_files(self, shas: Sequence[str]) -> dict[str, tuple[FileChange, ...]]: ...

    def missing_objects(self, shas: Iterable[str]) -> set[str]: ...

    def blobs(self, shas: Iterable[str]) -> dict[str, bytes]: ...

    def read_files(self, rev: str, paths: Iterable[str]) -> dict[str, bytes]: ...

    def tree_of(self, commit: str) -> str: ...


@dataclass(frozen=True)
class Stage:
    """One side of a conflicted path in a merge's index: its mode and blob."""

    mode: str
    oid: str


@dataclass(frozen=True)
class MergeResult:
    """`git merge-tree --write-tree`: the tree (conflict markers where it conflicted) and index stages."""

    tree: str
    stages: dict[
        str, dict[int, Stage]
    ]  # conflicted path -> {1: base, 2: ours, 3: theirs}; a missing stage = absent

    @property
    def clean(self) -> bool:
        return not self.stages


class CommitWriter(Protocol):
    """The plumbing a pick merges and writes with, never touching a work tree or HEAD: `merge-tree`,
    `merge-file`, blobs and trees, commits, a branch moved by compare-and-swap, and the two reads a conflict's
    evidence needs (`blame`, `grep`) at the revisions being merged."""

    def merge(self, ours: str, theirs: str) -> MergeResult: ...

    def merge_file(self, base: bytes, ours: bytes, theirs: bytes, *, workdir: Path) -> tuple[str, int]: ...

    def write_blob(self, data: bytes) -> str: ...

    def replace_in_tree(self, tree: str, entries: dict[str, Stage], *, workdir: Path) -> str: ...

    def commit(
        self, tree: str, parents: Sequence[str], message: str, *, author: CommitInfo, at: int
    ) -> str: ...

    def update_branch(self, branch: str, new: str, *, old: str | None) -> None: ...

    def blame(
        self, rev: str, path: str, ranges: Sequence[tuple[int, int]], *, since: str | None = None
    ) -> list[tuple[str, ...]]: ...

    def grep_word(
        self, rev: str, word: str, *, limit: int = 20, suffixes: Sequence[str] = ()
    ) -> list[tuple[str, int, str]]: ...


class Repository(HistoryReader, Protocol):
    """A repository picks are probed and made in: a quarantined view takes the probes' objects, the ones a
    kept result needs are adopted, and its `plumbing` merges and writes."""

    def quarantined(self) -> AbstractContextManager[Self]: ...

    def adopt(self, view: Self, head: str, *, have: Sequence[str]) -> int: ...

    def plumbing(self) -> CommitWriter: ...

    def write_object(self, kind: bytes, data: bytes) -> str: ...

    def write_commit(
        self,
        tree: str,
        parents: Sequence[str],
        message: str,
        *,
        timestamp: int,
        author: str = ...,
        author_time: int | None = None,
        author_tz: str = ...,
    ) -> str: ...


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
    and tracking issues (`observe`), one call per action `reconcile` decides (`apply`), and finding, editing
    or reopening its dashboard issue (`bot.flows.dashboard.publish`)."""

    repo: str

    async def open_pulls(self) -> list[Pull]: ...

    async def find_comment(self, number: int, *, marker: str) -> Comment | None: ...

    async def check_runs(self, sha: str) -> dict[str, CheckRun]: ...

    async def open_issues(self, *, label: str) -> list[FullIssue]: ...  # the App's own issues only

    async def create_pull(self, *, title: str, body: str, head: str, base: str) -> Pull: ...

    async def edit_pull(self, number: int, changes: Mapping[str, str]) -> None: ...

    async def close_pull(self, number: int, *, comment: str) -> None: ...

    async def replace_labels(self, number: int, labels: Sequence[str]) -> None: ...

    async def post_comment(self, number: int, body: str) -> int: ...

    async def edit_comment(self, comment_id: int, body: str) -> None: ...

    async def create_check_run(self, sha: str, name: str, *, title: str) -> None: ...

    async def closed_issues(self, *, label: str) -> list[FullIssue]: ...

    async def create_issue(self, *, title: str, body: str, labels: Sequence[str]) -> int: ...

    async def edit_issue(self, number: int, *, title: str, body: str) -> None: ...

    async def reopen_issue(self, number: int, *, title: str, body: str) -> None: ...

    async def close_issue(self, number: int, *, comment: str) -> None: ...

    async def own_issue(self, number: int) -> FullIssue | None: ...

    async def add_labels(self, number: int, labels: Sequence[str]) -> None: ...


@dataclass(frozen=True)
class Job:
    """A claimed job as its handler gets it."""

    id: int
    kind: str
    key: str | None  # jobs sharing a key (a fork) never run at the same time
    payload: dict[str, Any]
    attempts: int  # including the one this claim starts
    delivery_id: str | None


class JobRequests(Protocol):
    """What handlers ask of the durable job queue: an internal job enqueued once per key
    (`handlers.requests`), and which webhook deliveries it holds already (the resync)."""

    def enqueue_once(
        self, kind: str, payload: dict[str, Any], *, key: str, now: dt.datetime, same: Sequence[str] = ()
    ) -> int | None: ...

    def recorded(self, delivery_ids: set[str]) -> set[str]: ...


class LagRecorder(Protocol):
    """Where an ingestion run leaves its point of the fork's lag history, and the dashboard reads the trend
    back (`bot.db.lag.LagHistory`)."""

    def record(self, point: LagPoint) -> None: ...

    def history(self, fork: str, *, limit: int = ...) -> list[LagPoint]: ...


class LagReader(Protocol):
    """The fork's lag history read back (`/status`): its newest `limit` points, oldest first."""

    def history(self, fork: str, *, limit: int = ...) -> list[LagPoint]: ...


@dataclass(frozen=True)
class CommandRecord:
    """One slash command: who ran it where, and what became of it (`accepted`, `refused` or `failed`)."""

    comment_id: int
    repo: str
    number: int
    actor: str
    command: str
    line: str
    outcome: str
    reason: str
    at: dt.datetime
    reply: str | None = None  # what Sluice answered an accepted command (a retry answers the same)


class CommandLog(Protocol):
    """The audit log of slash commands, one record per comment (`bot.db.audit.CommandAudit`)."""

    def record(self, entry: CommandRecord) -> None: ...

    def entry(self, comment_id: int) -> CommandRecord | None: ...

    def entries(self, repo: str) -> list[CommandRecord]: ...


@dataclass(frozen=True)
class Fork:
    """A repository Sluice keeps in sync: its trunk, and the upstream branch it follows."""

    repo: str
    installation_id: int
    branch: str
    upstream_url: str
    upstream_branch: str
    upstream_repo: str | None
    upstream_seen: str | None


class ForkRegistry(Protocol):
    """What handlers (and the upstream access rule) read and write of the installations, the forks among their
    repositories, and each fork's ingestion PRs."""

    def record_installation(
        self, installation_id: int, account: str, repos: list[str], *, at: dt.datetime
    ) -> None: ...

    def add_repos(self, installation_id: int, repos: list[str]) -> None: ...

    def remove_repos(self, installation_id: int, repos: list[str]) -> None: ...

    def forget_installation(self, installation_id: int) -> None: ...

    def installation_of(self, repo: str) -> int | None: ...

    def register_fork(self, fork: Fork, *, at: dt.datetime) -> None: ...

    def unregister_fork(self, repo: str) -> None: ...

    def fork(self, repo: str) -> Fork | None: ...

    def forks_tracking(self, upstream_repo: str, branch: str) -> list[Fork]: ...

    def all_forks(self) -> list[Fork]: ...

    def mark_upstream_seen(self, repo: str, *, old: str | None, new: str) -> bool: ...

    def dashboard_issue(self, repo: str) -> int | None: ...

    def remember_dashboard(self, repo: str, number: int) -> None: ...

    def save_ingestion(self, record: IngestionRecord, *, at: dt.datetime) -> None: ...

    def close_pull(self, fork: str, ingestion: str, number: int, *, at: dt.datetime) -> bool: ...

    def ingestions(self, fork: str, *, state: str | None = None) -> list[IngestionRecord]: ...


class GateRecords(Protocol):
    """What the gate, the merge and the commands remember per ingestion PR (waivers, approvals, holds, the
    audit record) and per fork (the pause, the safety throttle's run of failures): bot.db.gates.GateStore."""

    def add_waiver(self, fork: str, pr_number: int, waiver: Waiver, *, at: dt.datetime) -> None: ...

    def expired_unjudged(self, now: dt.datetime) -> list[tuple[str, int]]: ...

    def waivers(self, fork: str, pr_number: int) -> list[Waiver]: ...

    def record_approval(
        self, fork: str, pr_number: int, *, login: str, head_sha: str, at: dt.datetime
    ) -> None: ...

    def approvals(self, fork: str, pr_number: int) -> list[Approval]: ...

    def set_hold(self, fork: str, pr_number: int, *, by: str, reason: str, at: dt.datetime) -> None: ...

    def clear_hold(self, fork: str, pr_number: int) -> bool: ...

    def hold(self, fork: str, pr_number: int) -> Hold | None: ...

    def pause(self, fork: str, *, by: str, reason: str, at: dt.datetime) -> None: ...

    def resume(self, fork: str) -> None: ...

    def paused(self, fork: str) -> Pause | None: ...

    def record_failure(
        self, fork: str, pr_number: int, *, head_sha: str, tier: str, at: dt.datetime
    ) -> int: ...

    def record_success(self, fork: str) -> None: ...

    def consecutive_failures(self, fork: str) -> int: ...

    def save_audit(self, record: AuditRecord, *, at: dt.datetime) -> None: ...

    def audit(self, fork: str, pr_number: int) -> AuditRecord | None: ...


class CheckRunWriter(Protocol):
    """Creating and updating check runs (`bot.flows.checks.show` decides which)."""

    async def check_runs(self, sha: str) -> dict[str, CheckRun]: ...

    async def new_check_run(self, sha: str, name: str, body: Mapping[str, Any]) -> int: ...

    async def update_check_run(self, check_run_id: int, body: Mapping[str, Any]) -> None: ...


class GateForge(CheckRunWriter, Protocol):
    """What the gate and the merge need of GitHub for one fork: the PR, its reviews, CODEOWNERS, team
    membership, an approver's permission, its check runs, the pinned merge, the rollback tag, and a
    comment."""

    repo: str

    async def get_pull(self, number: int) -> Pull: ...

    async def pull_reviews(self, number: int) -> list[PullReview]: ...

    async def pull_files(self, number: int) -> list[str]: ...

    async def read_text(self, path: str, *, ref: str) -> str | None: ...

    async def in_team(self, team: str, login: str) -> bool: ...

    async def permission_level(self, login: str) -> str: ...

    async def merge_pull(self, number: int, *, sha: str, method: str, title: str) -> str: ...

    async def get_commit(self, sha: str) -> RepoCommit: ...

    async def first_parent(self, sha: str) -> str: ...

    async def create_tag(self, name: str, sha: str) -> bool: ...

    async def post_comment(self, number: int, body: str) -> int: ...

    async def upsert_comment(self, number: int, *, marker: str, body: str) -> int: ...


class TierRunRecords(Protocol):
    """Each attempt of a tier on a PR head, as the tier flows keep it (`bot.db.tier_runs.TierRuns`)."""

    def add(self, run: TierRun) -> TierRun | None: ...

    def save(self, run: TierRun) -> None: ...

    def finish(self, run: TierRun, regressions: Sequence[Regression] | None = None) -> bool: ...

    def mark_undispatched(self, key: int, *, detail: str) -> None: ...

    def claim_undispatched(self, key: int, *, at: dt.datetime) -> TierRun | None: ...

    def set_run_id(self, key: int, run_id: int) -> None: ...

    def get(self, run_id: int) -> TierRun | None: ...

    def for_pull(self, fork: str, pull: int) -> list[TierRun]: ...

    def waiting(self) -> list[TierRun]: ...

    def by_workflow_run(self, fork: str, run_id: int) -> TierRun | None: ...

    def pull_for_head(self, fork: str, head_sha: str) -> int | None: ...

    def latest_report(self, fork: str, level: Level, *, head_sha: str) -> str | None: ...

    def baseline(self, fork: str, level: Level, *, head_sha: str) -> TierRun | None: ...

    def regressions(self, key: int) -> tuple[Regression, ...]: ...


class SignoffRecords(Protocol):
    """L3's metrics on a PR head (its newest attempt's regressions) and the area owners' `/signoff l3` there
    (`bot.db.signoffs.L3Signoffs`)."""

    def l3_metrics(self, fork: str, pr_number: int, *, head_sha: str) -> L3Metrics | None: ...

    def record_signoff(
        self, fork: str, pr_number: int, *, login: str, head_sha: str, at: dt.datetime
    ) -> bool: ...

    def signoffs(self, fork: str, pr_number: int) -> list[Signoff]: ...


class TierForge(CheckRunWriter, Protocol):
    """What tiered validation needs of GitHub for one fork: the PR under test, its check runs, and the tier
    workflows (dispatch, the dispatched runs, their artifacts)."""

    repo: str

    async def get_pull(self, number: int) -> Pull: ...

    async def dispatch_workflow(
        self, workflow: str, *, ref: str, inputs: Mapping[str, str]
    ) -> int | None: ...

    async def dispatched_runs(self, *, created_since: str) -> list[WorkflowRun]: ...

    async def run_artifact(self, run_id: int, name: str, *, max_bytes: int) -> bytes | None: ...

    async def workflow_run(self, run_id: int) -> WorkflowRun: ...


class TierBackend(Protocol):
    """Where a tier runs: GitHub Actions (a workflow dispatch) or the bot's own machine (`local`). `start`
    returns the workflow run's id when it is known; it raises DispatchRefused when GitHub refuses. `earlier`:
    when an earlier dispatch of the same run failed without an answer (it may have started a run anyway)."""

    async def start(
        self, subject: Subject, run: TierRun, *, workflow: str, earlier: dt.datetime | None = None
    ) -> int | None: ...


class BisectionRecords(Protocol):
    """Bisections of failed ingestions and the culprits they blamed (`bot.db.bisections.Bisections`)."""

    def start(self, record: BisectionRecord, *, at: dt.datetime) -> BisectionRecord | None: ...

    def save(self, record: BisectionRecord, *, at: dt.datetime) -> BisectionRecord | None: ...

    def get(self, key: int) -> BisectionRecord | None: ...

    def running(self, fork: str, pull: int) -> BisectionRecord | None: ...

    def for_pull(self, fork: str, pull: int) -> list[BisectionRecord]: ...

    def for_fork(self, fork: str) -> list[BisectionRecord]: ...

    def blame(
        self, fork: str, sha: str, *, level: Level, pull: int, bisection: int, detail: str, at: dt.datetime
    ) -> None: ...

    def blamed(self, fork: str) -> dict[str, str]: ...


class TrunkWatchRecords(Protocol):
    """Failures tracked on fork trunk and trunk's own tier runs (`bot.db.trunk_watch.TrunkWatchStore`);
    `save` is a compare-and-set on the version `tracked` or `open_failures` returned."""

    def add(self, tracked: Tracked, *, at: dt.datetime) -> bool: ...

    def save(self, tracked: Tracked, *, version: int, at: dt.datetime) -> bool: ...

    def tracked(self, fork: str, key: str) -> tuple[Tracked, int] | None: ...

    def open_failures(self, fork: str) -> list[tuple[Tracked, int]]: ...

    def trunk_runs(
        self, fork: str, *, ingestion: str, level: Level | None = None, limit: int = ...
    ) -> list[TierRun]: ...

    def runs_on(self, fork: str, level: Level, head_sha: str) -> list[TierRun]: ...

    def waiting(self, fork: str) -> list[TierRun]: ...
