"""How a fork PR grows the patch stack: where upstream is busy in the same files and symbols; which suites."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.config import SluiceConfig
from bot.core.limits import fit_for_github
from bot.core.markdown import cell, plain
from bot.core.models import CommitInfo, FileChange
from bot.core.render import plural
from bot.git.facts import annotate_symbols
from bot.ports import HistoryReader

PATCH_STACK_MARKER = "<!-- sluice:patch-stack -->"
ACTIVE_DAYS = 30  # upstream changes this recent make a conflict at the next ingestion likely
MAX_LISTED = 25


@dataclass(frozen=True)
class Overlap:
    what: str  # a path, or "path: symbol"
    upstream: tuple[CommitInfo, ...]  # recent upstream commits that changed it, oldest first


@dataclass(frozen=True)
class GrowthReport:
    commits: int  # fork commits the PR adds
    files: tuple[str, ...]
    added: int
    removed: int
    stack_before: int | None  # the patch stack on fork trunk, when known
    file_overlaps: tuple[Overlap, ...]
    symbol_overlaps: tuple[Overlap, ...]
    suites: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # extension -> its suites


def measure(
    repo: HistoryReader,
    *,
    base: str,
    head: str,
    upstream_head: str,
    config: SluiceConfig,
    now: dt.datetime,
    stack_before: int | None,
    days: int = ACTIVE_DAYS,
) -> GrowthReport:
    """Compare what the PR (`base`..`head`) changes with what upstream changed in the last `days` days."""
    ours = annotate_symbols(repo, repo.range_patches(head, "--not", base, no_merges=True))
    own_files = _files(ours)
    since = int((now - dt.timedelta(days=days)).timestamp())
    recent = [sha for sha, ts in repo.first_parent_times(upstream_head) if ts >= since]
    theirs = annotate_symbols(repo, repo.range_patches("--no-walk=unsorted", *recent)) if recent else {}
    infos = {c.sha: c for c in (repo.commits("--no-walk=unsorted", *recent) if recent else [])}
    by_file: dict[str, list[CommitInfo]] = {}
    by_symbol: dict[str, list[CommitInfo]] = {}
    for sha, changes in theirs.items():
        for change in changes:
            by_file.setdefault(change.path, []).append(infos[sha])
            for symbol in change.symbols:
                by_symbol.setdefault(f"{change.path}: {symbol}", []).append(infos[sha])
    own_symbols = sorted({f"{c.path}: {s}" for changes in ours.values() for c in changes for s in c.symbols})
    suites = {
        ext.name: ext.suites
        for path in own_files
        for ext in (*config.extensions_for_path(path), *config.extensions_for_interface(path))
    }
    lines = [c for changes in ours.values() for c in changes]
    return GrowthReport(
        commits=len(ours),
        files=tuple(own_files),
        added=sum(h.new_count for c in lines for h in c.hunks),
        removed=sum(h.old_count for c in lines for h in c.hunks),
        stack_before=stack_before,
        file_overlaps=_overlaps(own_files, by_file),
        symbol_overlaps=_overlaps(own_symbols, by_symbol),
        suites=dict(sorted(suites.items())),
    )


def _files(changes: Mapping[str, Sequence[FileChange]]) -> list[str]:
    return sorted({c.path for files in changes.values() for c in files})


def _overlaps(ours: Sequence[str], theirs: Mapping[str, list[CommitInfo]]) -> tuple[Overlap, ...]:
    found = [
        Overlap(what, tuple(sorted(theirs[what], key=lambda c: c.committer_time)))
        for what in ours
        if what in theirs
    ]
    return tuple(sorted(found, key=lambda o: (-len(o.upstream), o.what)))


def comment(report: GrowthReport, *, upstream_name: str, days: int = ACTIVE_DAYS) -> str:
    """The sticky comment on a fork PR."""
    stack = (
        f"from {report.stack_before} to {report.stack_before + report.commits} fork commits"
        if report.stack_before is not None
        else f"by {report.commits} commits"
    )
    lines = [
        PATCH_STACK_MARKER,
        "## Sluice: how this PR grows the patch stack",
        "",
        f"This PR adds {plural(report.commits, 'commit')} to the patch stack ({stack}), changing "
        f"{plural(len(report.files), 'file')} (+{report.added} −{report.removed} lines) that every upstream "
        "ingestion must carry from now on.",
        "",
    ]
    if report.file_overlaps or report.symbol_overlaps:
        lines += [
            f"**Likely future conflicts**: {upstream_name} changed the same code in the last {days} days.",
            "",
        ]
        lines += _overlap_table("symbol", report.symbol_overlaps)
        lines += _overlap_table("file", report.file_overlaps)
    else:
        lines += [f"No file this PR changes was changed by {upstream_name} in the last {days} days.", ""]
    if report.suites:
        lines += ["**Internal-extension suites this PR touches** (run them before merging):", ""]
        lines += [
            f"- `{name}`: {', '.join(f'`{s}`' for s in suites) or 'no suites configured'}"
            for name, suites in report.suites.items()
        ]
    else:
        lines.append("It touches no internal extension's code or upstream interfaces.")
    return fit_for_github("\n".join(lines) + "\n", what="a comment")


def _overlap_table(kind: str, overlaps: Sequence[Overlap]) -> list[str]:
    if not overlaps:
        return []
    rows = [f"| {kind} | recent upstream commits |", "|---|---|"]
    for overlap in overlaps[:MAX_LISTED]:
        commits = ", ".join(f"`{c.sha[:10]}` {cell(plain(c.subject))}" for c in overlap.upstream[-3:])
        more = f" (+{len(overlap.upstream) - 3} more)" if len(overlap.upstream) > 3 else ""
        rows.append(f"| `{cell(overlap.what)}` | {commits}{more} |")
    if len(overlaps) > MAX_LISTED:
        rows.append(f"| … | {len(overlaps) - MAX_LISTED} more |")
    return [*rows, ""]
