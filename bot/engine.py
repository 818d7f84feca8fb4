"""Reads a repository into what the pure core needs: the stream, what the fork has, pending footprints."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypedDict

from bot import symbols
from bot.analysis import distinctive, normalise_line
from bot.applied import find_applied
from bot.config import SluiceConfig, Strategy, parse_config
from bot.errors import GitError
from bot.gitio import MISSING_OBJECT, GitRepo
from bot.metrics import pending_shas, stream_status
from bot.models import (
    CommitInfo,
    FileChange,
    Hunk,
    PatchStackFootprint,
    Recognised,
    StreamStatus,
    UpstreamCommit,
)
from bot.pick import Picker, StepResult
from bot.recognise import ingestion_commits, recognise

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
    repo: GitRepo, fork_head: str, fork_ref: str, *, trusted_url_prefixes: Sequence[str] = ()
) -> SluiceConfig:
    """The fork's own `.github/sluice.yml` at fork trunk, or the defaults when it has none."""
    text = repo.read_file(fork_head, CONFIG_PATH)
    if text is None:
        return SluiceConfig()
    name = f"{fork_ref}:{CONFIG_PATH}"
    return parse_config(
        text.decode("utf-8", "replace"), filename=name, trusted_url_prefixes=trusted_url_prefixes
    )


def take_snapshot(
    repo: GitRepo, *, fork_ref: str, upstream_ref: str, config: SluiceConfig, progress: Progress = _quiet
) -> Snapshot:
    fork_head, upstream_head = repo.resolve(fork_ref), repo.resolve(upstream_ref)
    progress("reading the upstream stream")
    stream = tuple(repo.first_parent_times(upstream_head))
    candidates = tuple(repo.commits(upstream_head, "--not", fork_head, first_parent=True))
    fork_commits = tuple(repo.commits(fork_head, "--not", upstream_head))
    progress(
        f"recognising ingested commits among {len(candidates)} upstream and {len(fork_commits)} fork commits"
    )
    with ThreadPoolExecutor(max_workers=1) as pool:  # the two patch-id pipelines run side by side
        upstream_ids = pool.submit(repo.patch_ids, stdin_shas=[c.sha for c in candidates])
        fork_ids = repo.patch_ids(fork_head, "--not", upstream_head)
        recognised = recognise(
            candidates,
            fork_commits,
            upstream_patch_ids=upstream_ids.result(),
            fork_patch_ids=fork_ids,
            config=config,
        )
    # Only what the explicit evidence and patch-ids left over: a pick that would change nothing.
    rest = [c for c in candidates if c.sha not in recognised]
    recognised |= find_applied(
        repo, fork_head=fork_head, upstream_head=upstream_head, commits=rest, stream=stream, config=config
    )
    missing = frozenset(c.sha for c in candidates)
    stack = len(patch_stack_of(fork_commits, recognised))
    read = missing | {c.sha for c in fork_commits}
    status = stream_status(
        stream,
        missing=set(missing),
        recognised=recognised,
        fork_head=fork_head,
        patch_stack_commits=stack,
        picks_move_tip=config.strategy is Strategy.CHERRY_PICK,
        unreadable={sha: path for sha, path in repo.unreadable.items() if sha in read},
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
    )


def _symbol_lines(hunk: Hunk) -> tuple[list[int], list[int]]:
    """Old-side and new-side lines whose enclosing definitions a hunk changes."""
    old = list(range(hunk.old_start, hunk.old_start + hunk.old_count))
    if hunk.old_count == 0:  # an insertion changes whatever encloses the lines around it
        old = [hunk.old_start, hunk.old_start + 1]
    return old, list(range(hunk.new_start, hunk.new_start + hunk.new_count))


def annotate_symbols(
    repo: GitRepo, changes: Mapping[str, Sequence[FileChange]]
) -> dict[str, tuple[FileChange, ...]]:
    """Fill in each file change's touched symbols from its old and new blobs."""

    def parsable(change: FileChange) -> bool:
        return not change.binary and symbols.language_of(change.path) is not None

    every = [f for files in changes.values() for f in files if parsable(f)]
    blobs = repo.blobs(b for f in every for b in (f.old_blob, f.new_blob) if b)
    # A blob is the new side of one commit and the old side of the next: parse it once.
    parsed = {
        b: symbols.definitions(f.path, blobs[b])
        for f in every
        for b in (f.old_blob, f.new_blob)
        if b in blobs
    }
    return {
        sha: tuple(_with_symbols(f, parsed) if parsable(f) else f for f in files)
        for sha, files in changes.items()
    }


