"""Ingestion, level-triggered: what must change on the fork so that it shows the plan's units."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from bot.core.config import SluiceConfig
from bot.core.ingestion import (
    BRANCH_PREFIX,
    MANAGED_LABELS,
    TIER_TITLES,
    CheckName,
    Classification,
    IngestionRecord,
    Label,
    Links,
    PickedUnit,
    UnitKind,
    classification,
    labels,
    pr_body,
    title,
    tracking_marker,
)
from bot.core.limits import fit_for_github

QUEUED = "queued"  # the state of a check run Sluice creates
LEFT_THE_PLAN = (
    "Sluice closes this {what}: the current plan no longer has `{unit_id}` (its commits were ingested, "
    "re-planned into other units, or wait behind a unit that needs a human)."
)
SHOWN_UNITS = 10  # the plan's units a closed PR's note names

# ------------------------------------------------------------------ the desired state


@dataclass(frozen=True)
class DesiredUnit:
    """One unit as the fork should show it: its branch at `head` and its PR, rendered. When not one of its
    commits applied (`head` is None), a tracking issue stands in for the PR."""

    id: str
    kind: UnitKind
    base: str  # the PR's base: fork trunk, or the previous unit's branch
    head: str | None
    title: str
    body: str
    labels: tuple[str, ...]
    classification: Classification
    upstream_first: str
    upstream_last: str
    commits: int
    needs_human: str | None = None  # the upstream commit that stopped the pick, if one did

    @property
    def branch(self) -> str:
        return BRANCH_PREFIX + self.id

    @classmethod
    def of(
        cls, picked: PickedUnit, *, config: SluiceConfig, links: Links, upstream_parent: str | None
    ) -> DesiredUnit:
        unit, blocked = picked.unit, picked.blocked
        return cls(
            id=unit.id,
            kind=unit.kind,
            base=picked.base_branch,
            head=picked.head,
            title=title(unit),
            body=fit_for_github(
                pr_body(picked, links=links, upstream_parent=upstream_parent, strategy=config.strategy)
            ),
            labels=tuple(labels(picked)),
            classification=classification(picked, config=config, links=links),
            upstream_first=unit.commits[0].sha,
            upstream_last=unit.commits[-1].sha,
            commits=len(unit.commits),
            needs_human=blocked.upstream if blocked is not None else None,
        )


@dataclass(frozen=True)
class Desired:
    """The plan's units for one fork, each building on the one before."""

    fork: str
    units: tuple[DesiredUnit, ...] = ()


# ------------------------------------------------------------------ the observed state


@dataclass(frozen=True)
class ObservedPull:
    number: int
    branch: str
    base: str
    title: str
    body: str
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class ObservedComment:
    id: int
    body: str


@dataclass(frozen=True)
class ObservedIssue:
    number: int
    title: str
    body: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class ObservedState:
    """What the fork shows now. git and the registry tell the first three while the plan is built; GitHub the
    rest. Closed PRs are not observed: a unit still in the plan whose PR was closed gets a new one."""

    branches: Mapping[str, str] = field(default_factory=dict)  # ingestion branch -> its head on the fork
    pushed_by_people: frozenset[str] = frozenset()  # ingestion branches a person pushed to: theirs now
    records: Mapping[str, IngestionRecord] = field(default_factory=dict)  # unit id -> what the registry has
    pulls: tuple[ObservedPull, ...] = ()  # the open PRs from the fork's own ingestion branches
    classification: Mapping[int, ObservedComment] = field(default_factory=dict)  # PR -> the sticky comment
    checks: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # head -> {name: conclusion/status}
    issues: tuple[ObservedIssue, ...] = ()  # open tracking issues, newest first

    def pull_for(self, branch: str) -> ObservedPull | None:
        return next((p for p in self.pulls if p.branch == branch), None)

    def issue(self, marker: str, *, label: str) -> ObservedIssue | None:
        return next((i for i in self.issues if label in i.labels and i.body.startswith(marker)), None)


# ------------------------------------------------------------------ actions


@dataclass(frozen=True)
class Opened:
    """The PR or tracking issue an earlier action of the same apply opens, by its branch or its marker."""

    key: str


Number = int | Opened  # a PR or issue number, or the one an earlier action opens


@dataclass(frozen=True)
class PushBranch:
    branch: str
    head: str
    lease: str | None  # where the branch is on the fork now; None: it must not exist yet


@dataclass(frozen=True)
class OpenPull:
    branch: str
    base: str
    title: str
    body: str


@dataclass(frozen=True)
class UpdatePull:
    """Only what changed (None: leave it), so a re-plan that changes nothing writes nothing."""

    number: int
    title: str | None = None
    body: str | None = None
    base: str | None = None


@dataclass(frozen=True)
class ClosePull:
    number: int
    reason: str  # posted as a comment before the PR is closed


