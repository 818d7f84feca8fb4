"""What an ingestion PR and its classification comment say of upstream's commits: their subjects inert, so
upstream's `(#1234)` never links the fork's own #1234 and an `@name` in a subject pings nobody on the fork."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from markdown_it import MarkdownIt

from bot.core import emergency
from bot.core.commands import status_reply
from bot.core.config import SluiceConfig, Strategy
from bot.core.emergency import EmergencyPick
from bot.core.ingestion import Links, PickedUnit, Unit, UnitKind, classification, pr_body
from bot.core.limits import GITHUB_TEXT_MAX_CHARS
from bot.core.models import (
    CommitInfo,
    CommitReport,
    FileEvidence,
    FileReport,
    HunkReport,
    PickStatus,
    RiskKind,
    RiskLevel,
    RiskReason,
)
from bot.core.webhooks import Pull
from bot.flows import patch_stack
from bot.flows.patch_stack import GrowthReport, Overlap
from tests.test_dashboard import planned

SUBJECT = "[AMD] Fix mfma layout | for gfx942 (cc @antiagainst) <b>x</b> (#4567)"
LINKS = Links(
    upstream_web="https://github.com/triton-lang/triton",
    fork_clone_url="https://github.com/meta/triton.git",
    fork_branch="main",
    upstream_clone_url="https://github.com/triton-lang/triton.git",
)


def upstream_commit() -> CommitInfo:
    """The upstream commit of SUBJECT, as git reads it."""
    return CommitInfo(
        sha=planned(1).sha,
        parents=(),
        author_name="a",
        author_email="a@example.com",
        author_time=0,
        committer_time=0,
        message=SUBJECT,
    )


def picked_with(report: CommitReport) -> PickedUnit:
    unit = Unit("chain-abc", UnitKind.CHAIN, (planned(1, "lib/a.cpp", subject=SUBJECT),))
    return PickedUnit(unit, "main", None, (report,))


def inert(text: str) -> None:
    assert "@antiagainst" not in text and "(#4567)" not in text and "<b>" not in text  # no ping, link, HTML
    assert "@&#8203;antiagainst" in text and "(#&#8203;4567)" in text and "\\[AMD]" in text
    assert f"[`{planned(1).sha[:10]}`](https://github.com/triton-lang/triton/commit/" in text  # linked


def test_the_pr_body_and_its_needs_a_human_section_show_upstream_subjects_inert() -> None:
    blocked = CommitReport(
        upstream=planned(1).sha,
        subject=SUBJECT,
        status=PickStatus.NEEDS_HUMAN,
        tree=None,
        files=(
            FileReport(
                path="lib/a.cpp",
                cls="semantic",
                resolved=False,
                rule=None,
                reason="both sides changed it",
                hunks=(),
                evidence=FileEvidence(upstream=planned(1).sha, blame=(), component=None, symbol=None),
            ),
        ),
    )
    body = pr_body(picked_with(blocked), links=LINKS, upstream_parent=None)
    inert(body)
    heading = next(line for line in body.splitlines() if line.startswith("### Needs a human"))
    inert(heading)
    row = next(line for line in body.splitlines() if line.startswith("| 1 |"))
    assert row.count(" | ") == 4 and "mfma layout \\| for gfx942" in row  # one row, its `|` escaped


def test_the_classification_comment_shows_upstream_subjects_inert() -> None:
    clean = CommitReport(upstream=planned(1).sha, subject=SUBJECT, status=PickStatus.CLEAN, tree="t" * 40)
    comment = classification(picked_with(clean), config=SluiceConfig(), links=LINKS)
    inert(comment.render({}))


def test_a_reverts_reason_naming_the_reverted_subject_is_inert_where_it_is_shown() -> None:
    """A revert's `revert` reason names the subject it reverts, upstream's `(#4567)` and @mentions in it."""
    reverts = RiskReason(kind=RiskKind.REVERT, level=RiskLevel.HIGH, detail=f"reverts {SUBJECT}")
    unit = Unit("chain-abc", UnitKind.CHAIN, (planned(1, "lib/a.cpp", subject=SUBJECT, reasons=(reverts,)),))
    clean = CommitReport(upstream=planned(1).sha, subject=SUBJECT, status=PickStatus.CLEAN, tree="t" * 40)
    picked = PickedUnit(unit, "main", None, (clean,))
    body = pr_body(picked, links=LINKS, upstream_parent=None)
    comment = classification(picked, config=SluiceConfig(), links=LINKS).render({})
    for text in (body, comment):
        inert(text)
        assert "revert (high): reverts \\[AMD] Fix mfma layout" in text
    bisected = RiskReason(kind=RiskKind.BISECTED, level=RiskLevel.CRITICAL, detail="L2 failed on #12 (x)")
    unit = Unit("chain-abc", UnitKind.CHAIN, (planned(1, "lib/a.cpp", reasons=(bisected,)),))
    body = pr_body(PickedUnit(unit, "main", None, (clean,)), links=LINKS, upstream_parent=None)
    assert "bisected (critical): L2 failed on #12 (x)" in body  # Sluice's own: the fork's PR linked


def test_a_conflicts_symbol_and_path_with_a_pipe_stay_in_their_cells() -> None:
    """C++ has `operator|`: GitHub splits a table's cells at `|` inside code spans too."""
    blocked = CommitReport(
        upstream=planned(1).sha,
        subject="s",
        status=PickStatus.NEEDS_HUMAN,
        tree=None,
        files=(
            FileReport(
                path="lib/a|b.cpp",
                cls="semantic",
                resolved=False,
                rule=None,
                reason="both sides changed it",
                hunks=(),
                evidence=FileEvidence(
                    upstream=planned(1).sha, blame=(), component=None, symbol="mlir::operator|"
                ),
            ),
        ),
    )
    comment = classification(picked_with(blocked), config=SluiceConfig(), links=LINKS).render({})
    table = comment[comment.index("### Conflicts") :]
    html = MarkdownIt("commonmark").enable("table").render(table)  # GFM's table rules, as GitHub renders
    row = html.split("<tbody>")[1].split("</tr>")[0]
    cells = [c.split(">", 1)[1] for c in row.split("</td>") if "<td" in c]
    assert cells[1:4] == ["<code>lib/a|b.cpp</code>", "semantic", "<code>mlir::operator|</code>"]
    assert cells[-1] == "needs a human: both sides changed it"


