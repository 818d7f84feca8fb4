"""The dashboard issue: one per fork, edited in place, showing where the fork stands (as Renovate's does)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.config import Component
from bot.core.ingestion import CheckName, Links
from bot.core.lag import LagPoint
from bot.core.limits import fit_for_github, rows_that_fit
from bot.core.markdown import plain
from bot.core.models import CommitInfo, Disposition, Plan, RiskyChain
from bot.core.render import plural

MARKER = "<!-- sluice:dashboard -->"  # identifies the fork's dashboard issue among its open issues
LABEL = "sluice:dashboard"
TITLE = "Sluice dashboard"
RETRY_MARKER = "<!-- sluice:retry {sha} -->"  # ends each backlog line: the commit a tick retries
BACKLOG_LINE = re.compile(
    r"^- \[(?P<tick>[ xX])\] .*<!-- sluice:retry (?P<sha>[0-9a-f]{40}) -->[ \t]*$", re.M
)
MAX_BACKLOG_LINES = 300  # more would crowd out the rest of the body; the count says how many are left out
MAX_BACKLOG_CHARS = 40_000  # and so would long subjects: the backlog's share of GitHub's 65,536
MAX_CHAIN_ROWS_CHARS = 15_000  # the risky chains' share: with the backlog's, room is left for the rest
MAX_SUBJECT = 120
TREND_WINDOW = dt.timedelta(days=7)
NONE = "none"


# ------------------------------------------------------------------ the model


@dataclass(frozen=True)
class BacklogCommit:
    """An upstream commit the fork does not have and that waits: behind the ingestion tip, or deferred."""

    sha: str
    subject: str
    state: str  # "deferred", "in bundle-…" / "in chain-…" (its unit), or "not planned"


@dataclass(frozen=True)
class OpenIngestion:
    """An open ingestion PR (or the tracking issue standing in for one) and its tiers' check runs."""

    unit_id: str
    number: int | None
    blocked: bool  # a tracking issue stands in for the PR: not one commit applied
    commits: int
    tiers: Mapping[str, str] = field(default_factory=dict)  # check-run name -> its conclusion or status
    head: str | None = None  # the PR's head, whose gate records (holds, waivers, L3 signoffs) count


@dataclass(frozen=True)
class WaiverLine:
    number: int  # the ingestion PR
    tier: str
    reason: str
    by: str
    expires_at: dt.datetime


@dataclass(frozen=True)
class HoldLine:
    number: int
    by: str
    reason: str
    at: dt.datetime


@dataclass(frozen=True)
class SignoffLine:
    """An open ingestion PR whose head's L3 run regressed: the areas affected, who signed off on that head."""

    number: int
    head_sha: str
    regressions: int  # regressed cells (a benchmark and a metric)
    areas: tuple[str, ...]
    signed_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class PauseState:
    by: str
    reason: str
    at: dt.datetime


@dataclass(frozen=True)
class ThrottleState:
    """The safety throttle: automatic ingestion stops after `limit` failed ingestions in a row."""

    failures: int
    limit: int
    tripped: bool


@dataclass(frozen=True)
class DashboardModel:
    """Everything the dashboard shows. The gate's waivers and holds, the paused state and the safety throttle
    are optional: absent, their sections say "none"."""

    fork: str
    now: dt.datetime
    history: Sequence[LagPoint]  # oldest first; the last is this run's
    links: Links
    chains: Sequence[RiskyChain] = ()
    components: Sequence[Component] = ()
    backlog: Sequence[BacklogCommit] = ()
    ingestions: Sequence[OpenIngestion] = ()
    waivers: Sequence[WaiverLine] | None = None
    holds: Sequence[HoldLine] | None = None
    signoffs: Sequence[SignoffLine] | None = None  # L3's regressed metrics and their `/signoff l3`s
    paused: PauseState | None = None
    throttle: ThrottleState | None = None


def backlog_of(stream: Sequence[CommitInfo], plan: Plan) -> tuple[BacklogCommit, ...]:
    """The plan's waiting commits, upstream order: pending ones behind the ingestion tip, and deferred ones.
    `stream` is the upstream first-parent history the fork does not contain, oldest first."""
    units = {c.sha: b.id for b in plan.bundles for c in b.commits}
    units |= {c.sha: ch.id for ch in plan.chains for c in ch.commits}
    deferred = {sha for sha, held in plan.held.items() if held == Disposition.DEFERRED}
    tip = plan.status.ingestion_tip
    shas = [c.sha for c in stream]
    behind = set(shas[: shas.index(tip)]) if tip in shas else set()
    waiting = []
    for commit in stream:
        if commit.sha in deferred:
            waiting.append(BacklogCommit(commit.sha, commit.subject, "deferred"))
        elif commit.sha in behind and commit.sha in units:
            waiting.append(BacklogCommit(commit.sha, commit.subject, f"in {units[commit.sha]}"))
    return tuple(waiting)


# ------------------------------------------------------------------ trends


@dataclass(frozen=True)
class Metric:
    name: str
    value: Callable[[LagPoint], float | int | None]
    unit: str = ""