@dataclass(frozen=True)
class SetLabels:
    number: Number
    labels: tuple[str, ...]  # every label the PR is to carry: Sluice's, and the ones people added


@dataclass(frozen=True)
class UpsertComment:
    number: Number
    body: str
    comment_id: int | None = None  # Sluice's comment to edit in place; None: post it


@dataclass(frozen=True)
class CreateCheckRuns:
    head: str
    runs: tuple[tuple[str, str], ...]  # (name, title), created queued


@dataclass(frozen=True)
class OpenIssue:
    marker: str
    title: str
    body: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class UpdateIssue:
    number: int
    title: str
    body: str


@dataclass(frozen=True)
class CloseIssue:
    number: int
    continued_in: Number | None  # the PR that takes over from the tracking issue; None: the unit is gone
    reason: str = ""  # why, when no PR takes over


@dataclass(frozen=True)
class RecordIngestion:
    record: IngestionRecord
    opened: Opened | None = None  # the record's PR or issue is the one this apply opens


Action = (
    PushBranch
    | OpenPull
    | UpdatePull
    | ClosePull
    | SetLabels
    | UpsertComment
    | CreateCheckRuns
    | OpenIssue
    | UpdateIssue
    | CloseIssue
    | RecordIngestion
)


def continued_note(number: int) -> str:
    return f"Continued in #{number}."


# ------------------------------------------------------------------ reconcile


def reconcile(desired: Desired, observed: ObservedState) -> list[Action]:
    """Pure: what must change on the fork so that it shows `desired`; nothing when it already does.

    Every branch moves first (one atomic push), then each unit's PR or tracking issue, in the plan's order;
    last, the PRs whose units left the plan close. A branch a person pushed to is theirs: Sluice neither
    pushes to it nor edits or closes its PR.
    """
    ours = [u for u in desired.units if u.branch not in observed.pushed_by_people]
    actions: list[Action] = [push for u in ours if (push := _push(u, observed)) is not None]
    for unit in ours:
        actions += _publish(unit, observed, fork=desired.fork)
    return actions + _close_stale(desired, observed) + _record_gone(desired, observed)


def _push(unit: DesiredUnit, observed: ObservedState) -> PushBranch | None:
    now = observed.branches.get(unit.branch)
    if unit.head is None or now == unit.head:
        return None
    return PushBranch(unit.branch, unit.head, lease=now)


def _publish(unit: DesiredUnit, observed: ObservedState, *, fork: str) -> list[Action]:
    if unit.head is None:  # nothing to open a PR with yet (GitHub refuses an empty one)
        return _track(unit, observed, fork=fork)
    pull = observed.pull_for(unit.branch)
    number: Number = pull.number if pull is not None else Opened(unit.branch)
    return [
        *_open_or_update(unit, pull),
        *_labels(unit, pull, number),
        *_checks_and_comment(unit, unit.head, observed=observed, pull=pull, number=number),
        *_continued(unit, observed, number),
        *_record(unit, fork=fork, state="open", number=number, observed=observed),
    ]


def _open_or_update(unit: DesiredUnit, pull: ObservedPull | None) -> list[Action]:
    if pull is None:
        return [OpenPull(unit.branch, base=unit.base, title=unit.title, body=unit.body)]
    changed = {
        name: wanted
        for name, wanted, now in (
            ("title", unit.title, pull.title),
            ("body", unit.body, pull.body),
            ("base", unit.base, pull.base),
        )
        if wanted != now
    }
    return [UpdatePull(pull.number, **changed)] if changed else []


def _labels(unit: DesiredUnit, pull: ObservedPull | None, number: Number) -> list[Action]:
    """Sluice's labels exactly `unit.labels`; the ones people added stay."""
    now = pull.labels if pull is not None else ()
    wanted = tuple(lab for lab in now if lab not in MANAGED_LABELS) + tuple(dict.fromkeys(unit.labels))
    return [SetLabels(number, wanted)] if sorted(wanted) != sorted(now) else []


def _checks_and_comment(
    unit: DesiredUnit, head: str, *, observed: ObservedState, pull: ObservedPull | None, number: Number
) -> list[Action]:
    """A check run per tier on the head, then the sticky comment, edited in place, telling their states."""
    present = observed.checks.get(head, {})
    missing = tuple((t.value, TIER_TITLES[t]) for t in CheckName if t.value not in present)
    actions: list[Action] = [CreateCheckRuns(head, missing)] if missing else []
    body = fit_for_github(unit.classification.render({t: present.get(t.value, QUEUED) for t in CheckName}))
    comment = observed.classification.get(pull.number) if pull is not None else None
    if comment is None:
        actions.append(UpsertComment(number, body))
    elif comment.body != body:
        actions.append(UpsertComment(number, body, comment_id=comment.id))
    return actions


