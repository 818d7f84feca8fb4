"""Per pending upstream commit: its dependencies on earlier pending commits and the reasons it is risky."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.config import SluiceConfig
from bot.core.lines import Region, advance, owners_touched
from bot.core.models import (
    Dependency,
    DependencyKind,
    FileChange,
    PatchStackFootprint,
    RiskKind,
    RiskLevel,
    RiskReason,
    UpstreamCommit,
)
from bot.core.recognise import normalise_title

REVERTS_COMMIT = re.compile(r"This reverts commit ([0-9a-f]{7,40})")
REVERT_SUBJECT = re.compile(r'^Revert\s+"(?P<title>.+)"(?:\s*\(#\d+\))?\s*$')
RELAND_SUBJECT = re.compile(
    r'^(?:\[Reland\]\s*|Reland:?\s+|Revert\s+"Revert\s+)"?(?P<title>.+?)"?"?(?:\s*\(#\d+\))?\s*$',
    re.IGNORECASE,
)
MIN_DISTINCTIVE_LINE = 12


def short(sha: str) -> str:
    return sha[:10]


def normalise_line(line: str) -> str:
    return " ".join(line.split())


def distinctive(line: str) -> bool:
    """A line specific enough that two sides changing it means they changed the same code."""
    return len(line) >= MIN_DISTINCTIVE_LINE and any(ch.isalpha() for ch in line)


def keys_for(path: str, names: Iterable[str]) -> set[str]:
    """Keys under which changed symbols link commits: per file, and across files for C++ qualified names."""
    names = list(names)
    return {f"{path}::{n}" for n in names} | {f"cxx:{n}" for n in names if n.count("::") >= 2}


def _readable(key: str) -> str:
    """`cxx:ns::f` -> `ns::f`; `path::Cls.f` -> `path: Cls.f`."""
    if key.startswith("cxx:"):
        return key[4:]
    path, _, name = key.partition("::")
    return f"{path}: {name}"


def symbol_keys(change: FileChange) -> set[str]:
    return keys_for(change.path, change.symbols)


@dataclass
class _Tracker:
    """Walks the upstream stream, remembering which owner (a pending or held commit) last changed each line
    and symbol."""

    position: Mapping[str, int]  # the owners, by their place in the stream
    regions: dict[str, list[Region]] = field(default_factory=dict)
    file_owner: dict[str, str] = field(default_factory=dict)
    symbol_owner: dict[str, str] = field(default_factory=dict)

    def step(self, sha: str, files: Sequence[FileChange]) -> list[Dependency]:
        owner = sha if sha in self.position else None
        found: dict[str, Dependency] = {}
        for change in files:
            for dep in self._file_dependencies(change, sha):
                found.setdefault(dep.sha, dep)
            self._record(change, owner)
        return [found[k] for k in sorted(found, key=self.position.__getitem__)] if owner else []

    def _file_dependencies(self, change: FileChange, sha: str) -> list[Dependency]:
        deps: list[Dependency] = []
        owner = self.file_owner.get(change.path)
        if owner and owner != sha:
            deps.append(Dependency(sha=owner, kind=DependencyKind.ADD_DELETE, detail=change.path))
        for region in owners_touched(self.regions.get(change.path, []), change.hunks):
            if region.owner != sha:
                deps.append(Dependency(sha=region.owner, kind=DependencyKind.LINES, detail=change.path))
        for key in sorted(symbol_keys(change)):
            owner = self.symbol_owner.get(key)
            if owner and owner != sha:
                deps.append(Dependency(sha=owner, kind=DependencyKind.SYMBOL, detail=_readable(key)))
        return deps

    def _record(self, change: FileChange, owner: str | None) -> None:
        if change.status == "D" or change.binary:
            self.regions.pop(change.path, None)
            self._own_file(change.path, owner)
        else:
            self.regions[change.path] = advance(self.regions.get(change.path, []), change.hunks, owner)
            if change.status == "A":
                self._own_file(change.path, None)
        for key in symbol_keys(change):
            self._own(self.symbol_owner, key, owner)

    def _own_file(self, path: str, owner: str | None) -> None:
        self._own(self.file_owner, path, owner)

    @staticmethod
    def _own(table: dict[str, str], key: str, owner: str | None) -> None:
        if owner is None:
            table.pop(key, None)
        else:
            table[key] = owner


def line_and_symbol_dependencies(
    stream: Sequence[tuple[str, Sequence[FileChange]]],
    pending: Sequence[UpstreamCommit],
    *,
    held: Collection[str] = (),
) -> dict[str, list[Dependency]]:
    """Dependencies through lines, symbols and added/deleted files, walking every stream commit in order.

    Commits the fork already has move line numbers but own nothing: depending on them needs no ordering.
    Held commits (deferred, skipped: in `stream` with their symbols) own what they changed as pending ones
    do, since the fork lacks it all the same: a pending commit may depend on one (`held_dependencies`).
    """
    owners = {c.sha for c in pending} | set(held)
    tracker = _Tracker(position={sha: i for i, (sha, _) in enumerate(stream) if sha in owners})
    symbolised = {c.sha: c.files for c in pending}
    planned = {c.sha for c in pending}
    steps = ((sha, tracker.step(sha, symbolised.get(sha, files))) for sha, files in stream)
    return {sha: deps for sha, deps in steps if sha in planned}


def held_dependencies(
    deps: Mapping[str, Sequence[Dependency]], held: Mapping[str, str]
) -> tuple[dict[str, list[Dependency]], dict[str, list[RiskReason]]]:
    """Split off the dependencies on held commits (SHA -> `deferred` or `skipped`): no plan holds those, so
    instead of linking the dependent to one, each becomes a high risk (`held-dependency`) that roots a risky
    chain at the dependent, where a human sees it, rather than a bundle ingesting it without what it needs."""
    kept: dict[str, list[Dependency]] = {}
    reasons: dict[str, list[RiskReason]] = {}
    for sha, found in deps.items():
        kept[sha] = [d for d in found if d.sha not in held]
        reasons[sha] = [
            RiskReason(
                kind=RiskKind.HELD_DEPENDENCY,
                level=RiskLevel.HIGH,
                detail=f"depends on {held[d.sha]} {short(d.sha)} ({d.kind}: {d.detail})",
            )
            for d in found
            if d.sha in held
        ]
    return kept, reasons


def _revert_kind(commit: UpstreamCommit) -> tuple[DependencyKind | None, str, str | None]:
    """(RELANDS or REVERTS or None, the title it is about, the SHA its body names)."""
    subject = commit.info.subject
    if reland := RELAND_SUBJECT.match(subject):
        return DependencyKind.RELANDS, reland.group("title"), None
    revert = REVERT_SUBJECT.match(subject)
    named = REVERTS_COMMIT.search(commit.info.message)
    if revert or named:
        return (
            DependencyKind.REVERTS,
            revert.group("title") if revert else "",
            named.group(1) if named else None,
        )
    return None, subject, None


def revert_links(
    pending: Sequence[UpstreamCommit],
) -> tuple[dict[str, list[Dependency]], dict[str, list[RiskReason]]]:
    """Reverts and relands among pending commits: the dependencies they add and the risk they carry.

    The reverted commit is marked risky too, so that original, revert and reland travel in one chain.
    """
    deps: dict[str, list[Dependency]] = {}
    reasons: dict[str, list[RiskReason]] = {}
    originals: dict[str, str] = {}  # normalised title -> first pending commit with it
    reverts: dict[str, str] = {}  # normalised title -> the revert of that commit
    subjects = {c.sha: c.info.subject for c in pending}
    for commit in pending:
        kind, about, named = _revert_kind(commit)
        if kind is None:
            originals.setdefault(normalise_title(about), commit.sha)
            continue
        if kind is DependencyKind.RELANDS:
            targets = [originals.get(normalise_title(about)), reverts.get(normalise_title(about))]
            detail = f"relands {about}"
        else:
            target = (_expand(named, originals.values()) if named else None) or originals.get(
                normalise_title(about)
            )
            about = about or subjects.get(target or "", f"commit {named}")
            reverts[normalise_title(about)] = commit.sha
            targets = [target]
            detail = f"reverts {about}"
            if target:
                later = f"reverted by {short(commit.sha)}"
                reasons.setdefault(target, []).append(
                    RiskReason(kind=RiskKind.REVERT, level=RiskLevel.HIGH, detail=later)
                )
        risk = RiskKind.RELAND if kind is DependencyKind.RELANDS else RiskKind.REVERT
        reasons.setdefault(commit.sha, []).append(RiskReason(kind=risk, level=RiskLevel.HIGH, detail=detail))
        found = [Dependency(sha=t, kind=kind, detail=commit.info.subject) for t in targets if t]
        if found:
            deps[commit.sha] = found
    return deps, reasons


def _expand(abbrev: str, shas: Iterable[str]) -> str | None:
    hits = [s for s in shas if s.startswith(abbrev)]
    return hits[0] if len(hits) == 1 else None


def risk_reasons(
    commit: UpstreamCommit, *, footprint: PatchStackFootprint, config: SluiceConfig
) -> list[RiskReason]:
    """Why one commit is risky, from its content and the patch stack (reverts come from `revert_links`)."""
    reasons: list[RiskReason] = []
    if commit.unreadable is not None:  # its hunks and conflicts are unknown: a person looks at it
        detail = f"unreadable: {commit.unreadable}"
        reasons.append(RiskReason(kind=RiskKind.UNREADABLE, level=RiskLevel.HIGH, detail=detail))
    file_level = RiskLevel.HIGH if config.risk.file_overlap_is_risky else RiskLevel.LOW
    for change in commit.files:
        reasons.extend(_file_reasons(change, footprint=footprint, config=config, file_level=file_level))
    if commit.changed_lines >= config.risk.large_commit_lines:
        reasons.append(
            RiskReason(
                kind=RiskKind.LARGE,
                level=RiskLevel.HIGH,
                detail=f"{commit.changed_lines} changed lines (≥ {config.risk.large_commit_lines})",
            )
        )
    if commit.resolved_files:
        detail = "resolved by a mechanical rule: " + ", ".join(commit.resolved_files)
        reasons.append(RiskReason(kind=RiskKind.MECHANICAL_CONFLICT, level=RiskLevel.LOW, detail=detail))
    if commit.conflict_files:
        reasons.append(
            RiskReason(
                kind=RiskKind.PREDICTED_CONFLICT,
                level=RiskLevel.HIGH,
                detail="needs a human against fork trunk in " + ", ".join(commit.conflict_files),
            )
        )
    return _dedupe(reasons)


def _file_reasons(
    change: FileChange, *, footprint: PatchStackFootprint, config: SluiceConfig, file_level: RiskLevel
) -> list[RiskReason]:
    path = change.path
    reasons: list[RiskReason] = []
    component = config.component_for(path)
    if component is not None and component.risk.rank >= RiskLevel.MEDIUM.rank:
        reasons.append(
            RiskReason(kind=RiskKind.COMPONENT, level=component.risk, detail=f"{component.name}: {path}")
        )
    for extension in config.extensions_for_interface(path):
        reasons.append(
            RiskReason(
                kind=RiskKind.EXTENSION_INTERFACE, level=RiskLevel.HIGH, detail=f"{extension.name}: {path}"
            )
        )
    if change.binary:
        reasons.append(RiskReason(kind=RiskKind.BINARY, level=RiskLevel.MEDIUM, detail=path))
    if path not in footprint.files:
        return reasons
    reasons.append(RiskReason(kind=RiskKind.PATCH_STACK_FILE, level=file_level, detail=path))
    shared_symbols = sorted(set(change.symbols) & footprint.symbols.get(path, frozenset()))
    if shared_symbols:
        reasons.append(
            RiskReason(
                kind=RiskKind.PATCH_STACK_SYMBOL,
                level=RiskLevel.HIGH,
                detail=f"{path}: {', '.join(shared_symbols)}",
            )
        )
    replaced = footprint.replaced_lines.get(path, frozenset())
    removed = {normalise_line(line) for h in change.hunks for line in h.removed}
    if any(line in replaced for line in removed if distinctive(line)):
        reasons.append(RiskReason(kind=RiskKind.PATCH_STACK_HUNK, level=RiskLevel.HIGH, detail=path))
    return reasons


def _dedupe(reasons: Sequence[RiskReason]) -> list[RiskReason]:
    seen: dict[tuple[RiskKind, str], RiskReason] = {}
    for reason in reasons:
        seen.setdefault((reason.kind, reason.detail), reason)
    return list(seen.values())


def overall_risk(reasons: Sequence[RiskReason]) -> RiskLevel:
    return max((r.level for r in reasons), key=lambda level: level.rank, default=RiskLevel.LOW)


def merge_dependencies(*tables: Mapping[str, Sequence[Dependency]]) -> dict[str, tuple[Dependency, ...]]:
    merged: dict[str, dict[tuple[str, DependencyKind], Dependency]] = {}
    for table in tables:
        for sha, deps in table.items():
            for dep in deps:
                merged.setdefault(sha, {}).setdefault((dep.sha, dep.kind), dep)
    return {sha: tuple(deps.values()) for sha, deps in merged.items()}