def test_the_patch_stack_comment_shows_upstream_subjects_inert_and_fits_github() -> None:
    upstream = upstream_commit()
    overlap = Overlap("lib/a.cpp: mlir::operator|", (upstream,))
    report = GrowthReport(
        commits=1,
        files=("lib/a.cpp",),
        added=1,
        removed=0,
        stack_before=10,
        file_overlaps=(),
        symbol_overlaps=(overlap,),
    )
    text = patch_stack.comment(report, upstream_name="triton-lang/triton")
    row = next(line for line in text.splitlines() if line.startswith("| `lib/a.cpp"))
    assert "@antiagainst" not in row and "(#4567)" not in row and "<b>" not in row
    assert row.startswith("| `lib/a.cpp: mlir::operator\\|` | ") and "mfma layout \\| for gfx942" in row
    huge = replace(report, symbol_overlaps=(replace(overlap, upstream=(upstream,) * 3),) * 25)
    huge_subject = upstream.model_copy(update={"message": "x" * 5000})
    huge = replace(huge, file_overlaps=(Overlap("lib/a.cpp", (huge_subject,) * 3),) * 25)
    assert len(patch_stack.comment(huge, upstream_name="u")) < GITHUB_TEXT_MAX_CHARS


def test_the_local_commands_fetch_the_upstream_commit_before_picking_it() -> None:
    """A clone of the fork lacks the upstream commit that needs a human: cherry-pick alone is a bad object."""
    blocked = CommitReport(upstream=planned(1).sha, subject="s", status=PickStatus.NEEDS_HUMAN, tree=None)
    body = pr_body(picked_with(blocked), links=LINKS, upstream_parent=None)
    script = body.split("```sh\n")[1].split("```")[0].splitlines()
    assert script[:4] == [
        "git fetch https://github.com/meta/triton.git main",
        "git switch --create sluice/ingest/chain-abc FETCH_HEAD",
        f"git fetch https://github.com/triton-lang/triton.git {planned(1).sha}",
        f"git cherry-pick -x {planned(1).sha}",
    ]


