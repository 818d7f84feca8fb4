"""Reads a repository into what the pure core needs: the stream, what the fork has, pending footprints."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypedDict

from bot.core.analysis import distinctive, normalise_line
from bot.core.config import SluiceConfig, Strategy, parse_config_bytes
from bot.core.errors import MissingObject
from bot.core.metrics import pending_shas, pick_lead_times, stream_status
from bot.core.models import (
    CommitInfo,
    FileChange,
    PatchStackFootprint,
    Recognised,
    StreamStatus,
    UpstreamCommit,
)
from bot.core.recognise import ingestion_commits, recognise
from bot.core.refs import validate_sha
from bot.flows.applied import find_applied
from bot.flows.pick import Picker, StepResult
from bot.git.facts import CommitFacts, FactKey, stack_touching
from bot.ports import FileReader, HistoryReader, Repository

CONFIG_PATH = ".github/sluice.yml"
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Snapshot:
    """One reading of fork trunk and the upstream stream."""

    fork_ref: str
    upstream_ref: str
    fork_head: str
    upstream_head: str
    stream: tuple[tuple[str, int], ...]
    missing: frozenset[str]
    candidates: tuple[CommitInfo, ...]  # first-parent upstream commits not reachable from fork trunk
    fork_commits: tuple[CommitInfo, ...]  # reachable from fork trunk only
    recognised: Mapping[str, Recognised]
    status: StreamStatus
    unreadable: Mapping[str, str] = field(default_factory=dict)  # commit -> a path whose blob is missing

    @property
    def pending(self) -> list[str]:
        return pending_shas([sha for sha, _ in self.stream], set(self.missing), self.recognised)

    @property
    def ingested(self) -> set[str]:
        """Upstream commits the fork has through regular ingestion (ancestry or a recognised pick)."""
        regular = {sha for sha, r in self.recognised.items() if not r.emergency}
        return {sha for sha, _ in self.stream if sha not in self.missing or sha in regular}

    @property
    def emergency(self) -> dict[str, Recognised]:
        """Upstream commits the fork has only through an emergency pick."""
        return {sha: r for sha, r in self.recognised.items() if r.emergency}

    @property
    def patch_stack(self) -> list[CommitInfo]:
        return patch_stack_of(self.fork_commits, self.recognised)


def patch_stack_of(
    fork_commits: Iterable[CommitInfo], recognised: Mapping[str, Recognised]
) -> list[CommitInfo]:
    """The fork's own commits: not merges, not picks of upstream commits."""
    picks = ingestion_commits(recognised)
    return [c for c in fork_commits if len(c.parents) < 2 and c.sha not in picks]


def load_repo_config(
    repo: FileReader,
    fork_head: str,
    fork_ref: str,
    *,
    trusted_url_prefixes: Sequence[str] = (),
    machine_paths: bool = True,
) -> SluiceConfig:
    """The fork's own `.github/sluice.yml` at fork trunk, or the defaults when it has none (`machine_paths`:
    whether it may name files on this machine, as a person's own checkout may and the service's may not)."""
    raw = repo.read_file(fork_head, CONFIG_PATH)
    if raw is None:
        return SluiceConfig()
    name = f"{fork_ref}:{CONFIG_PATH}"
    return parse_config_bytes(
        raw,
        filename=name,
        trusted_url_prefixes=trusted_url_prefixes,
        machine_paths=machine_paths,
    )


def take_snapshot(
    repo: Repository,
    *,
    fork_ref: str,
    upstream_ref: str,
    config: SluiceConfig,
    progress: Progress = _quiet,
    facts: CommitFacts | None = None,
) -> Snapshot:
    """Read both histories; `facts` (from the store) spares re-reading the patch-ids of known commits."""
    facts = facts or CommitFacts(repo)
    fork_head, upstream_head = repo.resolve(fork_ref), repo.resolve(upstream_ref)
    progress("reading the upstream stream")
    with ThreadPoolExecutor(max_workers=2) as pool:  # three `git log`s: the waits overlap
        stream_log = pool.submit(repo.first_parent_times, upstream_head)
        candidates_log = pool.submit(repo.commits, upstream_head, "--not", fork_head, first_parent=True)
        fork_commits = tuple(repo.commits(fork_head, "--not", upstream_head))
        stream, candidates = tuple(stream_log.result()), tuple(candidates_log.result())
    progress(
        f"recognising ingested commits among {len(candidates)} upstream and {len(fork_commits)} fork commits"
    )
    recognised = _recognised(
        repo, facts, candidates, fork_commits, heads=(fork_head, upstream_head), stream=stream, config=config
    )
    missing = frozenset(c.sha for c in candidates)
    stack = len(patch_stack_of(fork_commits, recognised))
    read = missing | {c.sha for c in fork_commits}
    # Both readers note what they could not read: the facts (patch-ids, diffs) and git's own log walks.
    unreadable = {sha: path for sha, path in {**repo.unreadable, **facts.unreadable}.items() if sha in read}
    status = stream_status(
        stream,
        missing=set(missing),
        recognised=recognised,
        fork_head=fork_head,
        patch_stack_commits=stack,
        picks_move_tip=config.strategy is Strategy.CHERRY_PICK,
        unreadable=unreadable,
        lead_times=pick_lead_times(candidates, fork_commits, recognised),
    )
    return Snapshot(
        fork_ref=fork_ref,
        upstream_ref=upstream_ref,
        fork_head=fork_head,
        upstream_head=upstream_head,
        stream=stream,
        missing=missing,
        candidates=candidates,
        fork_commits=fork_commits,
        recognised=recognised,
        status=status,
        unreadable=unreadable,
    )


