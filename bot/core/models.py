"""Data the planner reads and writes: upstream commits, their footprints, plans and dispositions."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Disposition(enum.StrEnum):
    PENDING = "pending"
    BUNDLED = "bundled"
    CHAINED = "chained"
    INGESTED = "ingested"
    DEFERRED = "deferred"
    SKIPPED = "skipped"
    EMERGENCY = "emergency"


class RecognitionMethod(enum.StrEnum):
    """How Sluice knows the fork already has an upstream commit."""

    ANCESTRY = "ancestry"  # reachable from fork trunk (fork point, merge-style ingestion)
    TRAILER = "trailer"  # `Upstream-Commit: <sha>` written by Sluice
    CHERRY_PICK_X = "cherry-pick-x"  # `(cherry picked from commit <sha>)`
    PATCH_ID = "patch-id"  # same `git patch-id --stable`
    SUBJECT_PATTERN = "subject-pattern"  # configured pattern, matched by PR number(s) or title
    # The fork has the change without having ingested the commit; none of these moves the ingestion tip.
    UPSTREAMED = "upstreamed"  # same patch-id as an older fork commit: a fork patch that went upstream
    ALREADY_APPLIED = "already-applied"  # its pick onto fork trunk would change nothing
    NET_ZERO = "net-zero"  # it and a later missing commit undo each other (a revert and what it reverts)
    PIN_PASSED = "pin-passed"  # moves a toolchain pin that the fork's pin has already passed

    @property
    def is_pick(self) -> bool:
        """A fork commit brought this upstream commit in (so it can be an ingestion)."""
        return self in PICK_METHODS


PICK_METHODS = frozenset(
    {
        RecognitionMethod.TRAILER,
        RecognitionMethod.CHERRY_PICK_X,
        RecognitionMethod.PATCH_ID,
        RecognitionMethod.SUBJECT_PATTERN,
    }
)


class Hunk(Frozen):
    """One `-U0` hunk: `old_start,old_count` in the parent, `new_start,new_count` in the commit."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()


class FileChange(Frozen):
    path: str
    old_path: str | None = None  # set for renames
    status: str  # A, M, D, R, C, T
    old_blob: str | None = None
    new_blob: str | None = None
    binary: bool = False
    hunks: tuple[Hunk, ...] = ()
    # Symbols whose definitions enclose or are changed by the hunks, e.g. "mlir::triton::foo" or "Cls.method".
    symbols: tuple[str, ...] = ()

    @property
    def changed_lines(self) -> int:
        return sum(h.old_count + h.new_count for h in self.hunks)


class CommitInfo(Frozen):
    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    author_time: int
    author_tz: str = "+0000"  # as git writes it, e.g. "-0400"
    committer_time: int
    message: str

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


class UpstreamCommit(Frozen):
    """One pending upstream commit with what it changes."""

    info: CommitInfo
    position: int  # index in the upstream stream, oldest = 0
    files: tuple[FileChange, ...] = ()
    # Predicted against fork trunk plus the earlier pending commits that applied: files a human must resolve
    # ("path (class)": api, semantic or unknown), and files a mechanical rule resolves ("path (rule)").
    conflict_files: tuple[str, ...] = ()
    resolved_files: tuple[str, ...] = ()
    conflict_checked: bool = False
    unreadable: str | None = None  # the path whose object the repository lacks: hunks and conflicts unknown

    @property
    def sha(self) -> str:
        return self.info.sha

    @property
    def changed_lines(self) -> int:
        return sum(f.changed_lines for f in self.files)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)


class PatchStackFootprint(Frozen):
    """What the fork's own commits changed, restricted to the paths pending commits touch."""

    commits: int = 0
    files: frozenset[str] = frozenset()
    # path -> normalised text of upstream lines the patch stack replaced or removed
    replaced_lines: dict[str, frozenset[str]] = Field(default_factory=dict)
    # path -> symbols the patch stack changed in that file
    symbols: dict[str, frozenset[str]] = Field(default_factory=dict)


class Recognised(Frozen):
    upstream_sha: str
    method: RecognitionMethod
    fork_sha: str | None = None  # None for ANCESTRY, ALREADY_APPLIED, NET_ZERO and PIN_PASSED
    emergency: bool = False
    detail: str = ""  # why, for the methods without a fork commit (e.g. "reverted by 1a2b3c4d5e")


