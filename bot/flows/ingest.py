"""Ingestion's edges around the pure reconcile: pick the plan's units, observe the fork, apply the actions."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from bot.core.config import Strategy
from bot.core.ingestion import (
    BRANCH_PREFIX,
    CLASSIFICATION_MARKER,
    COMMITTER,
    IngestionRecord,
    Label,
    PickedUnit,
    Unit,
)
from bot.core.models import CommitInfo
from bot.core.reconcile import (
    Action,
    CloseIssue,
    ClosePull,
    CreateCheckRuns,
    Desired,
    DesiredUnit,
    Number,
    ObservedComment,
    ObservedIssue,
    ObservedPull,
    ObservedState,
    OpenIssue,
    OpenPull,
    PushBranch,
    RecordIngestion,
    SetLabels,
    UpdateIssue,
    UpdatePull,
    UpsertComment,
    continued_note,
)
from bot.core.webhooks import CheckRun, Pull
from bot.flows.pick import Picker, pick_in_order
from bot.git.mirror import BranchUpdate
from bot.ports import Forge, HistoryReader

Push = Callable[[Sequence[BranchUpdate]], Awaitable[None]]  # one atomic push of the fork's branches
Record = Callable[[IngestionRecord], Awaitable[None]]  # the registry's save_ingestion
log = logging.getLogger("sluice.ingest")

# ------------------------------------------------------------------ the desired state: picking


@dataclass(frozen=True)
class Picking:
    """The plan's units as picked, each onto the one before, up to the first that waits for a person."""

    units: tuple[PickedUnit, ...]
    pushed_by_people: frozenset[str] = frozenset()  # the branch a person pushed to, where picking stopped
    upstream_parents: Mapping[str, str] = dataclasses.field(default_factory=dict)  # unit id -> parent


def pick_units(
    picker: Picker,
    units: Sequence[Unit],
    *,
    commits: Mapping[str, CommitInfo],
    onto: str,
    base: str,
    strategy: Strategy,
    branches: Mapping[str, str],
    records: Mapping[str, IngestionRecord],
) -> Picking:
    """Pick `units` in order onto `onto` (blocking git work). A unit a person pushed to stops the picking:
    Sluice leaves it, and the units after it build on theirs, once it merges."""
    picked: list[PickedUnit] = []
    people: frozenset[str] = frozenset()
    for unit in units:
        theirs = branches.get(unit.branch)
        if theirs is not None and not pushed_by_sluice(picker.repo, theirs, unit.id, records.get(unit.id)):
            people = frozenset({unit.branch})
            break
        head, reports = pick_in_order(
            picker,
            onto,
            [commits[c.sha] for c in unit.commits],
            strategy=strategy,
            trailers=[("Sluice-Ingestion", unit.id)],
        )
        picked.append(PickedUnit(unit, base_branch=base, head=head, reports=reports))
        if head is None or picked[-1].blocked is not None:
            break  # later units build on this one: they wait for the human
        onto, base = head, unit.branch
    return Picking(tuple(picked), people, _upstream_parents(picked, commits))


def pushed_by_sluice(repo: HistoryReader, head: str, unit_id: str, recorded: IngestionRecord | None) -> bool:
    """Whether the branch head is Sluice's work, which it may replace (a person's resolution it may not): the
    head Sluice recorded, or (a push whose record was lost) a commit Sluice committed with the unit's
    trailer. A person's `commit --amend` or `rebase -i` keeps the trailer but makes them the committer."""
    if recorded is not None and head == recorded.head:
        return True
    committer, _, message = repo.run("log", "-1", "--format=%cn <%ce>%x00%B", head).partition("\0")
    return (
        committer == COMMITTER
        and f"Sluice-Ingestion: {unit_id}" in message
        and "(cherry picked from commit" not in message
    )


def _upstream_parents(picked: Sequence[PickedUnit], commits: Mapping[str, CommitInfo]) -> dict[str, str]:
    """Per unit, the parent of its first upstream commit: where its upstream range starts."""
    firsts = {p.unit.id: commits[p.unit.commits[0].sha] for p in picked}
    return {unit_id: first.parents[0] for unit_id, first in firsts.items() if first.parents}


# ------------------------------------------------------------------ the observed state


async def observe(forge: Forge, desired: Desired, *, seen: ObservedState) -> ObservedState:
    """`seen` (what git and the registry said while planning) with what GitHub shows: the open ingestion
    PRs, and for the units Sluice publishes their sticky comments, check runs and tracking issues."""
    ours = [u for u in desired.units if u.branch not in seen.pushed_by_people]
    pulls = tuple(_pull(p) for p in await forge.open_pulls() if _is_ingestion(p, forge.repo))
    published = {u.branch for u in ours if u.head is not None}
    comments = {}
    for pull in pulls:
        if pull.branch in published:
            found = await forge.find_comment(pull.number, marker=CLASSIFICATION_MARKER)
            if found is not None:
                comments[pull.number] = ObservedComment(found.id, found.body or "")
    # Only heads already on the fork have check runs (GitHub answers 422 for a commit it does not have).
    heads = {u.head for u in ours if u.head is not None and seen.branches.get(u.branch) == u.head}
    checks = {head: _states(await forge.check_runs(head)) for head in sorted(heads)}
    issues = await _tracking_issues(forge, ours)
    return dataclasses.replace(seen, pulls=pulls, classification=comments, checks=checks, issues=issues)