def _recognised(
    repo: Repository,
    facts: CommitFacts,
    candidates: Sequence[CommitInfo],
    fork_commits: Sequence[CommitInfo],
    *,
    heads: tuple[str, str],
    stream: Sequence[tuple[str, int]],
    config: SluiceConfig,
) -> dict[str, Recognised]:
    """The missing upstream commits the fork has (picks, twins) or, on a fork that picks, needs no pick of."""
    upstream_ids = facts.patch_ids([c.sha for c in candidates if len(c.parents) < 2])
    fork_ids = facts.patch_ids([c.sha for c in fork_commits if len(c.parents) < 2])
    recognised = recognise(
        candidates, fork_commits, upstream_patch_ids=upstream_ids, fork_patch_ids=fork_ids, config=config
    )
    if config.strategy is Strategy.MERGE:
        # A merge brings every commit before the one merged, needed or not: a pair split between two merges
        # (an LLVM bump and its revert) puts the first on trunk in between. Planned, each is listed in the
        # unit whose merge brings it, with its own risk.
        return recognised
    # Only what the explicit evidence and patch-ids left over: a pick that would change nothing.
    rest = [c for c in candidates if c.sha not in recognised]
    fork_head, upstream_head = heads
    return recognised | find_applied(
        repo, fork_head=fork_head, upstream_head=upstream_head, commits=rest, stream=stream, config=config
    )


def patch_stack_footprint(
    facts: CommitFacts, snapshot: Snapshot, paths: Iterable[str]
) -> PatchStackFootprint:
    """What the patch stack changed in the given paths: files, the upstream lines it replaced, symbols; only
    in files where fork trunk still differs from upstream as of the ingestion tip (a fork commit and its
    revert, or a revert and its reapplication, leave a file as upstream has it: none of it is the fork's)."""
    differing = None
    if snapshot.status.ingestion_tip is not None:
        differing = differing_paths(facts.repo, snapshot.status.ingestion_tip, snapshot.fork_head)
    return footprint_of(facts, [c.sha for c in snapshot.patch_stack], paths, differing=differing)


def differing_paths(repo: HistoryReader, base: str, head: str) -> frozenset[str]:
    """The paths whose content differs between two commits (renames not followed: both names count)."""
    names = repo.run(
        "diff", "--name-only", "--no-renames", "-z", validate_sha(base), validate_sha(head), "--"
    )
    return frozenset(name for name in names.split("\0") if name)


def footprint_of(
    facts: CommitFacts,
    stack: Sequence[str],
    paths: Iterable[str],
    *,
    differing: Collection[str] | None = None,
) -> PatchStackFootprint:
    """What the given patch-stack commits changed in `paths` (see `patch_stack_footprint`), in the paths of
    `differing` only when it is given."""
    wanted = set(paths) if differing is None else set(paths) & set(differing)
    if not stack or not wanted:
        return PatchStackFootprint(commits=len(stack))
    patches = facts.patches(stack_touching(facts, stack, wanted), only=wanted)
    annotated = facts.with_symbols({sha: files for sha, files in patches.items() if files})
    files: set[str] = set()
    replaced: dict[str, set[str]] = {}
    touched: dict[str, set[str]] = {}
    for changes in annotated.values():
        for change in changes:
            files.add(change.path)
            lines = (normalise_line(line) for h in change.hunks for line in h.removed)
            replaced.setdefault(change.path, set()).update(line for line in lines if distinctive(line))
            touched.setdefault(change.path, set()).update(change.symbols)
    return PatchStackFootprint(
        commits=len(stack),
        files=frozenset(files),
        replaced_lines={p: frozenset(v) for p, v in sorted(replaced.items())},
        symbols={p: frozenset(v) for p, v in sorted(touched.items())},
    )


StreamPatches = tuple[tuple[str, tuple[FileChange, ...]], ...]