class StreamStatus(Frozen):
    """The metrics the README defines (Metrics), computed from one repository state."""

    upstream_head: str
    upstream_head_time: int
    fork_head: str
    ingestion_tip: str | None
    ingestion_tip_time: int | None
    days_behind: float | None
    backlog_commits: int
    pending_commits: int
    ingested_commits: int
    emergency_commits: int
    patch_stack_commits: int
    recognised_by: dict[str, int]
    # Pending commits a person held (`sluice skip` / `sluice defer`): skipped ones (won't port) are neither
    # pending nor backlog; deferred ones stay pending work, and backlog once the tip passes them.
    skipped_commits: int = 0
    deferred_commits: int = 0
    # The oldest upstream commit the fork does not have, and its age: (upstream head − its committer time).
    oldest_missing: str | None = None
    oldest_missing_days: float | None = None
    # Commits whose diff needs an object the repository lacks (partial clone, snapshot): SHA -> path.
    unreadable: dict[str, str] = Field(default_factory=dict)
    # Ingestion lead time (upstream committer time -> the pick's committer time on the fork), in days, over
    # the most recent picks (metrics.LEAD_TIME_WINDOW); None when the fork has no recognised pick.
    lead_time_days_median: float | None = None
    lead_time_days_p90: float | None = None
    lead_time_picks: int = 0


