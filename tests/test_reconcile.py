"""Ingestion's reconcile as tables: (desired, observed) → actions, with no GitHub, git or database at all."""

from __future__ import annotations

import dataclasses

import pytest

from bot.core.ingestion import (
    BRANCH_PREFIX,
    TIER_TITLES,
    CheckName,
    Classification,
    IngestionRecord,
    UnitKind,
    tracking_marker,
)
from bot.core.limits import GITHUB_TEXT_MAX_CHARS, fit_for_github
from bot.core.reconcile import (
    LEFT_THE_PLAN,
    Action,
    CloseIssue,
    ClosePull,
    CreateCheckRuns,
    Desired,
    DesiredUnit,
    ObservedComment,
    ObservedIssue,
    ObservedPull,
    ObservedState,
    Opened,
    OpenIssue,
    OpenPull,
    PushBranch,
    RecordIngestion,
    SetLabels,
    UpdateIssue,
    UpdatePull,
    UpsertComment,
    left_the_plan,
    reconcile,
)

FORK = "meta/triton"
BUNDLE, CHAIN = "bundle-aaaaaaaaaa", "chain-bbbbbbbbbb"
BUNDLE_BRANCH, CHAIN_BRANCH = f"sluice/ingest/{BUNDLE}", f"sluice/ingest/{CHAIN}"
H1, H2, THEIRS = "1" * 40, "2" * 40, "f" * 40
NO_UNIT = " The plan has no unit now."
THEIRS_NOW = f" Ingestion goes on in: #7 (`{BUNDLE_BRANCH}`, a person's now)."
ALL_RUNS = tuple((t.value, TIER_TITLES[t]) for t in CheckName)
QUEUED = {t.value: "queued" for t in CheckName}
COMMENT_ID = 99


def unit(
    unit_id: str = BUNDLE, *, head: str | None = H1, base: str = "main", body: str = "body"
) -> DesiredUnit:
    kind = UnitKind.BUNDLE if unit_id.startswith("bundle") else UnitKind.CHAIN
    label = "sluice:bundle" if kind is UnitKind.BUNDLE else "sluice:risky-chain"
    return DesiredUnit(
        id=unit_id,
        kind=kind,
        base=base,
        head=head,
        title=f"[sluice] {unit_id}",
        body=body,
        labels=(label,) if head is not None else (label, "sluice:needs-human"),
        classification=Classification(unit_id, "\n| the tables |\n"),
        upstream_first="a" * 40,
        upstream_last="c" * 40,
        commits=2,
        needs_human=None if head is not None else "c" * 40,
    )


def comment(u: DesiredUnit, **states: str) -> str:
    return u.classification.render({t: states.get(t.name, "queued") for t in CheckName})


def record(u: DesiredUnit, *, number: int | None = 7, state: str = "open") -> IngestionRecord:
    return IngestionRecord(
        fork=FORK,
        id=u.id,
        kind=u.kind.value,
        state=state,
        pr_number=number,
        head=u.head,
        upstream_first=u.upstream_first,
        upstream_last=u.upstream_last,
        commits=u.commits,
        needs_human=u.needs_human,
    )


def pull(u: DesiredUnit, *, number: int = 7, labels: tuple[str, ...] | None = None) -> ObservedPull:
    return ObservedPull(
        number, u.branch, u.base, u.title, u.body, labels=u.labels if labels is None else labels
    )


def synced(*units: DesiredUnit, first: int = 7) -> ObservedState:
    """The fork as a finished apply of `units` leaves it (PRs numbered from `first`)."""
    numbers = {u.id: first + i for i, u in enumerate(units)}
    return ObservedState(
        branches={u.branch: u.head for u in units if u.head is not None},
        records={u.id: record(u, number=numbers[u.id]) for u in units},
        pulls=tuple(pull(u, number=numbers[u.id]) for u in units),
        classification={
            numbers[u.id]: ObservedComment(COMMENT_ID + i, comment(u)) for i, u in enumerate(units)
        },
        checks={u.head: QUEUED for u in units if u.head is not None},
    )