def _with_symbols(change: FileChange, parsed: Mapping[str, Sequence[symbols.Definition]]) -> FileChange:
    old_lines: list[int] = []
    new_lines: list[int] = []
    for hunk in change.hunks:
        old, new = _symbol_lines(hunk)
        old_lines += old
        new_lines += new
    found: set[str] = set()
    for blob, lines in ((change.old_blob, old_lines), (change.new_blob, new_lines)):
        if blob is not None and blob in parsed and lines:
            found.update(symbols.innermost_names(parsed[blob], lines))
    return change.model_copy(update={"symbols": tuple(sorted(found))})


def patch_stack_footprint(repo: GitRepo, snapshot: Snapshot, paths: Iterable[str]) -> PatchStackFootprint:
    """What the patch stack changed in the given paths: files, the upstream lines it replaced, symbols."""
    stack = {c.sha for c in snapshot.patch_stack}
    wanted = set(paths)
    if not stack or not wanted:
        return PatchStackFootprint(commits=len(stack))
    # Filtering here is several times faster than hundreds of pathspecs in `git log`.
    patches = repo.range_patches(snapshot.fork_head, "--not", snapshot.upstream_head, no_merges=True)
    relevant = {sha: [f for f in files if f.path in wanted] for sha, files in patches.items() if sha in stack}
    annotated = annotate_symbols(repo, {sha: files for sha, files in relevant.items() if files})
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
    stream_patches: StreamPatches  # every stream commit from the first pending one on, oldest first
    footprint: PatchStackFootprint


def analyse_pending(
    repo: GitRepo,
    snapshot: Snapshot,
    *,
    config: SluiceConfig,
    skip: Iterable[str] = (),
    progress: Progress = _quiet,
) -> PendingAnalysis:
    skipped = set(skip)
    pending = [sha for sha in snapshot.pending if sha not in skipped]
    if not pending:
        return PendingAnalysis(commits=(), stream_patches=(), footprint=PatchStackFootprint())
    infos = {c.sha: c for c in snapshot.candidates}
    position = {sha: i for i, (sha, _) in enumerate(snapshot.stream)}
    first = infos[pending[0]]
    since = ("--not", first.parents[0]) if first.parents else ()
    # Conflict prediction mostly waits on `git merge-tree`; the diffs and symbols are Python work.
    # Running them side by side uses both cores.
    with ThreadPoolExecutor(max_workers=1) as pool:
        predicted = pool.submit(
            predict_conflicts,
            repo,
            snapshot.fork_head,
            [infos[s] for s in pending],
            config=config,
            progress=progress,
        )
        stream_patches = repo.range_patches("--first-parent", "--reverse", snapshot.upstream_head, *since)
        own = annotate_symbols(repo, {sha: stream_patches[sha] for sha in pending})
        footprint = patch_stack_footprint(repo, snapshot, (f.path for files in own.values() for f in files))
        conflicts = predicted.result()
    commits = tuple(
        UpstreamCommit(
            info=infos[sha],
            position=position[sha],
            files=own[sha],
            unreadable=repo.unreadable.get(sha),
            **conflicts[sha],
        )
        for sha in pending
    )
    return PendingAnalysis(commits=commits, stream_patches=tuple(stream_patches.items()), footprint=footprint)


def _step(picker: Picker, fork_head: str, tree: str, commit: CommitInfo) -> StepResult | None:
    """One probe pick, or None when git cannot read an object the commit needs (noted in `unreadable`)."""
    try:
        return picker.step(fork_head, tree, commit, strategy=Strategy.CHERRY_PICK)
    except GitError as exc:
        found = MISSING_OBJECT.search(str(exc).encode())
        if found is None:
            raise
        picker.repo.unreadable[commit.sha] = f"object {found.group(1).decode()}"
        return None


class PredictedConflicts(TypedDict):
    conflict_files: tuple[str, ...]
    resolved_files: tuple[str, ...]
    conflict_checked: bool


def predict_conflicts(
    repo: GitRepo,
    fork_head: str,
    commits: Sequence[CommitInfo],
    *,
    config: SluiceConfig,
    progress: Progress = _quiet,
) -> dict[str, PredictedConflicts]:
    """Pick each commit onto fork trunk plus the earlier ones that applied, as `sluice pick` would:
    a conflict a mechanical rule resolves is not a reason for a human; one that needs a human is.
    """
    picker = Picker(repo, config, use_resolver=False, evidence=False)
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
            conflict_files=tuple(f.path for f in files if not f.resolved),
            resolved_files=tuple(f"{f.path} ({f.rule})" for f in files if f.resolved),
            conflict_checked=True,
        )
    return result