class RiskLevel(enum.StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return list(RiskLevel).index(self)


class RiskKind(enum.StrEnum):
    PATCH_STACK_FILE = "patch-stack-file"
    PATCH_STACK_HUNK = "patch-stack-hunk"
    PATCH_STACK_SYMBOL = "patch-stack-symbol"
    PREDICTED_CONFLICT = "predicted-conflict"
    MECHANICAL_CONFLICT = "mechanical-conflict"
    COMPONENT = "component"
    LARGE = "large"
    REVERT = "revert"
    RELAND = "reland"
    EXTENSION_INTERFACE = "extension-interface"
    BINARY = "binary"
    UNREADABLE = "unreadable"
    BISECTED = "bisected"  # a bisection blamed it for a tier failure: it roots a risky chain
    HELD_DEPENDENCY = "held-dependency"  # depends on a deferred or skipped commit, which no plan holds


class RiskReason(Frozen):
    kind: RiskKind
    level: RiskLevel
    detail: str


class DependencyKind(enum.StrEnum):
    LINES = "lines"  # changes or borders lines the earlier commit changed
    SYMBOL = "symbol"  # changes a symbol the earlier commit changed
    REVERTS = "reverts"
    RELANDS = "relands"
    ADD_DELETE = "add-delete"  # touches a file the earlier commit added, deleted or renamed


class Dependency(Frozen):
    sha: str
    kind: DependencyKind
    detail: str


class RiskWeight(Frozen):
    """One feature of the risk model in a commit's probability: ×2.1 doubles the odds that it breaks."""

    feature: str
    odds_ratio: float
    detail: str  # what in the commit the feature stands for, e.g. "612 changed lines"


class PlannedCommit(Frozen):
    sha: str
    subject: str
    author: str
    committer_time: int
    changed_lines: int
    files: tuple[str, ...]
    symbols: tuple[str, ...]
    risk: RiskLevel
    reasons: tuple[RiskReason, ...]
    depends_on: tuple[Dependency, ...]
    # With a calibrated risk model: P(it breaks the fork), and the features that weigh most, strongest first.
    probability: float | None = None
    weights: tuple[RiskWeight, ...] = ()


class LowRiskBundle(Frozen):
    id: str
    commits: tuple[PlannedCommit, ...]

    @property
    def changed_lines(self) -> int:
        return sum(c.changed_lines for c in self.commits)


class RiskyChain(Frozen):
    id: str
    root: str  # the risky commit that started the chain
    risk: RiskLevel
    # Upstream commits of this chain that reached the fork already (from earlier plans), oldest first.
    ingested: tuple[str, ...] = ()
    commits: tuple[PlannedCommit, ...] = ()
    linked_files: tuple[str, ...] = ()
    linked_symbols: tuple[str, ...] = ()
    # What the already-ingested members touched: carried from plan to plan so follow-ups still link.
    ingested_files: tuple[str, ...] = ()
    ingested_symbols: tuple[str, ...] = ()
    # Why each pending member is in the chain: "critical pin", "depends on <sha> (lines)", "p 0.31 ≥ 0.12" …
    why: dict[str, str] = Field(default_factory=dict)
    # Chains this one was split from (`risk.max_chain`) that hold commits its members depend on: first those.
    after: tuple[str, ...] = ()


class RiskDecision(Frozen):
    """How the plan chose what to chain with a calibrated risk model."""

    model: str  # `default` or the configured path
    source: str  # the model's provenance: what history it was fitted on
    threshold: float  # commits above this probability are chained on their own
    chosen_by: str  # "expected-runs", or "chain-share" when `risk.chain_share` is configured
    expected_runs: float  # tier runs the plan is expected to take, bisections of failed bundles included
    bundle_culprits: float  # the cap on a bundle's summed probability


class Plan(Frozen):
    schema_version: int = 2  # 2: `order`
    fork_ref: str
    fork_head: str
    upstream_ref: str
    upstream_head: str
    config_digest: str
    status: StreamStatus
    bundles: tuple[LowRiskBundle, ...]
    chains: tuple[RiskyChain, ...]
    # Pending upstream commits left out of the plan, with the disposition that holds them (deferred, skipped).
    held: dict[str, Disposition] = Field(default_factory=dict)
    risk_decision: RiskDecision | None = None  # None: today's rules (no model configured or installed)
    # The order the units go in, by id (`strategy: merge`: the stream's); empty: bundles first, then chains.
    order: tuple[str, ...] = ()


class PickStatus(enum.StrEnum):
    CLEAN = "clean"
    AUTO_RESOLVED = "auto_resolved"
    PROPOSED = "proposed"  # a resolver hook proposed a resolution: a code owner must approve it
    NEEDS_HUMAN = "needs_human"
    ALREADY_APPLIED = "already_applied"  # the pick changes nothing: the fork has it; no commit is written


class HunkReport(Frozen):
    line: int  # where the hunk starts on fork trunk's side
    cls: str = Field(serialization_alias="class")
    rule: str | None
    symbol: str | None
    evidence: str
    key: str  # the conflict's content key (remembered resolutions)
    reused: bool = False  # resolved by a resolution a human made before
    blame: tuple[str, ...] = ()  # fork commits that last touched our side of this block


class FileEvidence(Frozen):
    upstream: str
    blame: tuple[str, ...]  # fork commits that last touched our side of the conflicting lines
    component: str | None
    symbol: str | None


class FileReport(Frozen):
    path: str
    cls: str = Field(serialization_alias="class")
    resolved: bool
    rule: str | None  # the rules that resolved it, comma-separated
    reason: str
    hunks: tuple[HunkReport, ...]
    evidence: FileEvidence
    # `strategy: merge`: the upstream commits the merge brings (itself included) that change this file, so a
    # conflict is told from the commit that caused it, which may be an earlier one the merge brings along
    changed_by: tuple[str, ...] = ()

    def fork_commits(self) -> tuple[str, ...]:
        """The fork commits on the other side of the conflict, in the order of its blocks: whom to ask."""
        return tuple(dict.fromkeys([*(sha for h in self.hunks for sha in h.blame), *self.evidence.blame]))


class CommitReport(Frozen):
    upstream: str
    subject: str
    status: PickStatus
    tree: str | None  # the resulting tree, unless a human is needed
    commit: str | None = None  # the commit written on the branch (not with --dry-run)
    files: tuple[FileReport, ...] = ()
    # `strategy: merge`: the earlier upstream commits this merge brings too (upstream's first-parent stream
    # between the head and this commit, none of them named in the pick), oldest first
    brings: tuple[str, ...] = ()


class PickReport(Frozen):
    schema_version: int = 3  # 2: `untried`; 3: `brings`, `changed_by`
    onto: str
    strategy: str
    dry_run: bool
    branch: str | None
    head: str | None  # the branch head written, when every commit applied
    commits: tuple[CommitReport, ...]
    # `strategy: merge`: the commits after one that needs a human, not tried (a merge of any of them would
    # bring that one too, and report its conflicts as theirs).
    untried: tuple[str, ...] = ()


# What the store keeps between runs, as the core reads it.
class ChainStatus(enum.StrEnum):
    OPEN = "open"
    CLOSED = "closed"


class ResolutionSource(enum.StrEnum):
    HUMAN = "human"  # a person resolved the conflict (learned from the file as merged)
    PROPOSED = "proposed"  # the resolver command proposed it; nobody has approved it yet


@dataclass(frozen=True)
class StoredChain:
    id: str
    root: str
    members: tuple[str, ...]  # upstream SHAs, upstream order; only ever grows
    status: str  # ChainStatus value


@dataclass(frozen=True)
class DispositionRecord:
    sha: str
    disposition: Disposition
    reason: str | None
    approver: str | None
    plan_id: int | None
    group_id: str | None  # the bundle or chain that carries (or carried) the commit
    updated_at: dt.datetime