@dataclass(frozen=True)
class PendingAnalysis:
    commits: tuple[UpstreamCommit, ...]  # oldest first, with symbols and predicted conflicts
    # every stream commit from the first pending or held one on, oldest first; held ones with symbols
    stream_patches: StreamPatches
    footprint: PatchStackFootprint


def analyse_pending(
    repo: Repository,
    snapshot: Snapshot,
    *,
    config: SluiceConfig,
    skip: Iterable[str] = (),
    progress: Progress = _quiet,
    facts: CommitFacts | None = None,
) -> PendingAnalysis:
    facts = facts or CommitFacts(repo)
    skipped, missing = set(skip), snapshot.pending
    pending = [sha for sha in missing if sha not in skipped]
    if not pending:
        return PendingAnalysis(commits=(), stream_patches=(), footprint=PatchStackFootprint())
    # Held commits are not planned, but the fork lacks what they changed: the planner tracks them as owners.
    held = [sha for sha in missing if sha in skipped]
    infos = {c.sha: c for c in snapshot.candidates}
    position = {sha: i for i, (sha, _) in enumerate(snapshot.stream)}
    since_first = [sha for sha, _ in snapshot.stream[position[missing[0]] :]]
    # Conflict prediction mostly waits on `git merge-tree`; the diffs and symbols are Python work.
    # Running them side by side uses both cores. Its probe objects go to a throwaway object directory.
    known = facts.verdicts(pending)
    verdicts = dict(known)  # the worker thread reads and extends it; only this thread uses the store
    with repo.quarantined() as probe, ThreadPoolExecutor(max_workers=1) as pool:
        predicted = pool.submit(
            predict_conflicts,
            probe,
            snapshot.fork_head,
            [infos[s] for s in pending],
            config=config,
            progress=progress,
            verdicts=verdicts,
        )
        stream_patches = facts.patches(since_first)
        own = facts.with_symbols({sha: stream_patches[sha] for sha in pending})
        stream_patches.update(facts.with_symbols({sha: stream_patches[sha] for sha in held}))
        footprint = patch_stack_footprint(facts, snapshot, (f.path for files in own.values() for f in files))
        conflicts = predicted.result()
    facts.keep_verdicts({key: value for key, value in verdicts.items() if key not in known})
    commits = tuple(
        UpstreamCommit(
            info=infos[sha],
            position=position[sha],
            files=own[sha],
            unreadable=repo.unreadable.get(sha) or facts.unreadable.get(sha),
            **conflicts[sha],
        )
        for sha in pending
    )
    return PendingAnalysis(commits=commits, stream_patches=tuple(stream_patches.items()), footprint=footprint)


def _step(picker: Picker, fork_head: str, tree: str, commit: CommitInfo) -> StepResult | None:
    """One probe pick, or None when git cannot read an object the commit needs (noted in `unreadable`)."""
    try:
        return picker.step(fork_head, tree, commit, strategy=Strategy.CHERRY_PICK)
    except MissingObject as exc:
        picker.repo.unreadable[commit.sha] = f"object {exc.oid}"
        return None


class PredictedConflicts(TypedDict):
    conflict_files: tuple[str, ...]
    resolved_files: tuple[str, ...]
    conflict_checked: bool


def predict_conflicts(
    repo: Repository,
    fork_head: str,
    commits: Sequence[CommitInfo],
    *,
    config: SluiceConfig,
    progress: Progress = _quiet,
    verdicts: MutableMapping[FactKey, str] | None = None,
) -> dict[str, PredictedConflicts]:
    """Pick each commit onto fork trunk plus the earlier ones that applied, as `sluice pick` would:
    a conflict a mechanical rule resolves is not a reason for a human; one that needs a human is.

    Probe objects are written into `repo`: give a quarantined view (`Repository.quarantined`). `verdicts`
    holds the outcomes of conflicted merges met before (it gains the new ones).
    """
    picker = Picker(repo, config, use_resolver=False, evidence=False, verdicts=verdicts)
    tree = repo.tree_of(fork_head)
    result: dict[str, PredictedConflicts] = {}
    for index, commit in enumerate(commits):
        if index % 50 == 0:
            progress(f"predicting conflicts {index}/{len(commits)}")
        step = None if commit.sha in repo.unreadable else _step(picker, fork_head, tree, commit)
        if step is None:  # its diff cannot be read: a risk of its own, and the next commits go on
            result[commit.sha] = PredictedConflicts(
                conflict_files=(), resolved_files=(), conflict_checked=False
            )
            continue
        tree = step.tree or tree
        files = step.report.files
        result[commit.sha] = PredictedConflicts(
            conflict_files=tuple(f"{f.path} ({f.cls})" for f in files if not f.resolved),
            resolved_files=tuple(f"{f.path} ({f.rule})" for f in files if f.resolved),
            conflict_checked=True,
        )
    return result
