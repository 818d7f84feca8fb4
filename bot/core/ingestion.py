"""Ingestion PRs as data: which units a plan opens, and their titles, bodies, labels and sticky comments."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from bot.core.config import SluiceConfig, Strategy
from bot.core.limits import GITHUB_TEXT_MAX_CHARS, rows_that_fit
from bot.core.markdown import cell, plain
from bot.core.models import (
    CommitReport,
    FileReport,
    HunkReport,
    PickStatus,
    Plan,
    PlannedCommit,
    RiskKind,
    RiskLevel,
    RiskReason,
    RiskyChain,
)
from bot.core.render import plural
from bot.core.webhooks import Pull

BRANCH_PREFIX = "sluice/ingest/"
COMMITTER = "Sluice <sluice@users.noreply.github.com>"  # who commits Sluice's picks (a person's edit: them)
CLASSIFICATION_MARKER = "<!-- sluice:classification -->"
# Ingestion PRs Sluice keeps open at once; the next ones open as these merge (each builds on the last).
MAX_OPEN_UNITS = 8
# What a text keeps free of GitHub's limit for what is added around it (the tracking issue's marker).
_MARGIN = 512
_MORE = "the upstream range above lists them all"
_COMMENT_HEAD = 1024  # the classification comment's heading and validation line, and the tables' heads
_HUNKS_SHOWN = 3  # a conflicting file's blocks named in its row


class UnitKind(enum.StrEnum):
    BUNDLE = "bundle"
    CHAIN = "chain"


class Label(enum.StrEnum):
    BUNDLE = "sluice:bundle"
    RISKY_CHAIN = "sluice:risky-chain"
    NEEDS_HUMAN = "sluice:needs-human"
    EMERGENCY = "sluice:emergency"  # `/cherry-pick`'s own ingestion PR; a code owner approves it


class CheckName(enum.StrEnum):
    L1 = "sluice/L1"
    L2 = "sluice/L2"
    L3 = "sluice/L3"
    GATE = "sluice/gate"


MANAGED_LABELS = frozenset(label.value for label in Label)  # Sluice sets these; others are people's

TIER_TITLES = {
    CheckName.L1: "L1: build, lit and unit tests, kernel smoke (hosted runners)",
    CheckName.L2: "L2: numerics sweeps (self-hosted GPU runners)",
    CheckName.L3: "L3: benchmarks (self-hosted GPU runners, on request or by policy)",
    CheckName.GATE: "Gate: tiers green, conflicts approved by code owners, no hold",
}


@dataclass(frozen=True)
class Unit:
    """One ingestion PR's worth of upstream commits: a low-risk bundle or a risky chain."""

    id: str
    kind: UnitKind
    commits: tuple[PlannedCommit, ...]
    chain: RiskyChain | None = None

    @property
    def branch(self) -> str:
        return BRANCH_PREFIX + self.id


@dataclass(frozen=True)
class PickedUnit:
    """What picking a unit gave: the commits that applied, and the one that needs a human, if any."""

    unit: Unit
    base_branch: str  # the PR's base: fork trunk, or the previous unit's branch
    head: str | None  # the branch head to push; None when not one commit applied
    reports: tuple[CommitReport, ...]  # the applied commits, then the blocking one (if any)

    @property
    def blocked(self) -> CommitReport | None:
        last = self.reports[-1] if self.reports else None
        return last if last is not None and last.status is PickStatus.NEEDS_HUMAN else None

    @property
    def applied(self) -> tuple[CommitReport, ...]:
        return tuple(r for r in self.reports if r.status is not PickStatus.NEEDS_HUMAN)


@dataclass(frozen=True)
class IngestionRecord:
    """What the registry keeps of one ingestion: its unit, its PR (or tracking issue) and the head pushed."""

    fork: str
    id: str
    kind: str
    state: str  # open | blocked (a tracking issue stands in for the PR) | closed
    pr_number: int | None
    head: str | None
    upstream_first: str
    upstream_last: str
    commits: int
    needs_human: str | None

    @property
    def branch(self) -> str:
        return BRANCH_PREFIX + self.id


@dataclass(frozen=True)
class Links:
    """Where a reader can look at upstream commits; plain SHAs when upstream is not on a known web host."""

    upstream_web: str | None  # e.g. https://github.com/triton-lang/triton
    fork_clone_url: str  # what `git fetch` takes in the local commands (no credentials)
    fork_branch: str
    upstream_clone_url: str | None = None  # where the local commands fetch an upstream commit from

    def commit(self, sha: str) -> str:
        return f"[`{sha[:10]}`]({self.upstream_web}/commit/{sha})" if self.upstream_web else f"`{sha[:10]}`"

    def compare(self, base: str, head: str) -> str:
        text = f"{base[:10]}..{head[:10]}"
        return (
            f"[`{text}`]({self.upstream_web}/compare/{base}...{head})" if self.upstream_web else f"`{text}`"
        )