def _continued(unit: DesiredUnit, observed: ObservedState, number: Number) -> list[Action]:
    """The tracking issue a unit had while its first commit needed a human closes, pointing at its PR."""
    issue = observed.issue(tracking_marker(unit.id), label=Label.NEEDS_HUMAN.value)
    return [CloseIssue(issue.number, continued_in=number)] if issue is not None else []


def _track(unit: DesiredUnit, observed: ObservedState, *, fork: str) -> list[Action]:
    """The tracking issue that stands in for the PR, opened or edited in place."""
    marker = tracking_marker(unit.id)
    body = fit_for_github(
        f"{marker}\n{unit.body}"
    )  # the PR's body fitted GitHub alone; with the marker, cut again
    issue = observed.issue(marker, label=unit.labels[0])
    if issue is None:
        opened = Opened(marker)
        return [
            OpenIssue(marker, title=unit.title, body=body, labels=unit.labels),
            *_record(unit, fork=fork, state="blocked", number=opened, observed=observed),
        ]
    edit = (
        [UpdateIssue(issue.number, unit.title, body)]
        if (issue.title, issue.body) != (unit.title, body)
        else []
    )
    return [*edit, *_record(unit, fork=fork, state="blocked", number=issue.number, observed=observed)]


def _record(
    unit: DesiredUnit, *, fork: str, state: str, number: Number, observed: ObservedState
) -> list[Action]:
    record = IngestionRecord(
        fork=fork,
        id=unit.id,
        kind=unit.kind.value,
        state=state,
        pr_number=number if isinstance(number, int) else None,
        head=unit.head,
        upstream_first=unit.upstream_first,
        upstream_last=unit.upstream_last,
        commits=unit.commits,
        needs_human=unit.needs_human,
    )
    if isinstance(number, Opened):
        return [RecordIngestion(record, opened=number)]
    return [] if observed.records.get(unit.id) == record else [RecordIngestion(record)]


def _close_stale(desired: Desired, observed: ObservedState) -> list[Action]:
    """Close the PRs the plan no longer has (upstream or the fork's trunk changed under them)."""
    keep = {u.branch for u in desired.units} | observed.pushed_by_people
    actions: list[Action] = []
    for pull in observed.pulls:
        if pull.branch in keep:
            continue
        unit_id = pull.branch.removeprefix(BRANCH_PREFIX)
        actions.append(ClosePull(pull.number, reason=left_the_plan(unit_id, desired, observed)))
        record = observed.records.get(unit_id)
        if record is not None and record.state == "open":
            actions.append(RecordIngestion(dataclasses.replace(record, state="closed")))
    return actions


def left_the_plan(unit_id: str, desired: Desired, observed: ObservedState, *, what: str = "PR") -> str:
    """Why an ingestion PR closes, and where its reviewer goes on: the PRs of branches people pushed to (the
    plan waits on them), then the current plan's units."""
    theirs = [
        f"#{p.number} (`{p.branch}`, a person's now)"
        for p in observed.pulls
        if p.branch in observed.pushed_by_people
    ]
    shown = [*theirs, *(_where(unit, observed) for unit in desired.units)]
    more = f" and {len(shown) - SHOWN_UNITS} more" if len(shown) > SHOWN_UNITS else ""
    now = (
        f" Ingestion goes on in: {', '.join(shown[:SHOWN_UNITS])}{more}."
        if shown
        else " The plan has no unit now."
    )
    return LEFT_THE_PLAN.format(unit_id=unit_id, what=what) + now


def _where(unit: DesiredUnit, observed: ObservedState) -> str:
    pull = observed.pull_for(unit.branch)
    if pull is not None:
        return f"#{pull.number} (`{unit.id}`)"
    return f"`{unit.id}` (" + ("its PR opens next)" if unit.head else "a tracking issue: needs a human)")


def _record_gone(desired: Desired, observed: ObservedState) -> list[Action]:
    """Close the records of PRs GitHub no longer shows open (merged, or closed by a person) whose unit left
    the plan: otherwise they would count as open ingestions forever. A unit still planned keeps its record,
    which its new PR's record replaces. A blocked unit that left the plan (its commits ingested through a
    person's PR, skipped, or gone upstream) closes its tracking issue too, saying why, unless a person's
    push to its branch is what the plan waits on."""
    planned = {u.id for u in desired.units}
    shown = {p.number for p in observed.pulls}
    actions: list[Action] = []
    for record in observed.records.values():
        if record.id in planned:
            continue
        if record.state == "open" and record.pr_number not in shown:
            actions.append(RecordIngestion(dataclasses.replace(record, state="closed")))
        elif record.state == "blocked" and record.branch not in observed.pushed_by_people:
            if record.pr_number is not None:
                reason = left_the_plan(record.id, desired, observed, what="issue")
                actions.append(CloseIssue(record.pr_number, continued_in=None, reason=reason))
            actions.append(RecordIngestion(dataclasses.replace(record, state="closed")))
    return actions
