"""`GET /`: where each fork stands, as one server-rendered page (no JavaScript; readable on a phone)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from bot.core.charts import Series, line_chart
from bot.core.ingestion import IngestionRecord
from bot.core.lag import LagPoint

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:960px;padding:12px;
color:#1b1f23}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
dl.figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:8px}
dl.figures div{background:#f6f8fa;border-radius:6px;padding:8px}
dt{font-size:.8em;color:#57606a}dd{margin:0;font-size:1.3em;font-weight:600}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(280px,1fr));gap:12px}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:4px;border-bottom:1px solid #eee}
code{font-size:.9em}
"""


@dataclass(frozen=True)
class ForkView:
    """What the page shows of one fork."""

    repo: str
    upstream: str  # owner/name or the upstream URL
    branch: str
    history: Sequence[LagPoint]  # oldest first; the last is where the fork stands
    open_ingestions: Sequence[IngestionRecord]


def status_page(forks: Sequence[ForkView], *, web_url: str, now: datetime) -> str:
    sections = "".join(_fork(view, web_url=web_url) for view in forks) or (
        "<p>No fork is registered yet: install the App on a fork and add <code>.github/sluice.yml</code>.</p>"
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Sluice status</title><style>{STYLE}</style></head><body>"
        f"<h1>Sluice: where each fork stands</h1><p>As of {now:%Y-%m-%d %H:%M} UTC.</p>"
        f"{sections}</body></html>"
    )


def _fork(view: ForkView, *, web_url: str) -> str:
    slug = view.repo.replace("/", "-")
    latest = view.history[-1] if view.history else None
    charts = line_chart(
        _series(view, "Days Behind Upstream", "days", "days_behind"), chart_id=f"dbu-{slug}"
    ) + line_chart(_series(view, "Backlog Commits", "commits", "backlog_commits"), chart_id=f"bc-{slug}")
    return (
        f'<section id="fork-{escape(slug)}"><h2>{escape(view.repo)}</h2>'
        f"<p>Follows <code>{escape(view.upstream)}</code> into <code>{escape(view.branch)}</code>.</p>"
        f"{_figures(latest, open_now=len(view.open_ingestions))}<div class=charts>{charts}</div>"
        f"{_ingestions(view, web_url=web_url)}</section>"
    )


def _series(view: ForkView, title: str, unit: str, field: str) -> Series:
    return Series(title, unit, [(p.at, getattr(p, field)) for p in view.history])


def _figures(latest: LagPoint | None, *, open_now: int) -> str:
    """The newest run's figures; open ingestions as the registry has them now (a PR closed since that run
    left them at once), so the figure agrees with the table below it."""
    if latest is None:
        return "<p>No ingestion run yet.</p>"
    tip = latest.ingestion_tip[:10] if latest.ingestion_tip else "none yet"
    figures = [
        ("Days Behind Upstream", _days(latest.days_behind)),
        ("Backlog Commits", str(latest.backlog_commits)),
        ("Pending upstream commits", str(latest.pending_commits)),
        ("Oldest missing commit", _days(latest.oldest_missing_days)),
        ("Open ingestions", str(open_now)),
        ("Lead time (median, p90)", _lead_time(latest)),
        ("Ingestion tip", tip),
    ]
    cells = "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>" for k, v in figures)
    return f'<dl class="figures">{cells}</dl><p>Last ingestion run {latest.at:%Y-%m-%d %H:%M} UTC.</p>'


def _lead_time(point: LagPoint) -> str:
    if point.lead_time_days_median is None or point.lead_time_days_p90 is None:
        return "no pick yet"
    return f"{point.lead_time_days_median:.1f} / {point.lead_time_days_p90:.1f} days"


def _days(days: float | None) -> str:
    return "n/a" if days is None else f"{days:.1f} days"


def _ingestions(view: ForkView, *, web_url: str) -> str:
    if not view.open_ingestions:
        return "<p>No open ingestion.</p>"
    rows = "".join(_ingestion_row(r, repo=view.repo, web_url=web_url) for r in view.open_ingestions)
    head = "<tr><th>Ingestion</th><th>Kind</th><th>Commits</th><th>State</th><th>PR</th></tr>"
    return f"<h3>Open ingestions</h3><table>{head}{rows}</table>"


def _ingestion_row(record: IngestionRecord, *, repo: str, web_url: str) -> str:
    if record.pr_number is None:
        pr = "not opened yet"
    else:
        where = "issues" if record.state == "blocked" else "pull"  # a blocked one's number is its issue
        url = f"{web_url.rstrip('/')}/{repo}/{where}/{record.pr_number}"
        pr = f'<a href="{escape(url)}">#{record.pr_number}</a>'
    cells = (escape(record.id), escape(record.kind), str(record.commits), escape(record.state), pr)
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"