def stacked(pull: Pull) -> bool:
    """Whether a PR builds on another of Sluice's ingestion PRs (its base is one's branch), not on trunk."""
    return pull.base.ref.startswith(BRANCH_PREFIX)


def units_of(plan: Plan) -> list[Unit]:
    """Bundles, then risky chains, in the plan's order (`plan.order` where it gives one: with `strategy:
    merge` the stream's, as a merge brings every commit before it): each unit builds on the ones before."""
    bundles = [Unit(b.id, UnitKind.BUNDLE, b.commits) for b in plan.bundles]
    chains = [Unit(c.id, UnitKind.CHAIN, c.commits, chain=c) for c in plan.chains if c.commits]
    rank = {unit: n for n, unit in enumerate(plan.order)}
    return sorted(bundles + chains, key=lambda u: rank.get(u.id, len(rank)))


def title(unit: Unit) -> str:
    first, last = unit.commits[0].sha, unit.commits[-1].sha
    count = len(unit.commits)
    noun = "upstream commit" if count == 1 else "upstream commits"
    what = "bundle" if unit.kind is UnitKind.BUNDLE else f"risky chain ({_chain_risk(unit)})"
    return f"[sluice] {what}: {count} {noun} ({first[:7]}..{last[:7]})"


def _chain_risk(unit: Unit) -> str:
    return unit.chain.risk.value if unit.chain is not None else RiskLevel.HIGH.value


def labels(picked: PickedUnit) -> list[str]:
    kind = Label.BUNDLE if picked.unit.kind is UnitKind.BUNDLE else Label.RISKY_CHAIN
    return [kind.value] + ([Label.NEEDS_HUMAN.value] if picked.blocked else [])


def _reasons(commit: PlannedCommit) -> str:
    return "; ".join(_reason(r) for r in commit.reasons) or "low risk"


def _reason(reason: RiskReason) -> str:
    """A risk reason, its detail inert: a revert's names the reverted subject, upstream's `(#1234)` and
    @mentions in it. A `bisected` detail is Sluice's own, linking the fork's PR on purpose (its failure
    text made inert when it was written)."""
    detail = reason.detail if reason.kind is RiskKind.BISECTED else plain(reason.detail)
    return f"{reason.kind.value} ({reason.level.value}): {detail}"


def _outcome(report: CommitReport | None) -> str:
    if report is None:
        return "not picked yet (waits for the commit above)"
    if report.status is PickStatus.CLEAN:
        return "applies cleanly"
    resolved = ", ".join(f"`{f.path}` ({f.rule})" for f in report.files if f.resolved)
    if report.status is PickStatus.NEEDS_HUMAN:
        return "**needs a human**: " + ", ".join(
            f"`{f.path}` ({f.cls}: {f.reason})" for f in report.files if not f.resolved
        )
    if report.status is PickStatus.PROPOSED:
        return f"resolution proposed, a code owner must approve: {resolved}"
    return f"conflict resolved mechanically: {resolved}"


def pr_body(
    picked: PickedUnit,
    *,
    links: Links,
    upstream_parent: str | None,
    strategy: Strategy = Strategy.CHERRY_PICK,
) -> str:
    """The PR's description (or, while not one commit applied, the tracking issue's): the range, a row per
    commit, what needs a human and how to revert, in GitHub's limit: a long table shrinks, never the rest."""
    unit = picked.unit
    reports = {r.upstream: r for r in picked.reports}
    first, last = unit.commits[0].sha, unit.commits[-1].sha
    what = "a low-risk bundle" if unit.kind is UnitKind.BUNDLE else "a risky chain, in upstream order"
    span = links.compare(upstream_parent, last) if upstream_parent else links.commit(first)
    head = [
        f"Sluice ingests {plural(len(unit.commits), 'upstream commit')}, {what}.",
        "",
        f"- Upstream range: {span} (first {links.commit(first)}, last {links.commit(last)})",
        f"- Builds on: `{picked.base_branch}`",
        f"- Ingestion id: `{unit.id}` (branch `{unit.branch}`)",
        "",
        "| # | upstream commit | subject | risk | pick |",
        "|---|---|---|---|---|",
    ]
    rows = [
        f"| {index} | {links.commit(commit.sha)} | {_subject(commit.subject)} | "
        f"{cell(_reasons(commit))} | {cell(_outcome(reports.get(commit.sha)))} |"
        for index, commit in enumerate(unit.commits, 1)
    ]
    blocked = picked.blocked is not None
    tail = ["", *needs_human_section(picked, links=links, strategy=strategy)] if blocked else []
    if picked.head is not None:  # nothing to revert while not one commit applied (a tracking issue)
        tail += ["", *_how_to_revert(unit, links=links, strategy=strategy)]
    room = GITHUB_TEXT_MAX_CHARS - len("\n".join([*head, *tail])) - _MARGIN
    rows = rows_that_fit(rows, room=room, more=lambda n: f"| … | {plural(n, 'more commit')} | {_MORE} | | |")
    return "\n".join([*head, *rows, *tail]) + "\n"