def test_a_merge_forks_local_commands_merge_and_its_revert_names_the_fork_side() -> None:
    """`strategy: merge`: each commit merges one upstream commit, so a person merges too, and reverting a
    merge commit needs `-m 1` (git refuses a merge without it)."""
    unit = Unit("chain-abc", UnitKind.CHAIN, (planned(1, "lib/a.cpp"), planned(2, "lib/b.cpp")))
    clean = CommitReport(upstream=planned(1).sha, subject="s", status=PickStatus.CLEAN, tree="t" * 40)
    blocked = CommitReport(upstream=planned(2).sha, subject="s", status=PickStatus.NEEDS_HUMAN, tree=None)
    picked = PickedUnit(unit, "main", "h" * 40, (clean, blocked))
    body = pr_body(picked, links=LINKS, upstream_parent=None, strategy=Strategy.MERGE)
    script, revert = (part.split("```")[0].splitlines() for part in body.split("```sh\n")[1:])
    assert f"git merge --no-ff {planned(2).sha}" in script and not any("cherry-pick" in s for s in script)
    assert "# resolve the conflicts, then: git add <files> && git merge --continue" in script
    assert revert[-1] == "  | xargs -n1 git revert --no-edit -m 1"
    picks = pr_body(picked, links=LINKS, upstream_parent=None)
    assert f"git cherry-pick -x {planned(2).sha}" in picks and "  | xargs git revert --no-edit\n" in picks


def long_chain(count: int) -> tuple[Unit, list[CommitReport]]:
    """A risky chain of `count` commits with long subjects and reasons: its table alone is over GitHub's
    limit; every commit applied but the last, which needs a human."""
    reason = RiskReason(
        kind=RiskKind.PATCH_STACK_FILE, level=RiskLevel.HIGH, detail="touches a pinned file " * 8
    )
    commits = tuple(
        planned(n, "lib/a.cpp", subject=f"[AMD] change number {n} " + "x" * 150).model_copy(
            update={"reasons": (reason,)}
        )
        for n in range(1, count + 1)
    )
    reports = [
        CommitReport(upstream=c.sha, subject=c.subject, status=PickStatus.CLEAN, tree="t" * 40)
        for c in commits[:-1]
    ]
    blocked = CommitReport(
        upstream=commits[-1].sha, subject=commits[-1].subject, status=PickStatus.NEEDS_HUMAN, tree=None
    )
    return Unit("chain-long", UnitKind.CHAIN, commits), [*reports, blocked]


def test_a_long_chains_table_shrinks_and_what_to_do_and_how_to_revert_stay_whole() -> None:
    unit, reports = long_chain(400)
    body = pr_body(PickedUnit(unit, "main", "h" * 40, tuple(reports)), links=LINKS, upstream_parent="p" * 40)
    assert len(body) <= GITHUB_TEXT_MAX_CHARS - 512  # room left for the tracking issue's marker
    rows = [line for line in body.splitlines() if re.match(r"\| \d+ \|", line)]
    assert 100 < len(rows) < 400 and rows[0].startswith("| 1 |")
    more = next(line for line in body.splitlines() if line.startswith("| … |"))
    assert f"| {400 - len(rows)} more commits |" in more and more.count("|") == 6  # a whole row
    assert "(cut: GitHub limits" not in body
    assert f"### Needs a human: [`{unit.commits[-1].sha[:10]}`]" in body  # the part a person acts on
    assert body.rstrip().endswith(
        "(or, when it was merged with a merge commit: `git revert -m 1 <merge sha>`)."
    )


def test_a_short_body_keeps_every_row() -> None:
    unit, reports = long_chain(5)
    body = pr_body(PickedUnit(unit, "main", "h" * 40, tuple(reports)), links=LINKS, upstream_parent=None)
    assert [line[:5] for line in body.splitlines() if line.startswith("| ")][1:] == [
        f"| {n} |" for n in range(1, 6)
    ] and "| … |" not in body


def test_a_long_chains_classification_comment_keeps_its_open_risks_and_shrinks_its_tables() -> None:
    unit, reports = long_chain(400)
    comment = classification(
        PickedUnit(unit, "main", "h" * 40, tuple(reports)), config=SluiceConfig(), links=LINKS
    )
    text = comment.render({})
    assert len(text) < GITHUB_TEXT_MAX_CHARS
    assert "### Unresolved risks" in text and "conflicts need a human (see the PR description)" not in text
    assert re.search(r"- … and \d+ more \(the commit table shows each commit's risk\)", text)
    assert re.search(
        r"\| … \d+ more commits \(the upstream range in the PR description lists them all\) \|", text
    )
    short = classification(picked_with(reports[-1]), config=SluiceConfig(), links=LINKS).render({})
    assert "…" not in short and "conflicts need a human (see the PR description)" in short


