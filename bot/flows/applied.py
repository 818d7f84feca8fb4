"""Missing upstream commits that need no pick: already applied, undone by a revert, or a passed pin."""

from __future__ import annotations

import enum
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.core.config import SluiceConfig
from bot.core.diffparse import COMMIT_MARK, parse_patch_section, split_log
from bot.core.errors import GitError
from bot.core.models import CommitInfo, FileChange, Recognised, RecognitionMethod
from bot.core.refs import validate_sha
from bot.ports import HistoryReader, Repository

RAW_OPTIONS = (
    "--raw",
    "--no-renames",
    "--no-abbrev",
    "--diff-merges=first-parent",
    f"--format={COMMIT_MARK}%H",
)
Changes = Mapping[str, Sequence[FileChange]]


class FileState(enum.Enum):
    """What fork trunk holds at a path one upstream commit changes."""

    HAS = "has"  # the file as the commit leaves it
    LACKS = "lacks"  # the file as it was before the commit, or a state the pick would conflict with
    PIN_PASSED = "pin-passed"  # a pin file at the value a later upstream commit gave it
    UNSURE = "unsure"  # the fork changed the file too: a three-way merge tells


def file_state(change: FileChange, fork_blob: str | None, *, later_pins: frozenset[str] | None) -> FileState:
    """Pure: from blob ids alone, without reading any content."""
    if fork_blob == change.new_blob:
        return FileState.HAS
    if later_pins is not None and fork_blob in later_pins:
        return FileState.PIN_PASSED
    if None in (fork_blob, change.old_blob, change.new_blob) or fork_blob == change.old_blob:
        return FileState.LACKS
    return FileState.UNSURE


def net_zero_pairs(commits: Sequence[tuple[str, Sequence[FileChange]]]) -> dict[str, str]:
    """Pure: missing commits that exactly undo an earlier missing one (a revert; a revert's reland), paired.

    Each pairs with the latest earlier unpaired commit whose every file change it inverts blob for blob.
    """
    unpaired: dict[frozenset[tuple[str, str | None, str | None]], list[str]] = {}
    pairs: dict[str, str] = {}
    for sha, files in commits:
        if not files:
            continue
        key = frozenset((f.path, f.old_blob, f.new_blob) for f in files)
        inverse = frozenset((path, new, old) for path, old, new in key)
        if unpaired.get(inverse):
            partner = unpaired[inverse].pop()
            pairs[partner], pairs[sha] = sha, partner
        else:
            unpaired.setdefault(key, []).append(sha)
    return pairs


@dataclass(frozen=True)
class _Reading:
    """What the checks read from the repository: every file change, its state, and the blobs to merge."""

    changes: Mapping[str, Sequence[FileChange]]
    states: Mapping[str, Sequence[FileState]]
    fork_tree: Mapping[str, str]
    blobs: Mapping[str, bytes]


def find_applied(
    repo: Repository,
    *,
    fork_head: str,
    upstream_head: str,
    commits: Sequence[CommitInfo],
    stream: Sequence[tuple[str, int]],
    config: SluiceConfig,
) -> dict[str, Recognised]:
    """Upstream SHA -> why no pick is needed, for the given missing commits (stream order)."""
    if not commits:
        return {}
    out = repo.log_each(RAW_OPTIONS, [c.sha for c in commits], mark=COMMIT_MARK.encode())
    changes = {sha: parse_patch_section(body) for sha, body in split_log(out.decode("utf-8", "replace"))}
    try:
        fork_tree = _tree_blobs(repo, fork_head)
    except GitError:  # fork trunk's own tree is unreadable: judge nothing against it
        return {}
    position = {sha: i for i, (sha, _) in enumerate(stream)}
    pins = _pin_values(repo, upstream_head, changes, position, config)
    states = {
        sha: [
            file_state(f, fork_tree.get(f.path), later_pins=pins.get((f.path, position[sha]))) for f in files
        ]
        for sha, files in changes.items()
    }
    # One read for every blob a three-way merge may need: those of commits no file rules out.
    wanted = [
        b
        for sha, files in changes.items()
        if FileState.LACKS not in states[sha]
        for f, state in zip(files, states[sha], strict=True)
        if state is FileState.UNSURE
        for b in (f.old_blob, fork_tree[f.path], f.new_blob)
    ]
    reading = _Reading(changes, states, fork_tree, repo.blobs(b for b in wanted if b))
    found = _judge_in_order(repo, commits, reading)
    rest = [(c.sha, changes.get(c.sha, ())) for c in commits if c.sha not in found | repo.unreadable.keys()]
    for sha, partner in net_zero_pairs(rest).items():
        how = "undone by" if position[partner] > position[sha] else "undoes"
        found[sha] = Recognised(
            upstream_sha=sha, method=RecognitionMethod.NET_ZERO, detail=f"{how} {partner[:10]}"
        )
    return found