def _how_to_revert(unit: Unit, *, links: Links, strategy: Strategy) -> list[str]:
    if strategy is Strategy.MERGE:  # each commit merges one upstream commit: reverted against the fork's side
        revert = "  | xargs -n1 git revert --no-edit -m 1"
    else:
        revert = "  | xargs git revert --no-edit"
    return [
        "### How to revert",
        f"Every commit of this ingestion carries the trailer `Sluice-Ingestion: {unit.id}`. After it merged:",
        "```sh",
        f"git log --format=%H --grep='^Sluice-Ingestion: {unit.id}$' {links.fork_branch} \\",
        revert,
        "```",
        "(or, when it was merged with a merge commit: `git revert -m 1 <merge sha>`).",
    ]


def needs_human_section(
    picked: PickedUnit, *, links: Links, strategy: Strategy = Strategy.CHERRY_PICK
) -> list[str]:
    """What to resolve, and the exact local commands; Sluice never pushes conflict markers."""
    blocked = picked.blocked
    assert blocked is not None
    unresolved = [f for f in blocked.files if not f.resolved]
    start = picked.unit.branch if picked.head else picked.base_branch
    return [
        f"### Needs a human: {links.commit(blocked.upstream)} {_subject(blocked.subject)}",
        (
            "Sluice applied the commits above it and stopped here. Resolve these files:"
            if picked.head is not None
            else "Sluice could not apply this unit's first commit (no branch yet). Resolve these files:"
        ),
        "",
        *(f"- `{f.path}`: {f.cls} — {f.reason}" for f in unresolved),
        "",
        f"Then push the result to `{picked.unit.branch}` (and open a PR from it if there is none). Sluice "
        "leaves a branch a person pushed to alone, and builds the next units once it is merged:",
        "```sh",
        f"git fetch {links.fork_clone_url} {start}",
        f"git switch --create {picked.unit.branch} FETCH_HEAD",
        *([f"git fetch {links.upstream_clone_url} {blocked.upstream}"] if links.upstream_clone_url else []),
        *(
            [
                f"git merge --no-ff {blocked.upstream}",
                "# resolve the conflicts, then: git add <files> && git merge --continue",
            ]
            if strategy is Strategy.MERGE
            else [
                f"git cherry-pick -x {blocked.upstream}",
                "# resolve the conflicts, then: git add <files> && git cherry-pick --continue",
            ]
        ),
        f"git push origin HEAD:refs/heads/{picked.unit.branch}",
        "```",
    ]


def tracking_marker(unit_id: str) -> str:
    """What marks the tracking issue that stands in for a unit's PR while not one of its commits applies."""
    return f"<!-- sluice:ingestion:{unit_id} -->"


@dataclass(frozen=True)
class Classification:
    """The sticky comment but for its validation line, which follows the check runs' states."""

    unit_id: str
    tables: str  # everything below the validation line

    def render(self, tiers: Mapping[CheckName, str]) -> str:
        head = [CLASSIFICATION_MARKER, f"## Sluice classification: `{self.unit_id}`", ""]
        return "\n".join([*head, _validation(tiers), self.tables])


def _validation(tiers: Mapping[CheckName, str]) -> str:
    done = [t.value for t, state in tiers.items() if state == "success" and t is not CheckName.GATE]
    pending = [
        f"{t.value} {state}" for t, state in tiers.items() if state != "success" and t is not CheckName.GATE
    ]
    return f"**Validation:** {', '.join(done) if done else 'no tier completed yet'}" + (
        f" ({', '.join(pending)})" if pending else ""
    )


