"""Human-readable tables for plans and status, and the stable JSON forms."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from bot.core.models import (
    DispositionRecord,
    LowRiskBundle,
    PickReport,
    Plan,
    PlannedCommit,
    RiskKind,
    RiskLevel,
    RiskyChain,
    StreamStatus,
)

RISK_STYLE = {"low": "green", "medium": "yellow", "high": "red", "critical": "bold red"}
SUBJECT_WIDTH = 64
SUMMARY_ITEMS = 3  # components and reasons named per chain in the summary
SUMMARY_ROWS = 25  # chains (and bundles) listed in the summary; --full lists them all
SAID_NOTHING = ("—", "one commit")  # a fact the narrow summary leaves out
WIDE = 150  # from this width on, the summary gives each fact its own column
ID_WIDTH, SIZE_WIDTH, RISK_WIDTH = 18, 27, 9  # bundle-<sha10>, "4781 commits, 1262630 lines", critical
ComponentOf = Callable[[str], str | None]


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 (but tab and newline), DEL and C1


def printable(text: str) -> str:
    """`text` for a terminal: its control characters shown escaped (`\\x1b`), so an upstream subject cannot
    retitle the terminal, hide the rest of a row or erase the lines above it."""
    return _CONTROL.sub(lambda found: ascii(found.group())[1:-1], text)


def _text(text: str, style: str = "", **options: Any) -> Text:
    # Text, not str: a subject such as "[backend] ..." must not be read as rich markup.
    return Text(printable(text), style, **options)


def plural(count: int, noun: str) -> str:
    """`1 commit`, `2 commits`."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _when(ts: int | None) -> str:
    return "—" if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def status_table(status: StreamStatus) -> Table:
    table = Table(title="Ingestion status", show_header=False, title_justify="left")
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("value")
    tip = status.ingestion_tip[:10] if status.ingestion_tip else "none (the fork has no upstream commit)"
    table.add_row("Upstream head", f"{status.upstream_head[:10]}  ({_when(status.upstream_head_time)})")
    table.add_row("Ingestion tip", f"{tip}  ({_when(status.ingestion_tip_time)})")
    days = "—" if status.days_behind is None else f"{status.days_behind:.2f}"
    table.add_row("Days Behind Upstream", days)
    table.add_row("Oldest missing commit", _oldest_missing(status))
    table.add_row("Backlog Commits", str(status.backlog_commits))
    table.add_row("Pending upstream commits", str(status.pending_commits))
    if status.skipped_commits or status.deferred_commits:
        held = f"{status.skipped_commits} skipped (won't port), {status.deferred_commits} deferred"
        table.add_row("Held by people", held)
    table.add_row("Already ingested", str(status.ingested_commits))
    table.add_row("Emergency picks", str(status.emergency_commits))
    table.add_row("Patch stack", plural(status.patch_stack_commits, "fork commit"))
    table.add_row("Recognised by", ", ".join(f"{k} {v}" for k, v in status.recognised_by.items()) or "—")
    if status.unreadable:
        shown = [f"{sha[:10]} unreadable: {path}" for sha, path in list(status.unreadable.items())[:3]]
        more = len(status.unreadable) - len(shown)
        table.add_row(
            "Unreadable commits", _text("\n".join(shown + ([f"… {more} more (--json)"] if more else [])))
        )
    return table


def status_renderable(status: StreamStatus, *, held: Sequence[tuple[DispositionRecord, str]] = ()) -> Group:
    """The status table, then the pending commits people skipped or deferred, with why and who."""
    parts: list[Table] = [status_table(status)]
    if held:
        table = Table(title="Held by people", title_justify="left")
        for column in ("commit", "held", "subject", "reason", "by"):
            table.add_column(column, no_wrap=column in ("commit", "held"))
        for record, subject in held:
            by = record.approver or "—"
            cells = (record.sha[:10], record.disposition.value, subject, record.reason or "—", by)
            table.add_row(*map(_text, cells))
        parts.append(table)
    return Group(*parts)