METRICS = (
    Metric("Days Behind Upstream", lambda p: p.days_behind, " days"),
    Metric("Backlog Commits", lambda p: p.backlog_commits),
    Metric("Pending upstream commits", lambda p: p.pending_commits),
    Metric("Oldest missing commit", lambda p: p.oldest_missing_days, " days old"),
    Metric("Open ingestions", lambda p: p.open_ingestions),
)


def _state(point: LagPoint) -> tuple[object, ...]:
    return (*(m.value(point) for m in METRICS), point.ingestion_tip, point.upstream_head)


def previous_state(history: Sequence[LagPoint]) -> LagPoint | None:
    """The newest point that differs from the latest: runs that changed nothing do not reset the trend, so
    that a run which changes nothing renders the same dashboard (and writes nothing)."""
    latest = _state(history[-1])
    return next((p for p in reversed(history[:-1]) if _state(p) != latest), None)


def window_start(history: Sequence[LagPoint], now: dt.datetime) -> LagPoint | None:
    """The value seven days ago: the newest point at or before then, else the oldest point; None when that is
    the latest one."""
    start = next((p for p in reversed(history) if p.at <= now - TREND_WINDOW), history[0])
    return start if start is not history[-1] else None


def delta(metric: Metric, now: LagPoint, then: LagPoint | None) -> str:
    """`↑ 2`, `↓ 0.5`, `=` or `—` (nothing to compare with)."""
    if then is None:
        return "—"
    new, old = metric.value(now), metric.value(then)
    if new is None or old is None:
        return "—" if new == old else f"{_number(old)} → {_number(new)}"
    change = round(new - old, 3)
    if change == 0:
        return "="
    return f"{'↑' if change > 0 else '↓'} {_number(abs(change))}"


def _number(value: float | int | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:g}" if isinstance(value, float) else str(value)


# ------------------------------------------------------------------ rendering


def render(model: DashboardModel) -> str:
    """The issue's body: Markdown within GitHub's limit, the same text for the same model. The paused state
    and the safety throttle come before the tables, so that GitHub's limit never cuts them."""
    sections = [
        [MARKER, f"# Sluice dashboard: `{model.fork}`", ""],
        _metrics(model),
        _pause(model.paused),
        _throttle(model.throttle),
        _ingestions(model.ingestions),
        _chains(model),
        _backlog(model.backlog),
        _waivers(model.waivers, model.now),
        _holds(model.holds),
        _signoffs(model.signoffs),
    ]
    return fit_for_github("\n".join(line for section in sections for line in section), what="an issue's body")


def _metrics(model: DashboardModel) -> list[str]:
    if not model.history:
        return ["## Where the fork stands", "", "No ingestion run has finished yet.", ""]
    latest = model.history[-1]
    previous, start = previous_state(model.history), window_start(model.history, model.now)
    lines = [
        "## Where the fork stands",
        "",
        "| metric | now | since the last change | over 7 days |",
        "|---|---|---|---|",
    ]
    for metric in METRICS:
        value = metric.value(latest)
        shown = f"{_number(value)}{metric.unit if value is not None else ''}"
        trend = f"{delta(metric, latest, previous)} | {delta(metric, latest, start)}"
        lines.append(f"| {metric.name} | {shown} | {trend} |")
    tip = model.links.commit(latest.ingestion_tip) if latest.ingestion_tip else "none yet"
    lines += ["", f"Ingestion tip: {tip} · upstream head: {model.links.commit(latest.upstream_head)}", ""]
    return lines


def _ingestions(ingestions: Sequence[OpenIngestion]) -> list[str]:
    lines = ["## Open ingestions and emergency picks", ""]
    if not ingestions:
        return [*lines, NONE, ""]
    tiers = [t.value for t in CheckName]
    lines += [f"| ingestion | unit | commits | {' | '.join(t.removeprefix('sluice/') for t in tiers)} |"]
    lines += ["|---|---|---|" + "---|" * len(tiers)]
    for ing in ingestions:
        where = f"#{ing.number}" if ing.number is not None else "—"
        if ing.blocked:
            where += " (needs a human)"
        states = " | ".join(ing.tiers.get(t, "—") for t in tiers)
        lines.append(f"| {where} | `{ing.unit_id}` | {ing.commits} | {states} |")
    return [*lines, ""]