def classification(picked: PickedUnit, *, config: SluiceConfig, links: Links) -> Classification:
    """The sticky comment: per commit and per conflict, what it is, where, why, and what is still open. In
    GitHub's limit the open risks come first, then the conflicts, then the commit table: each shrinks by
    whole rows, with a line saying how many it left out."""
    reports = {r.upstream: r for r in picked.reports}
    rows = []
    for commit in picked.unit.commits:
        components = sorted({c.name for f in commit.files if (c := config.component_for(f)) is not None})
        report = reports.get(commit.sha)
        rows.append(
            f"| {links.commit(commit.sha)} {_subject(commit.subject)} | {', '.join(components) or '—'} | "
            f"{commit.risk.value} | {_conflict_summary(report)} |"
        )
    conflicts = [_conflict_row(r, f, links=links) for r in picked.reports for f in r.files]
    risks = _unresolved(picked, links=links) or [
        "None: every commit applied cleanly or was resolved mechanically."
    ]
    room = GITHUB_TEXT_MAX_CHARS - _COMMENT_HEAD
    risks = rows_that_fit(
        risks, room=room // 3, more=lambda n: f"- … and {n} more (the commit table shows each commit's risk)"
    )
    room -= len("\n".join(risks))
    conflicts = rows_that_fit(
        conflicts, room=room // 2, more=lambda n: f"| … | {plural(n, 'more conflicting file')} | | | | |"
    )
    room -= len("\n".join(conflicts))
    where = "the upstream range in the PR description lists them all"
    rows = rows_that_fit(rows, room=room, more=lambda n: f"| … {plural(n, 'more commit')} ({where}) | | | |")
    lines = ["", "| upstream commit | component | risk | conflicts |", "|---|---|---|---|", *rows]
    if conflicts:
        lines += [
            "",
            "### Conflicts",
            "",
            "| upstream commit | file (fork lines) | class | symbol | fork commits on the other side "
            "| outcome |",
            "|---|---|---|---|---|---|",
            *conflicts,
        ]
    lines += ["", "### Unresolved risks", "", *risks]
    return Classification(picked.unit.id, "\n".join(lines) + "\n")


def _conflict_summary(report: CommitReport | None) -> str:
    if report is None:
        return "not picked yet"
    if not report.files:
        return "none"
    return ", ".join(f"{f.cls}{'' if f.resolved else ' (unresolved)'}" for f in report.files)


def _conflict_row(report: CommitReport, file: FileReport, *, links: Links) -> str:
    """A conflicting file: where (its blocks' lines on fork trunk), its class, the symbol, the fork commits
    on the other side, and what became of it with the evidence (a resolved block's rule, a human's why)."""
    symbol = file.evidence.symbol or next((h.symbol for h in file.hunks if h.symbol), None)
    lines = f" ({', '.join(str(h.line) for h in file.hunks[:_HUNKS_SHOWN])}{_and_more(file.hunks)})"
    outcome = f"resolved ({file.rule})" if file.resolved else f"needs a human: {file.reason}"
    if file.resolved and file.hunks:
        evidence = "; ".join(_hunk_evidence(h) for h in file.hunks[:_HUNKS_SHOWN]) + _and_more(file.hunks)
        outcome += f": {evidence}"
    component = f" ({file.evidence.component})" if file.evidence.component else ""
    others = ", ".join(sha[:12] for sha in file.fork_commits()) or "—"  # bare: GitHub links them
    return (
        f"| {links.commit(report.upstream)} | `{cell(file.path)}`{lines if file.hunks else ''}{component} | "
        f"{file.cls} | {f'`{cell(symbol)}`' if symbol else '—'} | {others} | {cell(outcome)} |"
    )


def _hunk_evidence(hunk: HunkReport) -> str:
    reused = ", a resolution a person made before" if hunk.reused else ""
    return f"line {hunk.line}: {hunk.evidence}{reused}"


def _and_more(hunks: tuple[HunkReport, ...]) -> str:
    return f" and {len(hunks) - _HUNKS_SHOWN} more" if len(hunks) > _HUNKS_SHOWN else ""


def _unresolved(picked: PickedUnit, *, links: Links) -> list[str]:
    found = []
    for commit in picked.unit.commits:
        risky = [r for r in commit.reasons if r.level in (RiskLevel.HIGH, RiskLevel.CRITICAL)]
        found += [f"- {links.commit(commit.sha)} {_reason(r)}" for r in risky]
    for report in picked.reports:
        if report.status is PickStatus.PROPOSED:
            found.append(
                f"- {links.commit(report.upstream)}: a proposed resolution awaits a code owner's approval"
            )
        if report.status is PickStatus.NEEDS_HUMAN:
            found.append(
                f"- {links.commit(report.upstream)}: conflicts need a human (see the PR description)"
            )
    return found


def _subject(text: str) -> str:
    """An upstream commit subject in a table cell, inert: no @mention of upstream's people, no link to the
    fork's own issue for upstream's `(#1234)` (the commit's link beside it leads to upstream's PR)."""
    return cell(plain(text))


def upstream_web_url(url: str, *, web_base: str) -> str | None:
    """`https://github.com/o/r` for an upstream on the same GitHub as the App, else None."""
    base = web_base.rstrip("/") + "/"
    if not url.startswith(base):
        return None
    path = url.removeprefix(base).removesuffix("/").removesuffix(".git")
    return base + path if path.count("/") == 1 else None


def owner_repo(url: str, *, web_base: str) -> str | None:
    web = upstream_web_url(url, web_base=web_base)
    return web.removeprefix(web_base.rstrip("/") + "/") if web else None
