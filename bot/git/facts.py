"""Per-commit facts (patch-ids, changed paths, parsed diffs, symbols): read from git once, kept by SHA."""

from __future__ import annotations

import enum
import hashlib
import importlib.metadata
import importlib.util
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import TypeAdapter

from bot.core import diffparse, symbols
from bot.core.errors import GitError
from bot.core.models import FileChange, Hunk
from bot.git.repo import DIFF_OPTIONS
from bot.ports import HistoryReader

T = TypeVar("T")
FactKey = tuple[str, str]  # (commit SHA, path); the path is "" for a fact about the whole commit
_CHANGES = TypeAdapter(tuple[FileChange, ...])


class FactKind(enum.StrEnum):
    PATCH_ID = "patch-id"  # `git patch-id --stable`, "" for a commit without one (empty, merge)
    PATHS = "paths"  # the paths a commit changes against its first parent (JSON list)
    DIFF = "diff"  # per (commit, path): its parsed `-U0` patch against the first parent (JSON), no symbols
    SYMBOLS = "symbols"  # per (commit, path): the symbols its hunks change (JSON list)
    # per (commit, digest of a conflicted merge's content): planning's outcome (see flows.pick.Picker.step)
    VERDICT = "verdict"


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:32]


def _source(module: object) -> bytes:
    return Path(str(getattr(module, "__file__", ""))).read_bytes()