def chain_owners(
    chain: RiskyChain, components: Sequence[Component]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The components a chain's commits touch (a path's first matching component) and their owners."""
    touched = {_component(path, components) for c in chain.commits for path in c.files}
    found = sorted((c for c in touched if c is not None), key=lambda c: c.name)
    owners = sorted({o for c in found for o in c.owners})
    return tuple(c.name for c in found), tuple(owners)


def _component(path: str, components: Sequence[Component]) -> Component | None:
    return next((c for c in components if c.matches(path)), None)


def _chains(model: DashboardModel) -> list[str]:
    lines = ["## Risky chains", ""]
    pending = [c for c in model.chains if c.commits]
    if not pending:
        return [*lines, NONE, ""]
    lines += ["| chain | risk | commits | components | owners |", "|---|---|---|---|---|"]
    rows = []
    for chain in pending:
        names, owners = chain_owners(chain, model.components)
        who, touched = ", ".join(owners) or "no owner configured", ", ".join(names) or "—"
        rows.append(f"| `{chain.id}` | {chain.risk.value} | {len(chain.commits)} | {touched} | {who} |")
    rows = rows_that_fit(
        rows,
        room=MAX_CHAIN_ROWS_CHARS,
        more=lambda n: f"| … | {plural(n, 'more chain')} (`sluice plan` lists them all) | | | |",
    )
    return [*lines, *rows, ""]


def _backlog(backlog: Sequence[BacklogCommit]) -> list[str]:
    lines = ["## Backlog", ""]
    if not backlog:
        return [*lines, NONE, ""]
    lines += [
        "Tick a commit to retry it (a deferred one stops being deferred); Sluice unticks it as it does.",
        "",
    ]
    shown, size = 0, 0
    for commit in backlog[:MAX_BACKLOG_LINES]:
        line = backlog_line(commit)
        size += len(line) + 1
        if size > MAX_BACKLOG_CHARS:
            break
        lines.append(line)
        shown += 1
    if shown < len(backlog):
        where = "`sluice plan --full` lists every pending commit, these among them"
        lines.append(f"\n… and {len(backlog) - shown} more ({where})")
    return [*lines, ""]


def backlog_line(commit: BacklogCommit) -> str:
    """`- [ ] <sha10> subject (state) <marker>`: the marker names the commit a tick retries."""
    subject = (
        commit.subject if len(commit.subject) <= MAX_SUBJECT else commit.subject[: MAX_SUBJECT - 1] + "…"
    )
    marker = RETRY_MARKER.format(sha=commit.sha)
    return f"- [ ] `{commit.sha[:10]}` {plain(subject)} ({commit.state}) {marker}"


def _waivers(waivers: Sequence[WaiverLine] | None, now: dt.datetime) -> list[str]:
    lines = ["## Waivers", ""]
    if not waivers:
        return [*lines, NONE, ""]
    for w in sorted(waivers, key=lambda w: (w.expires_at, w.number)):
        left = "expired" if w.expires_at <= now else f"expires {w.expires_at.date().isoformat()}"
        lines.append(f"- #{w.number} {w.tier}: {plain(w.reason)} (by @{w.by}, {left})")
    return [*lines, ""]


def _holds(holds: Sequence[HoldLine] | None) -> list[str]:
    lines = ["## Holds", ""]
    if not holds:
        return [*lines, NONE, ""]
    for h in sorted(holds, key=lambda h: h.number):
        lines.append(f"- #{h.number}: held by @{h.by} since {h.at.date().isoformat()}: {plain(h.reason)}")
    return [*lines, ""]


def _signoffs(signoffs: Sequence[SignoffLine] | None) -> list[str]:
    lines = ["## L3 signoffs", ""]
    if not signoffs:
        return [*lines, NONE, ""]
    for s in sorted(signoffs, key=lambda s: s.number):
        metrics = f"{s.regressions} regressed metric{'s' if s.regressions != 1 else ''}"
        given = ", ".join(f"@{login}" for login in s.signed_by)
        state = (
            f"signed off by {given}" if given else "no signoff yet (`/signoff l3`; `sluice/gate` names who)"
        )
        areas = ", ".join(f"`{a}`" for a in s.areas)
        lines.append(f"- #{s.number} (head `{s.head_sha[:10]}`): {metrics} in {areas}; {state}")
    return [*lines, ""]


def _pause(paused: PauseState | None) -> list[str]:
    if paused is None:
        return ["## Paused", "", f"{NONE}: automatic ingestion runs", ""]
    since = paused.at.date().isoformat()
    return ["## Paused", "", f"Paused by @{paused.by} since {since}: {plain(paused.reason)} (`/resume`)", ""]


def _throttle(throttle: ThrottleState | None) -> list[str]:
    if throttle is None or (not throttle.tripped and throttle.failures == 0):
        return ["## Safety throttle", "", NONE, ""]
    state = "tripped: automatic ingestion stopped" if throttle.tripped else "armed"
    return [
        "## Safety throttle",
        "",
        f"{state} ({throttle.failures} of {throttle.limit} failures in a row)",
        "",
    ]


# ------------------------------------------------------------------ ticks


def ticks(body: str) -> dict[str, bool]:
    """Backlog line SHA -> whether its box is ticked, for each backlog line of a dashboard body."""
    return {m["sha"]: m["tick"] != " " for m in BACKLOG_LINE.finditer(body.replace("\r\n", "\n"))}


def newly_ticked(before: str, after: str) -> tuple[str, ...]:
    """The commits whose box an edit ticked: unticked before, ticked after (upstream order kept)."""
    was, now = ticks(before), ticks(after)
    return tuple(sha for sha, ticked in now.items() if ticked and was.get(sha) is False)


def is_dashboard(body: str | None, labels: Iterable[str]) -> bool:
    return body is not None and MARKER in body and LABEL in labels
