"""Human-readable tables for plans and status, and the stable JSON forms."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from bot.models import PickReport, Plan, PlannedCommit, RiskyChain, StreamStatus

RISK_STYLE = {"low": "green", "medium": "yellow", "high": "red", "critical": "bold red"}
SUBJECT_WIDTH = 64


def plural(count: int, noun: str) -> str:
    """`1 commit`, `2 commits`."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _when(ts: int | None) -> str:
    return "—" if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def status_table(status: StreamStatus) -> Table:
    table = Table(title="Ingestion status", show_header=False, title_justify="left")
    table.add_column("metric", style="bold")
    table.add_column("value")
    tip = status.ingestion_tip[:10] if status.ingestion_tip else "none (the fork has no upstream commit)"
    table.add_row("Upstream head", f"{status.upstream_head[:10]}  ({_when(status.upstream_head_time)})")
    table.add_row("Ingestion tip", f"{tip}  ({_when(status.ingestion_tip_time)})")
    days = "—" if status.days_behind is None else f"{status.days_behind:.2f}"
    table.add_row("Days Behind Upstream", days)
    table.add_row("Backlog Commits", str(status.backlog_commits))
    table.add_row("Pending upstream commits", str(status.pending_commits))
    table.add_row("Already ingested", str(status.ingested_commits))
    table.add_row("Emergency picks", str(status.emergency_commits))
    table.add_row("Patch stack", f"{status.patch_stack_commits} fork commits")
    table.add_row("Recognised by", ", ".join(f"{k} {v}" for k, v in status.recognised_by.items()) or "—")
    return table


def _commit_table(title: str, commits: Sequence[PlannedCommit]) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("#", justify="right")
    table.add_column("commit")
    table.add_column("subject", max_width=SUBJECT_WIDTH, overflow="ellipsis", no_wrap=True)
    table.add_column("lines", justify="right")
    table.add_column("risk")
    table.add_column("why")
    table.add_column("after")
    for index, c in enumerate(commits, 1):
        why = "\n".join(f"{r.kind}: {r.detail}" for r in c.reasons if r.level != "low") or "—"
        after = "\n".join(f"{d.sha[:10]} ({d.kind})" for d in c.depends_on) or "—"
        # Text, not str: a subject such as "[backend] ..." must not be read as rich markup.
        cells = (str(index), c.sha[:10], c.subject, str(c.changed_lines))
        table.add_row(*map(Text, cells), Text(c.risk, RISK_STYLE[c.risk]), Text(why), Text(after))
    return table


def _chain_title(chain: RiskyChain) -> str:
    done = f", {len(chain.ingested)} already ingested" if chain.ingested else ""
    return f"Risky chain {chain.id} · {chain.risk} · {len(chain.commits)} commits in order{done}"


def plan_renderable(plan: Plan) -> Group:
    parts: list[Table | Text] = [status_table(plan.status)]
    lines = sum(b.changed_lines for b in plan.bundles)
    bundled = sum(len(b.commits) for b in plan.bundles)
    chained = sum(len(c.commits) for c in plan.chains)
    parts.append(
        Text(
            f"\n{bundled} commits in {len(plan.bundles)} low-risk bundles ({lines} lines), "
            f"{chained} in {len(plan.chains)} risky chains, {len(plan.held)} held.\n",
            style="bold",
        )
    )
    for bundle in plan.bundles:
        title = f"Low-risk bundle {bundle.id} · {len(bundle.commits)} commits · {bundle.changed_lines} lines"
        parts.append(_commit_table(title, bundle.commits))
    parts.extend(_commit_table(_chain_title(chain), chain.commits) for chain in plan.chains)
    if plan.held:
        parts.append(Text("Held: " + ", ".join(f"{s[:10]} ({d})" for s, d in plan.held.items())))
    return Group(*parts)


def print_renderable(renderable: object, *, console: Console | None = None) -> None:
    (console or Console(width=200)).print(renderable)


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
    """One row per upstream commit, then each conflicted file with its class, rule or reason."""
    table = Table(title=f"sluice pick onto {report.onto[:10]} ({report.strategy})", title_justify="left")
    for column in ("commit", "subject", "status", "files"):
        table.add_column(
            column, max_width=SUBJECT_WIDTH if column == "subject" else None, no_wrap=column == "subject"
        )
    for c in report.commits:
        files = "\n".join(
            f"{f.path}: {f.cls}" + (f", resolved by {f.rule}" if f.resolved else f" — {f.reason}")
            for f in c.files
        )
        table.add_row(
            Text(c.upstream[:10]), Text(c.subject), Text(c.status, PICK_STYLE[c.status]), Text(files or "—")
        )
    if report.head:
        summary = f"Wrote {report.branch} at {report.head[:10]}."
    elif report.dry_run:
        summary = "Dry run: no ref written."
    else:
        summary = "A commit needs a human: no ref written. Resolve it, then `sluice remember` the resolution."
    return Group(table, Text(summary, style="bold"))


def pick_json(report: PickReport) -> str:
    data = report.model_dump(mode="json", by_alias=True)
    # ASCII: evidence can quote lines of files that are not UTF-8 (kept losslessly as surrogate escapes).
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