def _oldest_missing(status: StreamStatus) -> str:
    if status.oldest_missing is None or status.oldest_missing_days is None:
        return "none"
    return f"{status.oldest_missing[:10]}  ({status.oldest_missing_days:.2f} days older than upstream head)"


def weight_text(c: PlannedCommit) -> str:
    """`p 0.312`, then `large: 612 lines ×2.1` per weight, strongest first."""
    lines = [f"p {c.probability:.3f}"] + [
        f"{w.feature}: {w.detail} ×{w.odds_ratio:.2f}" if w.detail else f"{w.feature} ×{w.odds_ratio:.2f}"
        for w in c.weights
    ]
    return "\n".join(lines)


def _why(c: PlannedCommit, chained: str | None) -> str:
    head = [f"chained: {chained}"] if chained else []
    if c.probability is not None:
        return "\n".join([*head, weight_text(c)])
    reasons = [f"{r.kind}: {r.detail}" for r in c.reasons if r.level != "low"]
    said = chained or ""  # a chain's root says its top reason already: not twice
    return "\n".join([*head, *(r for r in reasons if r not in said)]) or "—"


def _commit_table(
    title: str, commits: Sequence[PlannedCommit], *, why: Mapping[str, str] | None = None
) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("#", justify="right")
    table.add_column("commit", no_wrap=True)
    # Minimum widths that still fit 80 columns: rich crops a table whose columns cannot shrink enough.
    table.add_column("subject", min_width=12, max_width=SUBJECT_WIDTH)
    table.add_column("lines", justify="right")
    table.add_column("risk", min_width=4)
    table.add_column("why", min_width=12)
    table.add_column("after", min_width=8)
    for index, c in enumerate(commits, 1):
        reasons = _why(c, (why or {}).get(c.sha))
        after = "\n".join(f"{d.sha[:10]} ({d.kind})" for d in c.depends_on) or "—"
        cells = (str(index), c.sha[:10], c.subject, str(c.changed_lines))
        risk = _text(c.risk, RISK_STYLE[c.risk])
        folded = (_text(reasons, overflow="fold"), _text(after, overflow="fold"))
        table.add_row(*map(_text, cells), risk, *folded)
    return table


def _chain_title(chain: RiskyChain) -> str:
    done = f", {len(chain.ingested)} already ingested" if chain.ingested else ""
    after = f", after {', '.join(chain.after)}" if chain.after else ""
    count = plural(len(chain.commits), "commit")
    return f"Risky chain {chain.id} · {chain.risk} · {count} in order{done}{after}"


def _bundle_title(bundle: LowRiskBundle) -> str:
    size = f"{plural(len(bundle.commits), 'commit')} · {plural(bundle.changed_lines, 'line')}"
    return f"Low-risk bundle {bundle.id} · {size}"


def _size(commits: Sequence[PlannedCommit]) -> str:
    return f"{plural(len(commits), 'commit')}, {plural(sum(c.changed_lines for c in commits), 'line')}"


def _counted(counts: Counter[str], *, limit: int) -> str:
    """`a ×3, b, …`: the most common first, ties in first-seen order."""
    shown = [name if n == 1 else f"{name} ×{n}" for name, n in counts.most_common(limit)]
    return ", ".join(shown) + (", …" if len(counts) > limit else "") if shown else "—"


def _components(commits: Sequence[PlannedCommit], component_of: ComponentOf | None) -> str:
    """The components the commits touch, by how many commits touch each."""
    if component_of is None:  # only what the risk reasons name (components of medium risk and above)
        each = [
            {r.detail.split(":", 1)[0] for r in c.reasons if r.kind == RiskKind.COMPONENT} for c in commits
        ]
    else:
        each = [{n for n in map(component_of, c.files) if n} for c in commits]
    return _counted(Counter(name for names in each for name in sorted(names)), limit=SUMMARY_ITEMS)


def _top_reasons(commits: Sequence[PlannedCommit]) -> str:
    """The reasons most members share; with a model, the features that raise their odds."""
    if any(c.probability is not None for c in commits):
        kinds = Counter(w.feature for c in commits for w in c.weights if w.odds_ratio > 1)
        return _counted(kinds, limit=SUMMARY_ITEMS)
    kinds = Counter(str(r.kind) for c in commits for r in c.reasons if r.level != RiskLevel.LOW)
    return _counted(kinds, limit=SUMMARY_ITEMS)