def _is_ingestion(pull: Pull, repo: str) -> bool:
    """A PR from one of the fork's own ingestion branches (not from a branch of that name in another fork)."""
    return pull.on_branch_of(repo, BRANCH_PREFIX)


def _pull(pull: Pull) -> ObservedPull:
    return ObservedPull(
        number=pull.number,
        branch=pull.head.ref,
        base=pull.base.ref,
        title=pull.title,
        body=pull.body or "",
        labels=pull.label_names,
    )


def _states(runs: Mapping[str, CheckRun]) -> dict[str, str]:
    return {name: run.state for name, run in runs.items()}


async def _tracking_issues(forge: Forge, units: Sequence[DesiredUnit]) -> tuple[ObservedIssue, ...]:
    """The open issues reconcile may look a unit's tracking issue up in: by its kind's label while it has
    no PR, by `sluice:needs-human` once it has one. Newest first, as GitHub lists them."""
    labels = {u.labels[0] if u.head is None else Label.NEEDS_HUMAN.value for u in units}
    found: dict[int, ObservedIssue] = {}
    for label in sorted(labels):
        for issue in await forge.open_issues(label=label):
            found[issue.number] = ObservedIssue(
                number=issue.number, title=issue.title, body=issue.text, labels=issue.label_names
            )
    return tuple(sorted(found.values(), key=lambda issue: -issue.number))


# ------------------------------------------------------------------ apply


async def apply(actions: Sequence[Action], *, forge: Forge, push: Push, record: Record) -> None:
    """Perform `actions` in order: branch moves (consecutive ones in one atomic push, each with its lease),
    then calls to GitHub and writes to the registry. The only code that changes GitHub during ingestion.

    It lives in `bot.flows`, not `bot.github`, because it drives three adapters (the forge, the mirror's
    push, the registry), and it takes them as callables so that it depends on no app wiring.
    """
    perform = _Performer(forge, record)
    pending: list[BranchUpdate] = []
    for action in actions:
        if isinstance(action, PushBranch):
            pending.append(BranchUpdate(action.branch, action.head, action.lease))
            continue
        if pending:
            await push(pending)
            pending = []
        await perform(action)
    if pending:
        await push(pending)


class _Performer:
    """One action at a time, remembering the numbers of the PRs and issues it opens for later actions."""

    def __init__(self, forge: Forge, record: Record) -> None:
        self.forge, self.record = forge, record
        self.opened: dict[str, int] = {}

    def number(self, number: Number) -> int:
        return number if isinstance(number, int) else self.opened[number.key]

    async def __call__(self, action: Action) -> None:
        forge = self.forge
        match action:
            case OpenPull(branch=branch):
                pull = await forge.create_pull(
                    title=action.title, body=action.body, head=branch, base=action.base
                )
                self.opened[branch] = pull.number
                log.info("%s: opened #%d for %s", forge.repo, pull.number, branch)
            case UpdatePull(number=number):
                wanted = {"title": action.title, "body": action.body, "base": action.base}
                await forge.edit_pull(number, {k: v for k, v in wanted.items() if v is not None})
            case ClosePull(number=number, reason=reason):
                await forge.close_pull(number, comment=reason)
            case SetLabels(number=number, labels=labels):
                await forge.replace_labels(self.number(number), labels)
            case UpsertComment(number=number, body=body, comment_id=None):
                await forge.post_comment(self.number(number), body)
            case UpsertComment(body=body, comment_id=int(comment_id)):
                await forge.edit_comment(comment_id, body)
            case CreateCheckRuns(head=head, runs=runs):
                for name, title in runs:
                    await forge.create_check_run(head, name, title=title)
            case OpenIssue(marker=marker):
                number = await forge.create_issue(title=action.title, body=action.body, labels=action.labels)
                self.opened[marker] = number
            case UpdateIssue(number=number):
                await forge.edit_issue(number, title=action.title, body=action.body)
            case CloseIssue(number=number, continued_in=pull):
                note = continued_note(self.number(pull)) if pull is not None else action.reason
                await forge.close_issue(number, comment=note)
            case RecordIngestion(record=saved, opened=opened):
                if opened is not None:
                    saved = dataclasses.replace(saved, pr_number=self.opened[opened.key])
                await self.record(saved)