def desired(*units: DesiredUnit) -> Desired:
    return Desired(FORK, units)


B, B2 = unit(), unit(head=H2, body="body, grown")
C = unit(CHAIN, base=BUNDLE_BRANCH)


def opened(u: DesiredUnit) -> list[Action]:
    """What publishing `u` afresh does, after its push."""
    new = Opened(u.branch)
    assert u.head is not None
    return [
        OpenPull(u.branch, base=u.base, title=u.title, body=u.body),
        SetLabels(new, u.labels),
        CreateCheckRuns(u.head, ALL_RUNS),
        UpsertComment(new, comment(u)),
        RecordIngestion(record(u, number=None), opened=new),
    ]


CASES: list[tuple[str, Desired, ObservedState, list[Action]]] = [
    (
        "nothing-open: push, open, labels, checks, comment, record",
        desired(B),
        ObservedState(),
        [PushBranch(BUNDLE_BRANCH, H1, lease=None), *opened(B)],
    ),
    ("same head: nothing to do (a second run is empty)", desired(B, C), synced(B, C), []),
    (
        "new head: push with a lease on the old one, update only what changed",
        desired(B2),
        synced(B),
        [
            PushBranch(BUNDLE_BRANCH, H2, lease=H1),
            UpdatePull(7, body="body, grown"),
            CreateCheckRuns(H2, ALL_RUNS),
            RecordIngestion(record(B2)),
        ],
    ),
    (
        "new head: the comment's tier states go back to queued, edited in place",
        desired(B2),
        dataclasses.replace(
            synced(B),
            checks={H1: {**QUEUED, "sluice/L1": "success"}},
            classification={7: ObservedComment(COMMENT_ID, comment(B, L1="success"))},
        ),
        [
            PushBranch(BUNDLE_BRANCH, H2, lease=H1),
            UpdatePull(7, body="body, grown"),
            CreateCheckRuns(H2, ALL_RUNS),
            UpsertComment(7, comment(B2), comment_id=COMMENT_ID),
            RecordIngestion(record(B2)),
        ],
    ),
    (
        "a person pushed to the unit's branch: left alone, its PR kept open, no push",
        desired(B2),
        dataclasses.replace(
            synced(B), branches={BUNDLE_BRANCH: THEIRS}, pushed_by_people=frozenset({BUNDLE_BRANCH})
        ),
        [],
    ),
    (
        "a person pushed to the branch the picking stopped at: its PR stays, the one after it closes",
        desired(),
        dataclasses.replace(synced(B, C), pushed_by_people=frozenset({BUNDLE_BRANCH})),
        [
            ClosePull(8, reason=LEFT_THE_PLAN.format(unit_id=CHAIN, what="PR") + THEIRS_NOW),
            RecordIngestion(record(C, number=8, state="closed")),
        ],
    ),
    (
        "closed PR for a unit still in the plan: a new PR from the same branch, nothing pushed",
        desired(B),
        dataclasses.replace(synced(B), pulls=(), classification={}),
        opened(B)[:2] + opened(B)[3:],  # the head's check runs are there already
    ),
    (
        "a unit that left the plan: its PR closes with the reason, its record too",
        desired(B),
        dataclasses.replace(
            synced(B),
            pulls=(*synced(B).pulls, pull(C, number=8)),
            records={**synced(B).records, CHAIN: record(C, number=8)},
        ),
        [
            ClosePull(
                8,
                reason=LEFT_THE_PLAN.format(unit_id=CHAIN, what="PR")
                + f" Ingestion goes on in: #7 (`{BUNDLE}`).",
            ),
            RecordIngestion(record(C, number=8, state="closed")),
        ],
    ),
    (
        "a PR merged or closed on GitHub whose unit left the plan: only its record closes",
        desired(B),
        dataclasses.replace(synced(B), records={**synced(B).records, CHAIN: record(C, number=8)}),
        [RecordIngestion(record(C, number=8, state="closed"))],
    ),
    (
        "a record closed already: nothing to record",
        desired(),
        ObservedState(records={BUNDLE: record(B, state="closed")}),
        [],
    ),
    (
        "a blocked unit that left the plan: its tracking issue closes, saying why, and so does its record",
        desired(),
        ObservedState(records={CHAIN: record(C, number=3, state="blocked")}),
        [
            CloseIssue(
                3, continued_in=None, reason=LEFT_THE_PLAN.format(unit_id=CHAIN, what="issue") + NO_UNIT
            ),
            RecordIngestion(record(C, number=3, state="closed")),
        ],
    ),
    (
        "a blocked unit whose branch a person pushed to: the plan waits on them, nothing closes",
        desired(),
        ObservedState(
            records={CHAIN: record(C, number=3, state="blocked")},
            pushed_by_people=frozenset({f"{BRANCH_PREFIX}{CHAIN}"}),
        ),
        [],
    ),
    (
        "a unit that left the plan, never recorded: its PR closes",
        desired(),
        dataclasses.replace(synced(B), records={}),
        [ClosePull(7, reason=LEFT_THE_PLAN.format(unit_id=BUNDLE, what="PR") + NO_UNIT)],
    ),
    (
        "label drift: only the labels are set; people's labels stay",
        desired(B),
        dataclasses.replace(synced(B), pulls=(pull(B, labels=("team:compiler", "sluice:risky-chain")),)),
        [SetLabels(7, ("team:compiler", "sluice:bundle"))],
    ),
    (
        "labels removed by a person: Sluice's come back",
        desired(B),
        dataclasses.replace(synced(B), pulls=(pull(B, labels=()),)),
        [SetLabels(7, ("sluice:bundle",))],
    ),
    (
        "a tier passed: the classification comment is edited in place, never a second one",
        desired(B),
        dataclasses.replace(synced(B), checks={H1: {**QUEUED, "sluice/L1": "success"}}),
        [UpsertComment(7, comment(B, L1="success"), comment_id=COMMENT_ID)],
    ),
    (
        "a check run deleted: only it is created again",
        desired(B),
        dataclasses.replace(synced(B), checks={H1: {k: v for k, v in QUEUED.items() if k != "sluice/L3"}}),
        [CreateCheckRuns(H1, (("sluice/L3", TIER_TITLES[CheckName.L3]),))],
    ),
    (
        "the classification comment deleted: posted again",
        desired(B),
        dataclasses.replace(synced(B), classification={}),
        [UpsertComment(7, comment(B))],
    ),
    (
        "the PR's base moved (the unit below merged): only the base changes",
        desired(dataclasses.replace(C, base="main")),
        synced(C),
        [UpdatePull(7, base="main")],
    ),
]