def _judge_in_order(
    repo: Repository, commits: Sequence[CommitInfo], reading: _Reading
) -> dict[str, Recognised]:
    found: dict[str, Recognised] = {}
    # Paths an earlier commit that still needs its pick changes: picked in order, that pick comes first, so
    # fork trunk's version of them says nothing about what a later commit's pick would do.
    dirty: set[str] = set()
    for commit in commits:
        files = reading.changes.get(commit.sha, ())
        if commit.sha in repo.unreadable and not files:
            break  # which files it changes is unknown, so nothing after it can be judged
        paths = {f.path for f in files}
        recognised = None if paths & dirty else _verdict(repo, commit.sha, files, reading)
        if recognised is None:
            dirty |= paths
        else:
            found[commit.sha] = recognised
    return found


def _verdict(repo: Repository, sha: str, files: Sequence[FileChange], reading: _Reading) -> Recognised | None:
    states = reading.states.get(sha, ())
    if FileState.LACKS in states:
        return None
    unsure = [f for f, s in zip(files, states, strict=True) if s is FileState.UNSURE]
    if unsure and not all(
        _merge_keeps_fork(repo, f, reading.fork_tree[f.path], reading.blobs) for f in unsure
    ):
        return None
    pins = [f.path for f, s in zip(files, states, strict=True) if s is FileState.PIN_PASSED]
    if pins:
        detail = f"fork trunk's pin is newer: {', '.join(pins)}"
        return Recognised(upstream_sha=sha, method=RecognitionMethod.PIN_PASSED, detail=detail)
    if not files:
        detail = "changes no file"
    elif unsure:
        detail = "fork trunk contains its changes: " + ", ".join(f.path for f in unsure)
    else:
        detail = "fork trunk has every file as it leaves it"
    return Recognised(upstream_sha=sha, method=RecognitionMethod.ALREADY_APPLIED, detail=detail)


def _merge_keeps_fork(
    repo: Repository, change: FileChange, fork_blob: str, blobs: Mapping[str, bytes]
) -> bool:
    """Whether picking this file's change onto the fork's version changes nothing (a three-way merge)."""
    assert change.old_blob is not None and change.new_blob is not None
    sides = [blobs.get(b) for b in (change.old_blob, fork_blob, change.new_blob)]
    if any(data is None or b"\0" in data for data in sides):
        return False  # unreadable or binary: never assume the fork has it
    base, ours, theirs = (data or b"" for data in sides)
    with tempfile.TemporaryDirectory(prefix="sluice-applied-") as workdir:
        try:
            merged, conflicts = repo.plumbing().merge_file(base, ours, theirs, workdir=Path(workdir))
        except GitError:
            return False
    return conflicts == 0 and merged.encode("utf-8", "surrogateescape") == ours


def _tree_blobs(repo: HistoryReader, commit: str) -> dict[str, str]:
    """path -> blob id of every file in a commit's tree (modes and submodules aside)."""
    out = repo.run("ls-tree", "-r", "-z", "--full-tree", validate_sha(commit))
    blobs: dict[str, str] = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        if len(fields) == 3 and fields[1] == "blob":
            blobs[path] = fields[2]
    return blobs


def _pin_values(
    repo: HistoryReader,
    upstream_head: str,
    changes: Changes,
    position: Mapping[str, int],
    config: SluiceConfig,
) -> dict[tuple[str, int], frozenset[str]]:
    """(pin path, stream position) -> the values upstream gave that pin after that position."""
    paths = sorted({f.path for files in changes.values() for f in files if config.recognition.is_pin(f.path)})
    if not paths:
        return {}
    out = repo.run("log", "--first-parent", *RAW_OPTIONS, validate_sha(upstream_head), "--", *paths)
    history = [
        (position[sha], f.path, f.new_blob)
        for sha, body in split_log(out)
        if sha in position
        for f in parse_patch_section(body)
        if f.new_blob is not None
    ]
    wanted = {(f.path, position[sha]) for sha, files in changes.items() for f in files if f.path in paths}
    return {
        (path, at): frozenset(blob for later, p, blob in history if p == path and later > at)
        for path, at in wanted
    }