def _linked_by(chain: RiskyChain) -> str:
    """Why the members are one chain: how they depend on each other, and what they share."""
    members = {c.sha for c in chain.commits} | set(chain.ingested)
    kinds = Counter(str(d.kind) for c in chain.commits for d in c.depends_on if d.sha in members)
    names = dict.fromkeys(s.rsplit("::", 1)[-1] for s in chain.linked_symbols)  # `path::ns::name`: the name
    shared = [*list(names)[:2], *(f.rsplit("/", 1)[-1] for f in chain.linked_files[:1])]
    if not kinds and len(chain.commits) + len(chain.ingested) < 2:
        return "one commit"
    via = f" via {', '.join(shared)}" if shared else ""
    return _counted(kinds, limit=SUMMARY_ITEMS) + via


@dataclass(frozen=True)
class _Summary:
    """One row per chain or bundle, laid out for the width it is printed at: a column per fact on a wide
    terminal; on a narrow one the subject, then the size with the first fact, then a line per other fact
    (a chain's top reasons and its links each get the whole width); a line is cut, never wrapped."""

    title: str
    kind: str  # "chain" or "bundle": the first column's header
    rows: tuple[tuple[str, str, str, Text, tuple[str, ...]], ...]  # id, subject, size, risk, facts
    headers: tuple[str, ...]  # of the facts
    more: int  # rows left out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        yield _text("")
        yield self._wide(width) if width >= WIDE else self._narrow(width)
        if self.more:
            yield _text(f"… and {self.more} more: sluice plan --full", style="dim")

    def _table(self) -> Table:
        return Table(
            title=self.title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False
        )

    def _wide(self, width: int) -> Table:
        table = self._table()
        gaps = 2 * (3 + len(self.headers))  # a column's padding: one space each side
        flexible = max(width - ID_WIDTH - SIZE_WIDTH - RISK_WIDTH - gaps, 12 * (1 + len(self.headers)))
        weights = (4, 2, 3, 3) if len(self.headers) == 3 else (3, 1)  # subject, then the facts
        widths = [flexible * w // sum(weights) for w in weights]
        table.add_column(self.kind, width=ID_WIDTH, no_wrap=True)
        table.add_column("root" if self.kind == "chain" else "first … last", width=widths[0])
        table.add_column("size", width=SIZE_WIDTH)
        table.add_column("risk", width=RISK_WIDTH)
        for header, fact_width in zip(self.headers, widths[1:], strict=True):
            table.add_column(header, width=fact_width)
        for ident, subject, size, risk, facts in self.rows:
            table.add_row(_line(ident), _line(subject), _line(size), risk, *map(_line, facts))
        return table

    def _narrow(self, width: int) -> Table:
        table = self._table()
        table.add_column(self.kind, width=ID_WIDTH, no_wrap=True)
        table.add_column("risk", width=RISK_WIDTH)
        details = max(width - ID_WIDTH - RISK_WIDTH - 4, 12)
        subject = "root" if self.kind == "chain" else "first … last"
        table.add_column(
            f"{subject}; size · " + " · ".join(h.split()[-1] for h in self.headers), width=details
        )
        for ident, subject, size, risk, facts in self.rows:
            first, *others = facts
            lines = [
                " · ".join(f for f in (size, first) if f != "—"),
                *(f for f in others if f not in SAID_NOTHING),
            ]
            detail = _line(subject)  # no_wrap: each line is cut, never wrapped
            for line in lines:
                detail.append("\n")
                detail.append_text(_line(line, style="dim"))
            table.add_row(_line(ident), risk, detail)
        return table


def _line(text: str, *, style: str = "") -> Text:
    return _text(text, style=style, no_wrap=True, overflow="ellipsis")


def _chains_summary(chains: Sequence[RiskyChain], component_of: ComponentOf | None) -> _Summary:
    rows = []
    for chain in chains[:SUMMARY_ROWS]:
        root = next(
            (c.subject for c in chain.commits if c.sha == chain.root),
            f"{chain.root[:10]} (ingested)",  # a resumed chain's root went in with an earlier unit
        )
        done = f", {len(chain.ingested)} ingested before" if chain.ingested else ""
        facts = (_components(chain.commits, component_of), _top_reasons(chain.commits), _linked_by(chain))
        risk = _text(chain.risk, RISK_STYLE[chain.risk])
        rows.append((chain.id, root, _size(chain.commits) + done, risk, facts))
    title = "Risky chains (each in order, a person watching)"
    headers = ("components", "top reasons", "linked by")
    return _Summary(title, "chain", tuple(rows), headers, len(chains) - len(rows))


def _bundles_summary(bundles: Sequence[LowRiskBundle], component_of: ComponentOf | None) -> _Summary:
    rows = []
    for bundle in bundles[:SUMMARY_ROWS]:
        ends = bundle.commits[0].subject
        if len(bundle.commits) > 1:
            ends += f" … {bundle.commits[-1].subject}"
        risk = _text("low", RISK_STYLE["low"])
        facts = (_components(bundle.commits, component_of),)
        rows.append((bundle.id, ends, _size(bundle.commits), risk, facts))
    title = "Low-risk bundles (each goes in as one ingestion PR)"
    return _Summary(title, "bundle", tuple(rows), ("components",), len(bundles) - len(rows))


def plan_renderable(plan: Plan, *, full: bool = False, component_of: ComponentOf | None = None) -> Group:
    """A summary that fits one screen (the status, one row per chain and bundle); `full` adds every commit.

    `component_of` names a path's component (the configuration's), so that low-risk components show too.
    """
    parts: list[Table | Text | _Summary] = [status_table(plan.status)]
    lines = sum(b.changed_lines for b in plan.bundles)
    bundled = sum(len(b.commits) for b in plan.bundles)
    chained = sum(len(c.commits) for c in plan.chains)
    parts.append(
        _text(
            f"\n{plural(bundled, 'commit')} in {plural(len(plan.bundles), 'low-risk bundle')} "
            f"({plural(lines, 'line')}), {chained} in {plural(len(plan.chains), 'risky chain')}, "
            f"{len(plan.held)} held.\n",
            style="bold",
        )
    )
    if plan.risk_decision is not None:
        parts.append(_text(_decision_line(plan)))
    if plan.order:
        parts.append(_text(_order_line(plan.order)))
    if plan.chains:
        parts.append(_chains_summary(plan.chains, component_of))
    if plan.bundles:
        parts.append(_bundles_summary(plan.bundles, component_of))
    if plan.held:
        parts.append(_text("Held: " + ", ".join(f"{s[:10]} ({d})" for s, d in plan.held.items())))
    if full:
        parts.extend(_commit_table(_bundle_title(bundle), bundle.commits) for bundle in plan.bundles)
        parts.extend(_commit_table(_chain_title(c), c.commits, why=c.why) for c in plan.chains)
    elif plan.bundles or plan.chains:
        parts.append(_text("Every commit with its reasons and dependencies: sluice plan --full", style="dim"))
    return Group(*parts)


def _order_line(order: Sequence[str]) -> str:
    """`strategy: merge`: the units interleave in the stream's order, which the tables (chains, then
    bundles) do not show."""
    shown = ", ".join(order[:SUMMARY_ROWS]) + (
        f" … ({len(order) - SUMMARY_ROWS} more)" if len(order) > SUMMARY_ROWS else ""
    )
    return (
        "strategy merge: a merge brings every upstream commit before the one it merges, so the "
        f"{plural(len(order), 'unit')} go in upstream order: {shown}"
    )


def _decision_line(plan: Plan) -> str:
    d = plan.risk_decision
    assert d is not None
    how = "fewest expected tier runs" if d.chosen_by == "expected-runs" else "risk.chain_share"
    return (
        f"Risk model {d.model} ({d.source}): chained from p {d.threshold:.3f} ({how}), "
        f"bundles up to {d.bundle_culprits:g} expected culprits; expected tier runs {d.expected_runs:.1f}."
    )


def print_renderable(renderable: object, *, console: Console | None = None) -> None:
    """Print to stdout at the terminal's width ($COLUMNS when set; 80 when not a terminal)."""
    (console or Console()).print(renderable)


def to_json(model: Plan | StreamStatus) -> str:
    """Canonical JSON: sorted keys, no timestamps of the run itself, so equal states give equal bytes."""
    return json.dumps(model.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


PICK_STYLE = {
    "clean": "green",
    "auto_resolved": "cyan",
    "proposed": "yellow",
    "needs_human": "bold red",
    "already_applied": "dim",
}


def pick_renderable(report: PickReport) -> Group:
    """One row per upstream commit with the classes of its conflicted files; then each conflicted file on a
    line of its own, its path whole, with its class and the rule that resolved it or why a person must."""
    table = Table(title=f"sluice pick onto {report.onto[:10]} ({report.strategy})", title_justify="left")
    table.add_column("commit", no_wrap=True)
    table.add_column("subject", min_width=12, max_width=SUBJECT_WIDTH)
    table.add_column("status", no_wrap=True)
    table.add_column("conflicted files", min_width=10)
    for c in report.commits:
        brings = f"\n(its merge brings {plural(len(c.brings), 'earlier commit')} too)" if c.brings else ""
        classes = Counter(f"{f.cls}, resolved" if f.resolved else str(f.cls) for f in c.files)
        table.add_row(
            _text(c.upstream[:10]),
            _text(c.subject + brings),
            _text(c.status, PICK_STYLE[c.status]),
            _text(_counted(classes, limit=len(classes))),
        )
    if report.untried:
        table.add_row(
            _text("…"),
            _text(
                f"{plural(len(report.untried), 'commit')} after it not tried: "
                "a merge of any would bring it too"
            ),
            _text("not tried", "dim"),
            _text("—"),
        )
    return Group(table, *_conflicted_files(report), _text(_pick_summary(report), style="bold"))


def _conflicted_files(report: PickReport) -> list[Text]:
    """Each commit with conflicts, then a line per conflicted file (a path is never folded inside a table
    cell): its class, the rule that resolved it or why a person must, the commits a merge brought that
    changed it, and for a file left to a person the fork commits on the other side (whom to ask)."""
    lines = []
    for c in (c for c in report.commits if c.files):
        lines.append(_text(f"{c.upstream[:10]} {c.subject}", style="bold", no_wrap=True, overflow="ellipsis"))
        for f in c.files:
            how = f", resolved by {f.rule}" if f.resolved else f" — {f.reason}"
            lines.append(_text(f"  {f.path}: {f.cls}{how}{_changed_by(f.changed_by, c.upstream)}"))
            if not f.resolved and (others := f.fork_commits()):
                lines.append(_text(f"    fork commits on the other side: {_shas(others)}", style="dim"))
    return lines


def _pick_summary(report: PickReport) -> str:
    blocked = any(c.status == "needs_human" for c in report.commits)
    if report.head:
        return f"Wrote {report.branch} at {report.head[:10]}."
    if report.dry_run and blocked:
        return "Dry run: no ref written. A commit needs a human: resolve it, then `sluice remember` it."
    if report.dry_run:
        return "Dry run: no ref written."
    return "A commit needs a human: no ref written. Resolve it, then `sluice remember` the resolution."


def _changed_by(shas: Sequence[str], merged: str) -> str:
    """` (changed by 1a2b3c4d5e, 6f7a8b9c0d)`: which commits a merge brings change the file, when that is not
    the merged commit alone."""
    if not shas or list(shas) == [merged]:
        return ""
    return f" (changed by {_shas(shas)})"


def _shas(shas: Sequence[str], limit: int = 3) -> str:
    """`1a2b3c4d5e, 6f7a8b9c0d and 2 more`."""
    more = f" and {len(shas) - limit} more" if len(shas) > limit else ""
    return ", ".join(sha[:10] for sha in shas[:limit]) + more


def pick_json(report: PickReport) -> str:
    data = report.model_dump(mode="json", by_alias=True)
    # ASCII: evidence can quote lines of files that are not UTF-8 (kept losslessly as surrogate escapes).
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