@pytest.mark.parametrize(("want", "observed", "actions"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_reconcile(want: Desired, observed: ObservedState, actions: list[Action]) -> None:
    assert reconcile(want, observed) == actions


BLOCKED = unit(CHAIN, head=None, base=BUNDLE_BRANCH)
MARKER = tracking_marker(CHAIN)
TRACKING = ObservedIssue(3, BLOCKED.title, f"{MARKER}\n{BLOCKED.body}", BLOCKED.labels)


@pytest.mark.parametrize(
    ("issues", "records", "actions"),
    [
        pytest.param(
            (),
            {},
            [
                OpenIssue(MARKER, title=BLOCKED.title, body=TRACKING.body, labels=BLOCKED.labels),
                RecordIngestion(record(BLOCKED, number=None, state="blocked"), opened=Opened(MARKER)),
            ],
            id="first commit needs a human: a tracking issue, no PR, no push",
        ),
        pytest.param(
            (TRACKING,), {CHAIN: record(BLOCKED, number=3, state="blocked")}, [], id="the issue is up to date"
        ),
        pytest.param(
            (dataclasses.replace(TRACKING, body=f"{MARKER}\nolder text"),),
            {CHAIN: record(BLOCKED, number=3, state="blocked")},
            [UpdateIssue(3, BLOCKED.title, TRACKING.body)],
            id="the issue is edited in place",
        ),
        pytest.param(
            (dataclasses.replace(TRACKING, labels=("sluice:risky-chain",)),),
            {CHAIN: record(BLOCKED, number=3, state="blocked")},
            [],
            id="found by its kind's label, as it was opened with",
        ),
    ],
)
def test_a_unit_with_no_commit_applied_has_a_tracking_issue(
    issues: tuple[ObservedIssue, ...], records: dict[str, IngestionRecord], actions: list[Action]
) -> None:
    assert reconcile(desired(BLOCKED), ObservedState(issues=issues, records=records)) == actions


def test_a_tracking_issue_whose_body_github_would_refuse_is_cut_and_keeps_its_marker() -> None:
    longest = fit_for_github("x" * 70_000)  # a PR body as long as GitHub takes: the marker must still fit
    blocked = dataclasses.replace(BLOCKED, body=longest)
    (opened_issue, *_) = reconcile(desired(blocked), ObservedState())
    assert isinstance(opened_issue, OpenIssue) and opened_issue.body.startswith(f"{MARKER}\n")
    assert len(opened_issue.body) <= GITHUB_TEXT_MAX_CHARS and "(cut: GitHub limits" in opened_issue.body


def test_once_its_first_commit_applies_the_tracking_issue_closes_pointing_at_the_new_pr() -> None:
    observed = ObservedState(issues=(dataclasses.replace(TRACKING, labels=("sluice:needs-human",)),))
    actions = reconcile(desired(C), observed)
    assert actions[0] == PushBranch(CHAIN_BRANCH, H1, lease=None)
    assert CloseIssue(3, continued_in=Opened(CHAIN_BRANCH)) in actions
    assert actions.index(CloseIssue(3, continued_in=Opened(CHAIN_BRANCH))) > actions.index(opened(C)[0])


def test_every_branch_moves_first_in_the_plans_order_then_each_unit_is_published() -> None:
    actions = reconcile(desired(B, C), ObservedState())
    assert actions == [
        PushBranch(BUNDLE_BRANCH, H1, lease=None),
        PushBranch(CHAIN_BRANCH, H1, lease=None),
        *opened(B),
        *opened(C),
    ]


def test_a_person_owning_a_branch_keeps_it_even_when_the_plan_lists_the_unit() -> None:
    observed = dataclasses.replace(ObservedState(), pushed_by_people=frozenset({BUNDLE_BRANCH}))
    assert reconcile(desired(B, C), observed) == [PushBranch(CHAIN_BRANCH, H1, lease=None), *opened(C)]


def test_a_closed_prs_note_says_where_ingestion_goes_on() -> None:
    """The reviewer of a PR Sluice closes learns which PRs (or units still to open) hold the plan now."""
    units = [unit(f"bundle-{i:010d}") for i in range(12)] + [unit(CHAIN, head=None)]
    observed = dataclasses.replace(synced(units[0]), pulls=(pull(units[0], number=40),))
    note = left_the_plan("bundle-gone", desired(*units), observed)
    assert note.startswith(LEFT_THE_PLAN.format(unit_id="bundle-gone", what="PR"))
    assert (
        " Ingestion goes on in: #40 (`bundle-0000000000`), `bundle-0000000001` (its PR opens next)," in note
    )
    assert note.endswith("`bundle-0000000009` (its PR opens next) and 3 more.")  # the chain is the 13th
    alone = left_the_plan("bundle-gone", desired(unit(CHAIN, head=None)), ObservedState())
    assert alone.endswith(f" Ingestion goes on in: `{CHAIN}` (a tracking issue: needs a human).")