def test_a_tracking_issue_says_nothing_applied_and_has_no_revert_section() -> None:
    """Not one commit applied (no head): the body stands in a tracking issue, with nothing to revert."""
    blocked = CommitReport(upstream=planned(1).sha, subject="s", status=PickStatus.NEEDS_HUMAN, tree=None)
    body = pr_body(picked_with(blocked), links=LINKS, upstream_parent=None)
    assert "Sluice could not apply this unit's first commit (no branch yet)" in body
    assert "applied the commits above it" not in body and "How to revert" not in body
    unit, reports = long_chain(3)
    opened = pr_body(PickedUnit(unit, "main", "h" * 40, tuple(reports)), links=LINKS, upstream_parent=None)
    assert "Sluice applied the commits above it and stopped here" in opened and "How to revert" in opened


def test_a_conflict_row_names_its_blocks_lines_and_the_evidence_of_each_resolution() -> None:
    def block(line: int, evidence: str, *, reused: bool = False, blame: tuple[str, ...] = ()) -> HunkReport:
        return HunkReport(
            line=line,
            cls="mechanical",
            rule="adjacent",
            symbol=None,
            evidence=evidence,
            key="k",
            reused=reused,
            blame=blame,
        )

    resolved = FileReport(
        path="lib/a.cpp",
        cls="mechanical",
        resolved=True,
        rule="adjacent",
        reason="resolved 4 conflict block(s) mechanically (adjacent)",
        hunks=(
            block(
                120, "the sides changed different lines that merely touch: applied both", blame=("e" * 40,)
            ),
            block(340, "same", reused=True, blame=("f" * 40, "a" * 40)),
            block(400, "same"),
            block(512, "same"),
        ),
        evidence=FileEvidence(upstream=planned(1).sha, blame=("f" * 40,), component="amd", symbol=None),
    )
    report = CommitReport(
        upstream=planned(1).sha,
        subject="s",
        status=PickStatus.AUTO_RESOLVED,
        tree="t" * 40,
        files=(resolved,),
    )
    text = classification(picked_with(report), config=SluiceConfig(), links=LINKS).render({})
    row = next(line for line in text.splitlines() if "`lib/a.cpp`" in line)
    assert "`lib/a.cpp` (120, 340, 400 and 1 more) (amd)" in row
    assert "resolved (adjacent): line 120: the sides changed different lines that merely touch" in row
    assert "line 340: same, a resolution a person made before" in row and "line 512" not in row
    # the fork's commits bare (GitHub links them), in the order of the blocks
    assert row.count(" | ") == 5 and f"| {'e' * 12}, {'f' * 12}, {'a' * 12} |" in row


def test_an_emergency_picks_reason_and_status_line_are_inert() -> None:
    """`/cherry-pick --reason` is a person's text, an emergency PR's title carries upstream's subject."""
    commit = upstream_commit()
    pick = EmergencyPick(commit, pull=4567, requested_by="alice", reason="for @bob <!-- sluice:bisection -->")
    clean = CommitReport(upstream=commit.sha, subject=SUBJECT, status=PickStatus.CLEAN, tree="t" * 40)
    body = emergency.pr_body(pick, clean, links=LINKS)
    assert "- Reason: for @&#8203;bob &lt;!-- sluice:bisection --&gt;" in body
    status = status_reply("meta/triton", None, (), ((12, emergency.title(pick)),))
    line = next(line for line in status.splitlines() if line.startswith("- #12 "))
    assert "@&#8203;antiagainst" in line and "(#&#8203;4567)" in line and "<b>" not in line


@pytest.mark.parametrize(
    ("ref", "head_repo", "emergency_pick"),
    [
        ("sluice/emergency/0123456789", "meta/triton", True),
        ("sluice/emergency/0123456789", "mallory/triton", False),  # same branch name, someone else's fork
        ("sluice/emergency/0123456789", None, False),  # the head repository was deleted
        ("sluice/bundle-0123456789", "meta/triton", False),
        ("emergency/0123456789", "meta/triton", False),
    ],
)
def test_an_emergency_pick_is_a_pull_from_sluices_branch_in_the_fork_itself(
    ref: str, head_repo: str | None, emergency_pick: bool
) -> None:
    head = {"ref": ref, "sha": "a" * 40, "repo": {"full_name": head_repo} if head_repo else None}
    pull = Pull.model_validate(
        {"number": 7, "state": "open", "head": head, "base": {"ref": "main", "sha": "b" * 40}}
    )
    assert emergency.is_emergency_pull(pull, fork="meta/triton") is emergency_pick