def _source_of(name: str) -> bytes:
    """A module's source without importing it (bot.pick imports this module)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    return Path(spec.origin).read_bytes()


def _versions() -> dict[FactKind, str]:
    """What determines each kind of fact besides the commit: the code and libraries that compute it.

    A changed parser or grammar changes the version, and stored facts of another version are never read,
    so nothing needs invalidating by hand. Bump FORMAT to drop every stored fact.
    """
    grammars = [importlib.metadata.version(p) for p in GRAMMARS]
    diff = _digest(FORMAT, _source(diffparse), *DIFF_OPTIONS)
    return {
        FactKind.PATCH_ID: _digest(FORMAT, "git patch-id --stable"),
        FactKind.PATHS: diff,
        FactKind.DIFF: diff,
        FactKind.SYMBOLS: _digest(FORMAT, diff, _source(symbols), Path(__file__).read_bytes(), *grammars),
        FactKind.VERDICT: _digest(FORMAT, *(_source_of(m) for m in VERDICT_MODULES), *grammars),
    }


FORMAT = "1"
GRAMMARS = ("tree-sitter", "tree-sitter-cpp", "tree-sitter-python")
# What classifies and resolves conflicts (and so decides a conflicted merge's outcome).
VERDICT_MODULES = (
    "bot.core.conflicts",
    "bot.core.diff3",
    "bot.flows.pick",
    "bot.core.rerere",
    "bot.core.symbols",
    "bot.git.repo",
)
VERSIONS = _versions()


class FactStore(Protocol):
    """Where facts are kept: `bot.db.store.Store`, or `MemoryFacts` for a run without a store."""

    def load_facts(
        self, kind: str, version: str, shas: Sequence[str], *, paths: Collection[str] | None = None
    ) -> dict[FactKey, str]: ...

    def save_facts(self, kind: str, version: str, facts: Mapping[FactKey, str]) -> None: ...


class MemoryFacts:
    """Facts kept for one run only."""

    def __init__(self) -> None:
        self._facts: dict[tuple[str, str], dict[FactKey, str]] = {}

    def load_facts(
        self, kind: str, version: str, shas: Sequence[str], *, paths: Collection[str] | None = None
    ) -> dict[FactKey, str]:
        kept = self._facts.get((kind, version), {})
        wanted = set(shas)
        return {k: v for k, v in kept.items() if k[0] in wanted and (paths is None or k[1] in paths)}

    def save_facts(self, kind: str, version: str, facts: Mapping[FactKey, str]) -> None:
        self._facts.setdefault((kind, version), {}).update(facts)


class CommitFacts:
    """Facts about the commits of one repository: from the store when known, else from git, then stored.

    A commit whose blobs the repository lacks (a partial clone, a snapshot without large files) is read as
    far as it can be and listed in `unreadable` with the first missing path; its facts are not stored,
    since the blobs may arrive later.
    """

    def __init__(self, repo: HistoryReader, store: FactStore | None = None) -> None:
        self.repo = repo
        self.store: FactStore = store if store is not None else MemoryFacts()
        self.unreadable: dict[str, str] = {}
        self._stubs: dict[str, tuple[FileChange, ...]] = {}  # unreadable commit -> its files, no hunks
        self._lost: dict[str, set[str]] = {}  # unreadable commit -> its missing blobs

    def patch_ids(self, shas: Sequence[str]) -> dict[str, str]:
        """`git patch-id --stable` of the listed non-merge commits that have one."""
        known = self._load(FactKind.PATCH_ID, shas)
        todo = [sha for sha in dict.fromkeys(shas) if (sha, "") not in known]
        computed, readable = self._attempt(todo, lambda some: self.repo.patch_ids(stdin_shas=some))
        new = {(sha, ""): computed.get(sha, "") for sha in readable}
        self._save(FactKind.PATCH_ID, new)
        known.update(new)
        return {sha: known[(sha, "")] for sha in shas if known.get((sha, ""))}

    def paths(self, shas: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """The paths each listed commit changes against its first parent."""
        known = {sha: tuple(json.loads(v)) for (sha, _), v in self._load(FactKind.PATHS, shas).items()}
        listed = self._listing([sha for sha in dict.fromkeys(shas) if sha not in known])
        known.update((sha, tuple(f.path for f in files)) for sha, files in listed.items())
        return {sha: known[sha] for sha in shas if sha in known}

    def patches(
        self, shas: Sequence[str], *, only: Collection[str] | None = None
    ) -> dict[str, tuple[FileChange, ...]]:
        """The `-U0` patch of each listed commit against its first parent (without symbols), in order;
        with `only`, just the changes of those paths (kept per file, so the rest is never read)."""
        order = list(dict.fromkeys(shas))
        listed = {sha: tuple(json.loads(v)) for (sha, _), v in self._load(FactKind.PATHS, order).items()}
        stored = self._load(FactKind.DIFF, [sha for sha in order if listed.get(sha)], paths=only)

        def wanted(sha: str) -> list[str]:
            return [p for p in dict.fromkeys(listed[sha]) if only is None or p in only]

        todo = [sha for sha in order if sha not in listed or any((sha, p) not in stored for p in wanted(sha))]
        by_file: dict[FactKey, tuple[FileChange, ...]] = {}
        for sha, changes in self._read_patches(todo, known=stored.keys()).items():
            listed[sha] = tuple(f.path for f in changes)
            by_file.update(((sha, path), group) for path, group in _by_path(changes))
        by_file.update((key, _CHANGES.validate_json(value)) for key, value in stored.items())
        return {
            sha: tuple(change for path in wanted(sha) for change in by_file.get((sha, path), ()))
            for sha in order
            if sha in listed
        }

    def _read_patches(
        self, shas: Sequence[str], *, known: Collection[FactKey]
    ) -> dict[str, tuple[FileChange, ...]]:
        """Read and keep the patches of `shas`; an unreadable commit's files that are `known` or whose
        blobs are missing come back without hunks."""
        if not shas:
            return {}
        parsed, readable = self._attempt(shas, self.repo.patches_of)
        by_file = {
            (sha, path): changes for sha in readable for path, changes in _by_path(parsed.get(sha, ()))
        }
        for sha in shas:
            if sha in self.unreadable:
                part = self._readable_part(sha, known=known)
                by_file.update(part)
                parsed[sha] = tuple(f for f in self._stubs[sha] for f in part.get((sha, f.path), (f,)))
        paths = {(sha, ""): json.dumps([f.path for f in parsed[sha]]) for sha in readable if sha in parsed}
        self._save(FactKind.PATHS, paths)
        self._save(
            FactKind.DIFF,
            {key: _CHANGES.dump_json(v, exclude_defaults=True).decode() for key, v in by_file.items()},
        )
        return parsed

    def with_symbols(self, changes: Mapping[str, Sequence[FileChange]]) -> dict[str, tuple[FileChange, ...]]:
        """The file changes with the symbols their hunks change, parsed only where not known yet."""
        paths = {f.path for files in changes.values() for f in files}
        stored = self._load(FactKind.SYMBOLS, list(changes), paths=paths)
        known = {key: tuple(json.loads(value)) for key, value in stored.items()}
        todo = {
            sha: [f for f in files if _parsable(f) and (sha, f.path) not in known]
            for sha, files in changes.items()
        }
        computed = annotate_symbols(self.repo, {sha: files for sha, files in todo.items() if files})
        new = {(sha, f.path): f.symbols for sha, files in computed.items() for f in files}
        self._save(
            FactKind.SYMBOLS,
            {key: json.dumps(list(names)) for key, names in new.items() if key[0] not in self.unreadable},
        )
        known.update(new)
        return {
            sha: tuple(
                f.model_copy(update={"symbols": known[(sha, f.path)]}) if (sha, f.path) in known else f
                for f in files
            )
            for sha, files in changes.items()
        }

    def verdicts(self, shas: Sequence[str]) -> dict[FactKey, str]:
        """Planning's remembered outcomes of the conflicted merges of these commits (see bot.pick)."""
        return self._load(FactKind.VERDICT, shas)

    def keep_verdicts(self, verdicts: Mapping[FactKey, str]) -> None:
        self._save(FactKind.VERDICT, verdicts)

    def _attempt(
        self, shas: Sequence[str], read: Callable[[list[str]], dict[str, T]]
    ) -> tuple[dict[str, T], list[str]]:
        """`read` the commits not known to be unreadable, and which they were. The usual case is that every
        blob is here; only when git cannot read one are the commits' blobs listed, to leave theirs out."""
        readable = [sha for sha in shas if sha not in self.unreadable]
        try:
            return (read(readable) if readable else {}), readable
        except GitError:
            readable = self._readable(readable)
            return (read(readable) if readable else {}), readable

    def _readable(self, shas: Sequence[str]) -> list[str]:
        """The commits among `shas` whose blobs are all here."""
        self._listing(shas)
        return [sha for sha in shas if sha not in self.unreadable]

    def _listing(self, shas: Sequence[str]) -> dict[str, tuple[FileChange, ...]]:
        """The files the commits change (without hunks); stores their paths, notes unreadable commits."""
        if not shas:
            return {}
        changed = self.repo.changed_files(shas)
        treeless = [sha for sha in shas if sha in self.repo.unreadable and sha not in self.unreadable]
        for sha in treeless:  # git could not even read its trees: nothing of it is readable
            files = changed.get(sha, ())
            self._stubs[sha] = files
            self._lost[sha] = {b for f in files for b in (f.old_blob, f.new_blob) if b}
            self.unreadable[sha] = self.repo.unreadable[sha]
        blobs = {b for files in changed.values() for f in files for b in (f.old_blob, f.new_blob) if b}
        missing = self.repo.missing_objects(blobs)
        known = self._load(FactKind.PATHS, list(changed))  # unreadable commits come back every run
        paths = {(sha, ""): json.dumps([f.path for f in files]) for sha, files in changed.items()}
        fresh = {key: value for key, value in paths.items() if key not in known and key[0] not in treeless}
        self._save(FactKind.PATHS, fresh)
        for sha, files in changed.items():
            lost = [f for f in files if {f.old_blob, f.new_blob} & missing]
            if lost and sha not in treeless:
                self._stubs[sha] = files
                self._lost[sha] = {b for f in lost for b in (f.old_blob, f.new_blob) if b in missing}
                self.unreadable[sha] = lost[0].path
        return changed

    def _readable_part(
        self, sha: str, *, known: Collection[FactKey]
    ) -> dict[FactKey, tuple[FileChange, ...]]:
        """The patches of an unreadable commit's readable files that are not `known` yet."""
        lost = self._lost[sha]
        need = [
            f.path
            for f in self._stubs[sha]
            if not {f.old_blob, f.new_blob} & lost and (sha, f.path) not in known
        ]
        patch = self.repo.patches_of([sha], paths=need).get(sha, ()) if need else ()
        return {(sha, path): changes for path, changes in _by_path(patch)}

    def _load(
        self, kind: FactKind, shas: Sequence[str], *, paths: Collection[str] | None = None
    ) -> dict[FactKey, str]:
        if not shas:
            return {}
        return self.store.load_facts(kind.value, VERSIONS[kind], shas, paths=paths)

    def _save(self, kind: FactKind, facts: Mapping[FactKey, str]) -> None:
        if facts:
            self.store.save_facts(kind.value, VERSIONS[kind], facts)


def _by_path(changes: Iterable[FileChange]) -> Iterator[tuple[str, tuple[FileChange, ...]]]:
    grouped: dict[str, list[FileChange]] = {}
    for change in changes:
        grouped.setdefault(change.path, []).append(change)
    return ((path, tuple(group)) for path, group in grouped.items())


def _parsable(change: FileChange) -> bool:
    return not change.binary and symbols.language_of(change.path) is not None


def _symbol_lines(hunk: Hunk) -> tuple[list[int], list[int]]:
    """Old-side and new-side lines whose enclosing definitions a hunk changes."""
    old = list(range(hunk.old_start, hunk.old_start + hunk.old_count))
    if hunk.old_count == 0:  # an insertion changes whatever encloses the lines around it
        old = [hunk.old_start, hunk.old_start + 1]
    return old, list(range(hunk.new_start, hunk.new_start + hunk.new_count))


def annotate_symbols(
    repo: HistoryReader, changes: Mapping[str, Sequence[FileChange]]
) -> dict[str, tuple[FileChange, ...]]:
    """Fill in each file change's touched symbols from its old and new blobs."""
    every = [f for files in changes.values() for f in files if _parsable(f)]
    blobs = repo.blobs(b for f in every for b in (f.old_blob, f.new_blob) if b)
    # A blob is the new side of one commit and the old side of the next: parse it once.
    parsed = {
        b: symbols.definitions(f.path, blobs[b])
        for f in every
        for b in (f.old_blob, f.new_blob)
        if b in blobs
    }
    return {
        sha: tuple(_with_symbols(f, parsed) if _parsable(f) else f for f in files)
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


def stack_touching(facts: CommitFacts, stack: Iterable[str], wanted: set[str]) -> list[str]:
    """The commits of `stack` that change any of the `wanted` paths."""
    shas = list(stack)
    touched = facts.paths(shas)
    return [sha for sha in shas if wanted.intersection(touched.get(sha, ()))]
